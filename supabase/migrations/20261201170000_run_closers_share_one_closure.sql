-- The three ways a run closes (every verdict in, overdue, left without a judge) each wrote the same
-- steps: the run's lock, the run read, the closure row, its pending run marked closed, its queued
-- judgments dropped, and two of them the insert of the unjudged probes as skipped. One helper,
-- roi.record_run_closure, now does them, and the three closers say only what is their own: the
-- timeout, the mode. What each returns and records is unchanged.

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The steps every way of closing a run shares, under the run's lock (so two workers recording the
-- last two verdicts cannot both miss the moment): nothing for a run gone or closed already; the
-- probes still unjudged recorded as skipped for `skip_reason` by `skipped_by`, when one is given;
-- then the closure, its pending run marked closed for rotation, and its judgments still queued
-- dropped. A run closes as 'complete' only once every probe has its verdict.
create function roi.record_run_closure(target_run uuid, reason text, skip_reason text, skipped_by text)
  returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  run roi.runs;
begin
  perform pg_advisory_xact_lock(roi.run_lock_key(target_run));
  select * into run from roi.runs r where r.id = target_run;
  if run.id is null or exists (select from roi.run_closures c where c.run_id = target_run) then
    return false;
  end if;
  if skip_reason is not null then
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, true, skip_reason, skipped_by
    from roi.recalls rc
    join roi.probes p on p.id = rc.probe_id
    where rc.run_id = target_run
    on conflict (run_id, probe_id) do nothing;
  end if;
  if reason = 'complete' and (select count(*) from roi.verdicts v where v.run_id = target_run) < run.probe_count then
    return false;
  end if;
  insert into roi.run_closures (run_id, owner_id, reason) values (target_run, run.owner_id, reason)
  on conflict (run_id) do nothing;
  update roi.pending_runs pr set closed = true where pr.run_id = target_run;
  delete from roi.work w where w.run_id = target_run and w.kind = 'judge';
  return true;
end
$$;

-- Close a run whose every probe has a verdict (the worker, after each verdict; upkeep, as a backstop).
create or replace function roi.close_run_if_done(target_run uuid) returns boolean
  language sql volatile security invoker set search_path = ''
as $$
  select roi.record_run_closure(target_run, 'complete', null, null);
$$;

-- Close a run past the timeout: the probes still unjudged are recorded as skipped, and the run
-- counts what was judged. Used by benchmark_memory() for the caller and by upkeep for everyone.
create or replace function roi.close_overdue_run(target_run uuid) returns boolean
  language sql volatile security invoker set search_path = ''
as $$
  select coalesce((select roi.record_run_closure(r.id, 'timeout', 'timeout', 'timeout') from roi.runs r
                   where r.id = target_run
                     and r.started_at <= clock_timestamp() - (select s.run_timeout from roi.settings s)), false);
$$;

-- Deterministic mode: an open LLM run of the caller has no judge coming. Its unjudged probes are
-- recorded as skipped ('mode_changed') and the run closes now, counting what the model did judge, so
-- the same benchmark call starts a deterministic run. False (nothing done) in LLM mode or for a
-- deterministic run.
create or replace function roi.close_run_left_without_judge(target_run uuid) returns boolean
  language sql volatile security invoker set search_path = ''
as $$
  select coalesce((select roi.record_run_closure(r.id, 'complete', 'mode_changed', 'deterministic')
                   from roi.runs r
                   where r.id = target_run and r.mode = 'llm'
                     and (select s.extractor from roi.settings s) = 'deterministic'), false);
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.record_run_closure(uuid, text, text, text) from public;
grant execute on function roi.record_run_closure(uuid, text, text, text) to authenticated, roi_worker;
