-- benchmark_memory()'s bookkeeping around its 20 recalls, cut (issue 44, item 5; docs/decisions/0037):
-- a run takes its recalls before it writes anything, and only the run's probes whose source did not
-- surface are read again to find a source gone (a surfaced source is reachable by construction);
-- the pending probes are checked before the run (all of them in LLM mode); the configured recall
-- function is checked once per run and the bundled one called directly, not through
-- roi.configured_recall() once per probe; the caller's open run is read by PL/pgSQL and the run's
-- recalls are two statements, one per kind of recall function, neither planned again on every call.

-- ============================================================================================
-- Functions
-- ============================================================================================
drop function roi.retire_unreachable_probes();


-- Retire the caller's probes in `states` whose source is invalidated or no longer visible to them.
-- Runs as the owner (caller or impersonated), so "visible" means exactly what RLS lets the owner see.
-- A source among `reachable` is not read again: roi.start_run passes the memories its recalls just
-- returned to the caller, visible and live by construction, so that only the run's probes whose
-- source did not surface cost a read of memories through their read policy. Upkeep checks every
-- pending and active probe; benchmark_memory() the pending ones before a run (all of them in LLM
-- mode), the run its own after their recalls. Planned for each call's arrays (~0.3 ms): the generic
-- plan, forced, made a benchmark call ~3 ms slower.
create function roi.retire_unreachable_probes(states text[] default array['pending', 'active'],
  reachable uuid[] default '{}') returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  retired integer;
begin
  with doomed as (
    select p.id,
           case when m.id is null then 'source_unreachable' else 'source_invalidated' end as reason
    from roi.probes p
    left join public.memories m on m.id = p.memory_id
    where p.owner_id = (select auth.uid())
      and p.state = any (states)
      and p.memory_id <> all (reachable)
      and (m.id is null or m.invalidated_at is not null)
  )
  update roi.probes p
  set state = 'retired', retired_reason = d.reason, retired_at = now()
  from doomed d
  where p.id = d.id;
  get diagnostics retired = row_count;
  return retired;
end
$$;

-- The configured recall function, or raise why the benchmark may not call it: it may have been dropped,
-- or replaced by a SECURITY DEFINER one, since `zm-roi configure` validated it. Checked once per run
-- (roi.start_run) and once per roi.configured_recall() call.
create function roi.checked_recall_function() returns regprocedure
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  configured text;
  fn regprocedure;
begin
  select s.recall_function into configured from roi.settings s;
  fn := to_regprocedure(configured);
  if fn is null then
    raise exception 'the configured recall function % no longer exists: zm-roi configure --recall-function public.recall',
      configured using errcode = '42883';
  end if;
  if (select p.prosecdef from pg_catalog.pg_proc p where p.oid = fn) then
    raise exception 'the configured recall function % is SECURITY DEFINER: refusing to run it', configured
      using errcode = '42501';
  end if;
  return fn;
end
$$;

-- One recall through the configured function, as the caller, in its rank order (`zm-roi recall`, and
-- a run's recalls when the function is not the bundled one). The function is re-checked on every call
-- and called dynamically; its rows go through jsonb so that kind and scope may be absent.
create or replace function roi.configured_recall(question text, pin_project uuid, pin_team uuid, match_count integer,
  personal_only boolean, question_embedding extensions.vector, question_embedding_minilm extensions.vector)
  returns table (memory_id uuid, kind text, scope text, title text, body text, score real, rank bigint)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  fn regprocedure := roi.checked_recall_function();
  embeddings smallint;
  target record;
begin
  if fn = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)'::regprocedure then
    -- The bundled recall, statically: its plan is cached for the session (dynamic SQL plans every call).
    return query
      select r.memory_id, r.kind, r.scope, r.title, r.body, r.score, r.n
      from public.recall(question, pin_project, pin_team, match_count, personal_only, question_embedding,
                         question_embedding_minilm)
        with ordinality as r (memory_id, kind, scope, title, body, score, n)
      order by r.n;
    return;
  end if;
  select s.recall_embeddings into embeddings from roi.settings s;
  select n.nspname, p.proname into target
  from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
  where p.oid = fn;
  return query execute format(
    'select (f.j ->> ''memory_id'')::uuid, f.j ->> ''kind'', f.j ->> ''scope'', f.j ->> ''title'',
            f.j ->> ''body'', (f.j ->> ''score'')::real, f.n
     from (select to_jsonb(r) as j, r.ordinality as n from %I.%I($1, $2, $3, $4, $5%s) with ordinality r) f
     order by f.n',
    target.nspname, target.proname, case embeddings when 2 then ', $6, $7' when 1 then ', $6' else '' end)
  using question, pin_project, pin_team, match_count, personal_only, question_embedding, question_embedding_minilm;
end
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced with its text-free outcome, and either record strict verdicts at once
-- (deterministic) or queue one judgment per probe and the run's checks of the judge (LLM). The run records which recall produced it and its questions' embedding model. A
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
create or replace function roi.start_run(mode text) returns jsonb
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
  -- for both was planned afresh on every call, ~0.2 ms).
  if bundled then
    select coalesce(array_agg(row(null, x.probe_id, x.owner_id, x.surfaced_ids, x.surfaced, now())::roi.recalls), '{}'),
           coalesce(array_agg(x.memory_id) filter (where x.memory_id = any (x.surfaced_ids)), '{}')
    into snapshots, surfaced_sources
    from (
      select p.id as probe_id, p.owner_id, p.memory_id,
             coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}') as surfaced_ids,
             coalesce(jsonb_agg(jsonb_build_object(
               'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
               'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
               filter (where r.memory_id is not null), '[]') as surfaced
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
             coalesce(jsonb_agg(jsonb_build_object(
               'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
               'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
               filter (where r.memory_id is not null), '[]') as surfaced
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

  update roi.probes p set runs_served = p.runs_served + 1
  where p.owner_id = (select auth.uid()) and p.state = 'active';
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

-- The caller's open run (no closure yet), if any (its fields null when none). PL/pgSQL, not SQL: a SQL
-- function with its own search_path is never inlined, and benchmark_memory() would plan its statement
-- again on every call.
create or replace function roi.open_run() returns roi.runs
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

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.retire_unreachable_probes(text[], uuid[]), roi.checked_recall_function() from public;
grant execute on function roi.retire_unreachable_probes(text[], uuid[]), roi.checked_recall_function() to authenticated;
