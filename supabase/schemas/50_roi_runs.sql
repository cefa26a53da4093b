-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The ROI benchmark's runs, starting with the one entry point agents call, public.benchmark_memory().
-- Then the one writer of verdicts, closing a run (every verdict in, overdue, or left without a judge),
-- roi.start_run (the recall of every active probe as the caller, snapshotted, then its verdicts or its
-- judgments and checks of the judge queued), the text-free recall outcomes it copies from each
-- snapshot, the advisory lock keys that serialise an owner and a run, and who judged a run. Cut here
-- because this is "how a run starts and how its verdicts are recorded"; the pool it draws on is
-- 40_roi_pool.sql, which recall function it calls 45_roi_recall_function.sql, what clients read of
-- runs 61_roi_views.sql, the worker's side of LLM runs 70_roi_queue.sql and 71_roi_worker_verbs.sql.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The benchmark, called by the MCP tool through the Data API as the signed-in user. SECURITY
-- INVOKER: every recall runs as the caller with RLS applied. One run per owner at a time: a
-- transaction-scoped advisory lock serialises concurrent calls, and an open run is the durable
-- guard that makes a later call answer `in_progress` (unless it is overdue, or an LLM run left
-- without a judge in deterministic mode: either is closed and a new run starts). After a completed
-- run the pool rotates and tops up before the call returns, in both modes (roi.rotate_completed_runs):
-- the run it just judged (deterministic), an LLM run the worker closed since the last call. JIT off: its
-- statements are short, and their estimates grow with the tables, not with their work.
create function public.benchmark_memory() returns jsonb
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
  -- The probes no run of this call recalls are checked for a source gone now; the run's own after
  -- their recalls (roi.start_run). In LLM mode all of them now: template questions leave the run
  -- for the writer before it starts.
  perform roi.retire_unreachable_probes(case when config.extractor = 'llm' then array['pending', 'active']
                                             else array['pending'] end);
  if config.extractor = 'llm' then
    perform roi.hand_template_questions_to_writer();
  end if;
  -- Again when roi.start_run retired some of the run's probes instead of starting it (a source
  -- became unreachable): the pool tops up and the run starts with their replacements, as it would
  -- have had they been retired first.
  loop
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
    exit when result is not null;
  end loop;
  perform roi.rotate_completed_runs((result ->> 'run_id')::uuid);
  perform roi.close_gate();
  return result;
end
$$;

-- The one writer of roi.verdicts: the verdicts of run `target_run` for `target_probe` (null: every
-- probe of the run that has none yet), judged by `judged_by`. With a `skip_reason` they are recorded
-- as skipped; else 'deterministic' is the strict retrieval check (with_memory: the source is among
-- the surfaced results; without_memory: false) and any other judge's answers are recorded as given.
-- A verdict already recorded stays (never a second). Returns how many it recorded. PL/pgSQL for the
-- reason given at roi.close_run_if_done: it runs once per verdict the worker records.
create function roi.write_verdicts(target_run uuid, target_probe uuid, judged_by text,
  judged_with_memory boolean default null, judged_without_memory boolean default null,
  judged_confidence real default null, skip_reason text default null) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  recorded integer;
begin
  -- Two statements, one per shape of call, each with a plan of its own: a verdict the worker records
  -- reads one recall by its key (one statement with `target_probe is null or …` read the run's every
  -- recall, each through the worker's read policy: ~1 ms a verdict more).
  if target_probe is null then
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, confidence,
                              skipped, skip_reason, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then p.memory_id = any (rc.surfaced_ids)
                else judged_with_memory end,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then false
                else judged_without_memory end,
           case when skip_reason is null then judged_confidence end,
           skip_reason is not null, skip_reason, judged_by
    from roi.recalls rc
    join roi.probes p on p.id = rc.probe_id
    where rc.run_id = target_run
    on conflict (run_id, probe_id) do nothing;
  else
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, confidence,
                              skipped, skip_reason, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then p.memory_id = any (rc.surfaced_ids)
                else judged_with_memory end,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then false
                else judged_without_memory end,
           case when skip_reason is null then judged_confidence end,
           skip_reason is not null, skip_reason, judged_by
    from roi.recalls rc
    join roi.probes p on p.id = rc.probe_id
    where rc.run_id = target_run and rc.probe_id = target_probe
    on conflict (run_id, probe_id) do nothing;
  end if;
  get diagnostics recorded = row_count;
  return recorded;
end
$$;

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
    perform roi.write_verdicts(target_run, null, skipped_by, skip_reason => skip_reason);
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
-- PL/pgSQL, not SQL: a SQL function with its own search_path is never inlined, and its body is parsed
-- and planned again in every transaction that calls it, once per verdict; PL/pgSQL keeps its plan.
create function roi.close_run_if_done(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  return roi.record_run_closure(target_run, 'complete', null, null);
end
$$;

-- Close a run past the timeout: the probes still unjudged are recorded as skipped, and the run
-- counts what was judged. Used by benchmark_memory() for the caller and by upkeep for everyone.
create function roi.close_overdue_run(target_run uuid) returns boolean
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
create function roi.close_run_left_without_judge(target_run uuid) returns boolean
  language sql volatile security invoker set search_path = ''
as $$
  select coalesce((select roi.record_run_closure(r.id, 'complete', 'mode_changed', 'deterministic')
                   from roi.runs r
                   where r.id = target_run and r.mode = 'llm'
                     and (select s.extractor from roi.settings s) = 'deterministic'), false);
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced with its text-free outcome, and either record strict verdicts at once
-- (deterministic: the snapshot keeps the ids alone, the text only a model judge reads is left out)
-- or queue one judgment per probe and the run's checks of the judge (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged and closed before this returns, so it is never pending (no
-- pending_runs row is written only to be deleted); benchmark_memory() rotates after it at once.
-- The recalls are taken before anything is written: a probe whose source did not surface is then
-- checked for a source gone (roi.retire_unreachable_probes; one that surfaced is reachable by
-- construction), and when that retires any, no run starts and this returns null, so that
-- benchmark_memory() tops the pool up and calls again. The configured recall function is checked
-- once per run, and the bundled one called directly.
-- A question vector is compared only with vectors of its own model (issue 33): a semantic leg is left
-- out of the run (its question vectors passed as null, its model recorded as null, a hint in the
-- answer says to run `zm-roi embed`) when a live memory the caller can see holds a vector of that leg
-- from another model, or of no recorded model; a probe whose question another model embedded passes
-- null for that leg. One EXISTS per leg and run, read from the partial index of that leg's vectors by
-- layer and model (10_memory_core.sql): it reads only the caller's layers' rows of another model,
-- none in the usual case, whatever other users' memories hold.
create function roi.start_run(mode text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  new_run uuid;
  run_started timestamptz;
  probe_total integer;
  question_model text;
  question_minilm_model text;
  legs smallint := (select s.recall_embeddings from roi.settings s);
  first_leg boolean;
  minilm_leg boolean;
  layers uuid[];
  left_out text;
  judged integer;
  bundled boolean := roi.checked_recall_function()
    = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)'::regprocedure;
  snapshots roi.recalls[];
  surfaced_sources uuid[];
  keeps_text boolean := mode <> 'deterministic';
begin
  select count(*), mode() within group (order by p.question_embedding_model),
         mode() within group (order by p.question_embedding_minilm_model)
  into probe_total, question_model, question_minilm_model
  from roi.probes p where p.owner_id = (select auth.uid()) and p.state = 'active';
  -- The layers the caller reads (the memories' read policy's), each read as a range of the index
  -- by layer and model: `<`, `>` and null, not `is distinct from`, which no index serves.
  layers := array[(select auth.uid())] || array(select public.caller_project_ids())
            || array(select public.caller_team_ids());
  first_leg := legs > 0 and question_model is not null and not exists (
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model < question_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model > question_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model is null);
  minilm_leg := legs > 1 and question_minilm_model is not null and not exists (
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model < question_minilm_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model > question_minilm_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model is null);
  left_out := concat_ws(' and ',
    case when legs > 0 and question_model is not null and not first_leg then question_model end,
    case when legs > 1 and question_minilm_model is not null and not minilm_leg then question_minilm_model end);
  -- Two statements, one per kind of recall function, each with a plan of its own (one statement
  -- for both was planned afresh on every call, ~0.2 ms). `keeps_text` filters the text's aggregate
  -- too: one inside CASE is computed all the same.
  if bundled then
    select coalesce(array_agg(row(null, x.probe_id, x.owner_id, x.surfaced_ids, x.surfaced, now())::roi.recalls), '{}'),
           coalesce(array_agg(x.memory_id) filter (where x.memory_id = any (x.surfaced_ids)), '{}')
    into snapshots, surfaced_sources
    from (
      select p.id as probe_id, p.owner_id, p.memory_id,
             coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}') as surfaced_ids,
             case when keeps_text then coalesce(jsonb_agg(jsonb_build_object(
               'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
               'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
               filter (where keeps_text and r.memory_id is not null), '[]') end as surfaced
      from roi.probes p
      left join lateral public.recall(p.question, p.pin_project_id, p.pin_team_id, 10, p.source_scope = 'personal',
                           case when first_leg and p.question_embedding_model = question_model
                                then p.question_embedding end,
                           case when minilm_leg and p.question_embedding_minilm_model = question_minilm_model
                                then p.question_embedding_minilm end)
        with ordinality as r (memory_id, kind, scope, title, body, score, rank) on true
      where p.owner_id = (select auth.uid()) and p.state = 'active'
      group by p.id, p.owner_id, p.memory_id
    ) x;
  else
    select coalesce(array_agg(row(null, x.probe_id, x.owner_id, x.surfaced_ids, x.surfaced, now())::roi.recalls), '{}'),
           coalesce(array_agg(x.memory_id) filter (where x.memory_id = any (x.surfaced_ids)), '{}')
    into snapshots, surfaced_sources
    from (
      select p.id as probe_id, p.owner_id, p.memory_id,
             coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}') as surfaced_ids,
             case when keeps_text then coalesce(jsonb_agg(jsonb_build_object(
               'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
               'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
               filter (where keeps_text and r.memory_id is not null), '[]') end as surfaced
      from roi.probes p
      left join lateral roi.configured_recall(p.question, p.pin_project_id, p.pin_team_id, 10, p.source_scope = 'personal',
                                      case when first_leg and p.question_embedding_model = question_model
                                           then p.question_embedding end,
                                      case when minilm_leg and p.question_embedding_minilm_model = question_minilm_model
                                           then p.question_embedding_minilm end) r on true
      where p.owner_id = (select auth.uid()) and p.state = 'active'
      group by p.id, p.owner_id, p.memory_id
    ) x;
  end if;
  -- A source the bundled recall returned is live and visible to the caller (its contract); another
  -- function's results prove nothing, and every source is read.
  if roi.retire_unreachable_probes(array['active'], case when bundled then surfaced_sources else '{}' end) > 0 then
    return null;
  end if;

  -- clock_timestamp(), not now(): runs started in one transaction still order by when they began.
  insert into roi.runs (owner_id, mode, probe_count, started_at, recall_function, embedding_model,
                        embedding_minilm_model)
  values ((select auth.uid()), mode, probe_total, clock_timestamp(),
          (select s.recall_function from roi.settings s),
          case when first_leg then question_model end,
          case when minilm_leg then question_minilm_model end)
  returning id, started_at into new_run, run_started;
  if mode <> 'deterministic' then
    insert into roi.pending_runs (run_id, owner_id, started_at) values (new_run, (select auth.uid()), run_started);
  end if;

  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select new_run, n.probe_id, n.owner_id, n.surfaced_ids, n.surfaced from unnest(snapshots) n;

  perform roi.note_recall_outcomes(new_run);

  if mode = 'deterministic' then
    judged := roi.write_verdicts(new_run, null, 'deterministic');
    -- Every probe of the run has its verdict: the run is complete (roi.close_run_if_done's test,
    -- without its lock, its recount or a judging queue to clear, none of which a run nobody else
    -- can see yet needs).
    if judged >= probe_total then
      insert into roi.run_closures (run_id, owner_id, reason) values (new_run, (select auth.uid()), 'complete');
    else
      perform roi.close_run_if_done(new_run);
    end if;
  else
    -- One judgment per recall, then the run's checks of the judge.
    perform roi.enqueue('judge', (select auth.uid()),
                        array(select rc.probe_id from roi.recalls rc where rc.run_id = new_run), new_run);
    perform roi.queue_judge_checks(new_run);
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total)
    || case when left_out <> '' then jsonb_build_object('hint', format(
         'Semantic recall by %s was left out of this run: some of your memories hold vectors of another '
         'embedding model than the questions'', and vectors of two models cannot be compared. Run `zm-roi '
         'embed` to re-embed them.', left_out)) else '{}' end;
end
$$;

-- The text-free outcome of each recall of a run (source rank, kind, scope, question origin), which
-- owners read as they read verdicts (the retrieval figures of the views). Runs as whoever recorded the
-- recalls (the owner, inside the benchmark).
create function roi.note_recall_outcomes(target_run uuid) returns void
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank,
                                   question_origin)
  select n.run_id, n.probe_id, n.owner_id, p.source_kind, p.source_scope,
         array_position(n.surfaced_ids, p.memory_id), p.question_origin
  from roi.recalls n join roi.probes p on p.id = n.probe_id
  where n.run_id = target_run
  on conflict (run_id, probe_id) do nothing;
end
$$;

-- An LLM run's checks of the judge, each on probes of the run picked at random: up to
-- roi.settings.closed_book_checks closed-book spot-checks, withheld_source_checks leniency checks (among
-- probes whose source surfaced) and order_checks order checks (among probes with 2 or more results),
-- fewer when some are queued or recorded already. Nothing for a deterministic run. Runs as the owner,
-- inside the benchmark. Returns how many it queued.
create function roi.queue_judge_checks(target_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  run roi.runs;
  picked record;
  queued integer := 0;
begin
  select * into config from roi.settings;
  select * into run from roi.runs r where r.id = target_run;
  if run.mode is distinct from 'llm' then
    return 0;
  end if;
  for picked in
    select c.kind, array_agg(x.probe_id) as probes
    from (values ('closed_book', config.closed_book_checks),
                 ('judge_withheld', config.withheld_source_checks),
                 ('judge_reversed', config.order_checks)) c (kind, wanted)
    cross join lateral (
      select n.probe_id
      from roi.recalls n
      join roi.probes p on p.id = n.probe_id
      where n.run_id = target_run
        and case c.kind when 'judge_withheld' then p.memory_id = any (n.surfaced_ids)
                        when 'judge_reversed' then cardinality(n.surfaced_ids) >= 2
                        else true end
      order by random()
      limit greatest(c.wanted
                     - (select count(*) from roi.work q where q.run_id = target_run and q.kind = c.kind)
                     - (select count(*) from roi.closed_book_results b
                        where c.kind = 'closed_book' and b.run_id = target_run)
                     - (select count(*) from roi.judge_check_results j
                        where j.run_id = target_run and j.kind = c.kind), 0)
    ) x
    where c.wanted > 0
    group by c.kind
  loop
    queued := queued + roi.enqueue(picked.kind, run.owner_id, picked.probes, target_run);
  end loop;
  return queued;
end
$$;

-- The advisory lock key that serialises everything done to one owner's pool and runs. PL/pgSQL for the
-- reason given at roi.close_run_if_done: taken once a benchmark call, twice an owner in upkeep.
create function roi.owner_lock_key(owner uuid) returns bigint
  language plpgsql immutable security invoker set search_path = ''
as $$
begin
  return hashtextextended('roi.benchmark:' || owner::text, 0);
end
$$;

-- The advisory lock key that serialises closing one run (its last verdicts, its timeout, a switch of
-- mode), so that two closers cannot both miss the moment or both close it. PL/pgSQL for the reason
-- given at roi.close_run_if_done: it is taken once per verdict.
create function roi.run_lock_key(run uuid) returns bigint
  language plpgsql immutable security invoker set search_path = ''
as $$
begin
  return hashtextextended('roi.run:' || run::text, 0);
end
$$;

-- Wait up to roi.settings.owner_lock_wait (default 30 seconds) for the owner's lock: a concurrent
-- call finishes well within that, and a caller should hear `in_progress` rather than hang behind
-- something stuck. A setting, so a deployment can tune it and tests need not wait half a minute.
create function roi.wait_for_owner_lock(lock_key bigint) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  previous text := current_setting('lock_timeout');
  wait_ms bigint;
begin
  select greatest(1, (extract(epoch from s.owner_lock_wait) * 1000)::bigint) into wait_ms from roi.settings s;
  perform set_config('lock_timeout', coalesce(wait_ms, 30000) || 'ms', true);
  perform pg_advisory_xact_lock(lock_key);
  perform set_config('lock_timeout', previous, true);
  return true;
exception when lock_not_available then
  return false;
end
$$;

-- The caller's open run (no closure yet), if any (its fields null when none). PL/pgSQL, not SQL: a SQL
-- function with its own search_path is never inlined, and benchmark_memory() would plan its statement
-- again on every call.
create function roi.open_run() returns roi.runs
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  found_run roi.runs;
begin
  select r.* into found_run from roi.pending_runs pr join roi.runs r on r.id = pr.run_id
  where pr.owner_id = (select auth.uid()) and not pr.closed
  order by pr.started_at desc
  limit 1;
  return found_run;
end
$$;

-- A run's judge fingerprint: who decided its verdicts. Deterministic runs are judged by the strict
-- retrieval check; an LLM run by the distinct fingerprints its verdicts were recorded with (two, joined
-- by ' + ', when the worker's judge changed mid-run); null while no verdict is in.
create function roi.run_judge_fingerprint(target_run uuid, run_mode text) returns text
  language sql stable security invoker set search_path = ''
as $$
  select case when run_mode = 'deterministic' then 'deterministic:retrieval-check'
              else (select string_agg(j.judge_fingerprint, ' + ' order by j.judge_fingerprint)
                    from roi.run_judges j where j.run_id = target_run) end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function public.benchmark_memory() from public, anon;
grant execute on function public.benchmark_memory() to authenticated;
revoke execute on function roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text), roi.record_run_closure(uuid, text, text, text),
  roi.close_run_if_done(uuid), roi.close_overdue_run(uuid), roi.close_run_left_without_judge(uuid),
  roi.start_run(text), roi.note_recall_outcomes(uuid), roi.queue_judge_checks(uuid), roi.owner_lock_key(uuid),
  roi.run_lock_key(uuid), roi.wait_for_owner_lock(bigint), roi.open_run(), roi.run_judge_fingerprint(uuid, text)
  from public;
grant execute on function roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text), roi.record_run_closure(uuid, text, text, text),
  roi.close_run_if_done(uuid), roi.close_overdue_run(uuid), roi.close_run_left_without_judge(uuid),
  roi.start_run(text), roi.note_recall_outcomes(uuid), roi.queue_judge_checks(uuid), roi.owner_lock_key(uuid),
  roi.run_lock_key(uuid), roi.wait_for_owner_lock(bigint), roi.open_run(), roi.run_judge_fingerprint(uuid, text)
  to authenticated;
-- The worker records verdicts and closes the runs they complete.
grant execute on function roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text),
  roi.record_run_closure(uuid, text, text, text), roi.close_run_if_done(uuid), roi.run_lock_key(uuid)
  to roi_worker;
