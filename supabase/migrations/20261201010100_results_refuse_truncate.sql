-- Results are append-only, and that includes TRUNCATE: the row triggers on the result tables never
-- fire for it, so until now the table owner could empty the history in one statement. A
-- statement-level trigger refuses it on every result table (runs, recall snapshots, verdicts,
-- closures, rotations, verdict notes). Erasing a user still works: that is a DELETE cascade.

-- ============================================================================================
-- Functions
-- ============================================================================================

-- Refuses TRUNCATE of a result table, for every role including its owner.
create function roi.forbid_result_truncate() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  raise exception 'roi.%: recorded results are append-only (truncate refused)', tg_table_name
    using errcode = 'insufficient_privilege';
end
$$;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger runs_refuse_truncate before truncate on roi.runs
  for each statement execute function roi.forbid_result_truncate();
create trigger recalls_refuse_truncate before truncate on roi.recalls
  for each statement execute function roi.forbid_result_truncate();
create trigger verdicts_refuse_truncate before truncate on roi.verdicts
  for each statement execute function roi.forbid_result_truncate();
create trigger run_closures_refuse_truncate before truncate on roi.run_closures
  for each statement execute function roi.forbid_result_truncate();
create trigger rotations_refuse_truncate before truncate on roi.rotations
  for each statement execute function roi.forbid_result_truncate();
create trigger verdict_notes_refuse_truncate before truncate on roi.verdict_notes
  for each statement execute function roi.forbid_result_truncate();

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.forbid_result_truncate() from public;
