-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The ROI benchmark, part 5 of 5: what guards it. The triggers that keep results append-only and
-- copy recall outcomes, the row-level security that opens text-bearing rows only inside the gate,
-- and who may call and read what. Last, so every table, function and view of parts 1-4 exists.

-- ============================================================================================
-- Result tables
-- ============================================================================================
-- The one list of result tables: rows recorded once and never rewritten. Declared here, not found
-- by their triggers, so that a test can hold each to the rule (supabase/tests/database/
-- 23-result-tables.sql): every table listed carries both append-only triggers below and no role but
-- its owner may update, delete or truncate it; every table carrying either trigger is listed. A new
-- result table joins this list (in its own migration: create or replace view) and gets both triggers.
create view roi.result_tables with (security_invoker = true) as
select t.table_name
from (values ('roi.runs'), ('roi.recalls'), ('roi.verdicts'), ('roi.run_closures'), ('roi.rotations'),
             ('roi.recall_outcomes'), ('roi.closed_book_results'), ('roi.run_judges'),
             ('roi.judge_check_results'), ('roi.verdict_notes'), ('roi.judge_calibrations'),
             ('roi.scheduled_runs')) t (table_name);

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger runs_are_append_only before update or delete on roi.runs
  for each row execute function roi.forbid_result_change();
create trigger recalls_are_append_only before update or delete on roi.recalls
  for each row execute function roi.forbid_result_change();
create trigger verdicts_are_append_only before update or delete on roi.verdicts
  for each row execute function roi.forbid_result_change();
create trigger run_closures_are_append_only before update or delete on roi.run_closures
  for each row execute function roi.forbid_result_change();
create trigger rotations_are_append_only before update or delete on roi.rotations
  for each row execute function roi.forbid_result_change();
create trigger recall_outcomes_are_append_only before update or delete on roi.recall_outcomes
  for each row execute function roi.forbid_result_change();
create trigger closed_book_results_are_append_only before update or delete on roi.closed_book_results
  for each row execute function roi.forbid_result_change();
create trigger run_judges_are_append_only before update or delete on roi.run_judges
  for each row execute function roi.forbid_result_change();
create trigger judge_check_results_are_append_only before update or delete on roi.judge_check_results
  for each row execute function roi.forbid_result_change();
create trigger judge_calibrations_are_append_only before update or delete on roi.judge_calibrations
  for each row execute function roi.forbid_result_change();
create trigger scheduled_runs_are_append_only before update or delete on roi.scheduled_runs
  for each row execute function roi.forbid_result_change();

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
create trigger recall_outcomes_refuse_truncate before truncate on roi.recall_outcomes
  for each statement execute function roi.forbid_result_truncate();
create trigger closed_book_results_refuse_truncate before truncate on roi.closed_book_results
  for each statement execute function roi.forbid_result_truncate();
create trigger run_judges_refuse_truncate before truncate on roi.run_judges
  for each statement execute function roi.forbid_result_truncate();
create trigger judge_check_results_refuse_truncate before truncate on roi.judge_check_results
  for each statement execute function roi.forbid_result_truncate();
create trigger judge_calibrations_refuse_truncate before truncate on roi.judge_calibrations
  for each statement execute function roi.forbid_result_truncate();
create trigger scheduled_runs_refuse_truncate before truncate on roi.scheduled_runs
  for each statement execute function roi.forbid_result_truncate();

create trigger settings_note_recall_embeddings before insert or update of recall_function on roi.settings
  for each row execute function roi.note_recall_embeddings();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.settings enable row level security;
alter table roi.probes enable row level security;
alter table roi.runs enable row level security;
alter table roi.recalls enable row level security;
alter table roi.verdicts enable row level security;
alter table roi.run_closures enable row level security;
alter table roi.rotations enable row level security;
alter table roi.pending_runs enable row level security;
alter table roi.recall_outcomes enable row level security;
alter table roi.closed_book_results enable row level security;
alter table roi.run_judges enable row level security;
alter table roi.judge_check_results enable row level security;
alter table roi.judge_calibrations enable row level security;

create policy "The benchmark reads its settings" on roi.settings
  for select to authenticated using (true);

create policy "Owners work on their probes only inside the benchmark" on roi.probes
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their runs" on roi.runs
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners start runs only inside the benchmark" on roi.runs
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners handle recall snapshots only inside the benchmark" on roi.recalls
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their verdicts" on roi.verdicts
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners record verdicts only inside the benchmark" on roi.verdicts
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their run closures" on roi.run_closures
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners close runs only inside the benchmark" on roi.run_closures
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners track their pending runs only inside the benchmark" on roi.pending_runs
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their rotations" on roi.rotations
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners rotate only inside the benchmark" on roi.rotations
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their recall outcomes" on roi.recall_outcomes
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners record recall outcomes only inside the benchmark" on roi.recall_outcomes
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their spot-check results" on roi.closed_book_results
  for select to authenticated using (owner_id = (select auth.uid()));

create policy "Owners read the judges of their runs" on roi.run_judges
  for select to authenticated using (owner_id = (select auth.uid()));

create policy "Owners read their judge check results" on roi.judge_check_results
  for select to authenticated using (owner_id = (select auth.uid()));

-- A calibration is the operator's, not an owner's: an owner reads those of the judges that judged
-- their runs (counts only), so the runs view can correct their rates; no other. Nobody but the
-- database owner (the operator's `zm-roi judge-check --record`) writes one.
create policy "Owners read the calibrations of the judges of their runs" on roi.judge_calibrations
  for select to authenticated
  using (judge_fingerprint in (select j.judge_fingerprint from roi.run_judges j
                               where j.owner_id = (select auth.uid())));

-- ============================================================================================
-- Grants
-- ============================================================================================
grant select on roi.settings to authenticated;
grant select, insert, update on roi.probes to authenticated;
grant select, insert on roi.runs, roi.recalls, roi.verdicts, roi.run_closures, roi.rotations
  to authenticated;
grant select, insert, update, delete on roi.pending_runs to authenticated;
grant select, insert on roi.recall_outcomes to authenticated;
grant select on roi.closed_book_results, roi.run_judges, roi.judge_check_results to authenticated;
grant select on roi.judge_calibrations to authenticated;

-- Per-schema default privileges cannot take back the global default (EXECUTE for PUBLIC), so
-- every roi function is revoked from PUBLIC outright; the grants below say who may call what.
-- (A function added to roi in a later file needs its own revoke from public, as upkeep's and the
-- worker's have.) roi.configure_recall and roi.resolve_recall_function are granted to no one:
-- `zm-roi configure` runs them as the database owner. A trigger function needs no grant to fire.
revoke execute on all functions in schema roi from public;

grant execute on function roi.inside_benchmark(), roi.open_gate(), roi.close_gate(),
  roi.template_question(text, text, text), roi.pool_counts(), roi.retire_unreachable_probes(),
  roi.never_probed_knowledge(integer), roi.take_over_pending_probes(), roi.top_up_pool(),
  roi.rotate_and_top_up(uuid), roi.rotate_completed_runs(uuid), roi.retire_longest_serving(uuid, integer),
  roi.refill_pool(public.memories[]), roi.close_run_if_done(uuid), roi.close_overdue_run(uuid),
  roi.close_run_left_without_judge(uuid), roi.record_run_closure(uuid, text, text, text),
  roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text), roi.note_recall_outcomes(uuid),
  roi.queue_judge_checks(uuid),
  roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector),
  roi.start_run(text),
  roi.open_run(), roi.owner_lock_key(uuid), roi.run_lock_key(uuid), roi.wait_for_owner_lock(bigint),
  roi.wilson_bound(bigint, bigint, boolean), roi.sign_test_p(bigint, bigint),
  roi.run_judge_fingerprint(uuid, text), roi.hand_template_questions_to_writer(),
  roi.knowledge_growth_since(timestamptz),
  roi.judge_corrected_rate(integer, integer, integer, integer, integer, integer)
  to authenticated;

revoke execute on function public.benchmark_memory(), public.roi_benchmark_comparison(uuid) from public, anon;
grant execute on function public.benchmark_memory(), public.roi_benchmark_comparison(uuid) to authenticated;

revoke all on public.roi_benchmark_runs, public.roi_benchmark_breakdown, public.roi_benchmark_tile
  from anon, authenticated;
grant select on public.roi_benchmark_runs, public.roi_benchmark_breakdown, public.roi_benchmark_tile
  to authenticated;
