-- Deterministic mode takes over what LLM mode left queued.
--
-- Switching a database from LLM to deterministic mode (`zm-roi configure --extractor deterministic`)
-- used to strand two things: pending probes that only a worker would ever write a question for (the
-- benchmark answered "generating 0 of N" forever) and an open LLM run whose judgments no worker
-- would claim (the benchmark answered `in_progress` until the run timeout). Now deterministic mode
-- gives pending probes their template question when it tops up a pool, and the benchmark closes an
-- open LLM run at once, its unjudged probes recorded as skipped ('mode_changed'), so the same call
-- starts a deterministic run.
--
-- Redefines roi.top_up_pool() (current body from 20261130000500_recall_at_scale) and
-- public.benchmark_memory() (current body from 20261130000200_roi_benchmark); each gains one call.

-- ============================================================================================
-- Constraints
-- ============================================================================================
alter table roi.verdicts drop constraint verdicts_skip_reason_check;
alter table roi.verdicts add constraint verdicts_skip_reason_check
  check (skip_reason in ('timeout', 'judge_failed', 'probe_retired', 'mode_changed'));

-- ============================================================================================
-- Functions
-- ============================================================================================

-- Deterministic mode: the caller's pending probes (queued for a worker that is not coming) get their
-- template question and join the pool. A worker still holding one finds it no longer pending and
-- drops its question (roi.record_question returns false).
create function roi.take_over_pending_probes() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  taken integer;
begin
  update roi.probes p
  set question = roi.template_question(p.source_kind, p.source_title, p.source_body),
      state = 'active', activated_at = now(), lease_until = null, last_error = null
  where p.owner_id = (select auth.uid()) and p.state = 'pending';
  get diagnostics taken = row_count;
  return taken;
end
$$;

-- Deterministic mode: an open LLM run of the caller has no judge coming. Its unjudged probes are
-- recorded as skipped ('mode_changed') and the run closes now, counting what the model did judge.
-- False (nothing done) in LLM mode or for a deterministic run.
create function roi.close_run_left_without_judge(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  if (select s.extractor from roi.settings s) <> 'deterministic'
     or not exists (select from roi.runs r where r.id = target_run and r.mode = 'llm') then
    return false;
  end if;
  perform pg_advisory_xact_lock(hashtextextended('roi.run:' || target_run::text, 0));
  insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
  select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, true, 'mode_changed', 'deterministic'
  from roi.recalls rc
  join roi.probes p on p.id = rc.probe_id
  where rc.run_id = target_run
  on conflict (run_id, probe_id) do nothing;
  return roi.close_run_if_done(target_run);
end
$$;

-- Fill the caller's pool up to the target from never-probed live knowledge, newest first, selected
-- as the caller. Unchanged from recall_at_scale except that deterministic mode first takes over the
-- probes LLM mode left pending.
create or replace function roi.top_up_pool() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  counts record;
  added integer;
begin
  select * into config from roi.settings;
  if config.extractor = 'deterministic' then
    perform roi.take_over_pending_probes();
  end if;
  select * into counts from roi.pool_counts();
  if counts.active + counts.pending >= config.pool_target then
    return 0;
  end if;
  insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                          pin_project_id, pin_team_id, question, state, activated_at)
  select (select auth.uid()), m.id, m.kind, m.scope, m.title, m.body, m.project_id, m.team_id,
         q.question,
         case when q.question is null then 'pending' else 'active' end,
         case when q.question is null then null else now() end
  from roi.never_probed_knowledge(config.pool_target - counts.active - counts.pending) m
  cross join lateral (
    select case when config.extractor = 'deterministic'
      then roi.template_question(m.kind, m.title, m.body) end as question
  ) q
  on conflict (owner_id, memory_id) do nothing;
  get diagnostics added = row_count;
  if added > 0 and config.extractor = 'llm' then
    perform pg_notify('roi_work', 'probe_generation');
  end if;
  return added;
end
$$;


-- The benchmark, called by the MCP tool through the Data API as the signed-in user. Unchanged from
-- roi_benchmark except that, in deterministic mode, an open LLM run no longer blocks a new run.
create or replace function public.benchmark_memory() returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  caller uuid := auth.uid();
  lock_key bigint;
  newest_before uuid;
  running roi.runs;
  config roi.settings;
  counts record;
  result jsonb;
begin
  if caller is null or coalesce(auth.role(), '') <> 'authenticated' then
    raise exception 'benchmark_memory() needs a signed-in user: call it with the user''s access token'
      using errcode = '28000';
  end if;
  lock_key := roi.owner_lock_key(caller);
  perform roi.open_gate();

  -- A concurrent call for the same owner: wait for it (briefly), then report the run it started.
  if not pg_try_advisory_xact_lock(lock_key) then
    select r.id into newest_before from roi.runs r
    where r.owner_id = caller order by r.started_at desc limit 1;
    if not roi.wait_for_owner_lock(lock_key) then
      perform roi.close_gate();
      return jsonb_build_object('status', 'in_progress', 'run_id', newest_before);
    end if;
    select r.* into running from roi.runs r
    where r.owner_id = caller order by r.started_at desc limit 1;
    if running.id is distinct from newest_before then
      perform roi.close_gate();
      return jsonb_build_object('status', 'in_progress', 'run_id', running.id);
    end if;
  end if;

  running := roi.open_run();
  if running.id is not null and not roi.close_overdue_run(running.id)
     and not roi.close_run_left_without_judge(running.id) then
    perform roi.close_gate();
    return jsonb_build_object('status', 'in_progress', 'run_id', running.id);
  end if;

  select * into config from roi.settings;
  perform roi.retire_unreachable_probes();
  perform roi.top_up_pool();
  select * into counts from roi.pool_counts();

  if counts.active = 0 and counts.pending = 0 then
    result := jsonb_build_object('status', 'empty', 'message',
      'No live decision, gotcha or convention memory is visible to you yet: store some knowledge first.');
  elsif counts.pending > 0 and counts.active < config.pool_target then
    result := jsonb_build_object('status', 'generating', 'ready', counts.active,
                                 'target', counts.active + counts.pending);
  else
    result := roi.start_run(config.extractor);
  end if;
  perform roi.close_gate();
  return result;
end
$$;


-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.take_over_pending_probes(), roi.close_run_left_without_judge(uuid) from public;
grant execute on function roi.take_over_pending_probes(), roi.close_run_left_without_judge(uuid)
  to authenticated;
