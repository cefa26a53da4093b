-- One rotation path (issue 19): after a completed run the owner's next benchmark_memory() call
-- rotates and tops up the pool, as the caller, in both modes (roi.rotate_completed_runs): a
-- deterministic run is rotated by the call that judged it, an LLM run the worker closed by the
-- owner's next call instead of waiting for the next pg_cron cycle. Upkeep goes through the same
-- function, as the backstop for owners who never call again. roi.rotate_pool() had no caller left.

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The one rotation path, as the caller, in both modes: after each of the caller's completed runs not
-- yet rotated (an LLM run the worker closed since, or `just_completed`, the deterministic run this
-- call just judged) rotate and top up, and let the run's bookkeeping go. benchmark_memory() calls it
-- on every call; upkeep (pg_cron, impersonating the owner) for owners who never call again.
create or replace function roi.rotate_completed_runs(just_completed uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  done_run uuid;
  retired integer := 0;
begin
  for done_run in
    select pr.run_id from roi.pending_runs pr
    where pr.owner_id = (select auth.uid()) and pr.closed
    order by pr.started_at
  loop
    retired := retired + roi.rotate_and_top_up(done_run);
    delete from roi.pending_runs pr where pr.run_id = done_run;
  end loop;
  if exists (select from roi.run_closures c where c.run_id = just_completed) then
    retired := retired + roi.rotate_and_top_up(just_completed);
  end if;
  return retired;
end
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced, and either record strict verdicts at once (deterministic) or queue one judgment per
-- probe (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged and closed before this returns, so it is never pending (no
-- pending_runs row is written only to be deleted); benchmark_memory() rotates after it at once.
create or replace function roi.start_run(mode text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  new_run uuid;
  run_started timestamptz;
  probe_total integer;
  question_model text;
  judged integer;
begin
  select count(*), mode() within group (order by p.question_embedding_model)
  into probe_total, question_model
  from roi.probes p where p.owner_id = (select auth.uid()) and p.state = 'active';
  -- clock_timestamp(), not now(): runs started in one transaction still order by when they began.
  insert into roi.runs (owner_id, mode, probe_count, started_at, recall_function, embedding_model)
  values ((select auth.uid()), mode, probe_total, clock_timestamp(),
          (select s.recall_function from roi.settings s),
          case when (select s.recall_takes_embedding from roi.settings s) then question_model end)
  returning id, started_at into new_run, run_started;
  if mode <> 'deterministic' then
    insert into roi.pending_runs (run_id, owner_id, started_at) values (new_run, (select auth.uid()), run_started);
  end if;

  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select new_run, p.id, p.owner_id,
         coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}'),
         coalesce(jsonb_agg(jsonb_build_object(
           'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
           'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
           filter (where r.memory_id is not null), '[]')
  from roi.probes p
  left join lateral roi.configured_recall(p.question, p.pin_project_id, p.pin_team_id, 10,
                                          p.source_scope = 'personal', p.question_embedding) r on true
  where p.owner_id = (select auth.uid()) and p.state = 'active'
  group by p.id, p.owner_id;

  update roi.probes p set runs_served = p.runs_served + 1
  where p.owner_id = (select auth.uid()) and p.state = 'active';

  if mode = 'deterministic' then
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, p.memory_id = any (rc.surfaced_ids), false,
           'deterministic'
    from roi.recalls rc join roi.probes p on p.id = rc.probe_id
    where rc.run_id = new_run;
    get diagnostics judged = row_count;
    -- Every probe of the run has its verdict: the run is complete (roi.close_run_if_done's test,
    -- without its lock, its recount or a judging queue to clear, none of which a run nobody else
    -- can see yet needs).
    if judged >= probe_total then
      insert into roi.run_closures (run_id, owner_id, reason) values (new_run, (select auth.uid()), 'complete');
    else
      perform roi.close_run_if_done(new_run);
    end if;
  else
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select 'judge', rc.run_id, rc.probe_id, rc.owner_id from roi.recalls rc where rc.run_id = new_run;
    perform pg_notify('roi_work', 'judge');
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total);
end
$$;

-- The benchmark, called by the MCP tool through the Data API as the signed-in user. SECURITY
-- INVOKER: every recall runs as the caller with RLS applied. One run per owner at a time: a
-- transaction-scoped advisory lock serialises concurrent calls, and an open run is the durable
-- guard that makes a later call answer `in_progress` (unless it is overdue, or an LLM run left
-- without a judge in deterministic mode: either is closed and a new run starts). After a completed
-- run the pool rotates and tops up before the call returns, in both modes (roi.rotate_completed_runs):
-- the run it just judged (deterministic), an LLM run the worker closed since the last call. JIT off: its
-- statements are short, and their estimates grow with the tables, not with their work.
create or replace function public.benchmark_memory() returns jsonb
  language plpgsql volatile security invoker set search_path = '' set jit = off
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
  perform roi.rotate_completed_runs((result ->> 'run_id')::uuid);
  perform roi.close_gate();
  return result;
end
$$;

-- Retire, rotate and top up one owner's pool, as that owner: the backstop for an owner who does not
-- call again after a run (the call itself rotates, through the same roi.rotate_completed_runs()).
-- Returns what it did (`added` counts the top-up after rotation's own refill).
create or replace function roi.upkeep_owner(owner uuid) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  retired integer;
  rotated integer;
  added integer;
begin
  perform roi.impersonate(owner);
  perform roi.open_gate();
  retired := roi.retire_unreachable_probes();
  rotated := roi.rotate_completed_runs(null);
  added := roi.top_up_pool();
  perform roi.close_gate();
  perform set_config('role', 'none', true);
  perform set_config('request.jwt.claims', '', true);
  return jsonb_build_object('retired', retired, 'rotated', rotated, 'added', added);
end
$$;

drop function roi.rotate_pool(uuid);

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.rotate_completed_runs(uuid) from public;
grant execute on function roi.rotate_completed_runs(uuid) to authenticated;
