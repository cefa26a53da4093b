-- benchmark_memory() spent ~12 ms on bookkeeping around its 20 recalls (+24.5% over the recalls run
-- alone at 1M memories; the goal is 15%). Timed step by step inside the call (clock_timestamp()
-- between statements, 100k corpus), most of it was two things:
-- - never-probed knowledge read twice after every deterministic run: rotation read the newest 3 to
--   see whether anything fresh exists, then the top-up read the same 3 to insert them, ~2.4 ms each.
--   roi.rotate_and_top_up() reads them once, and roi.never_probed_knowledge() is now PL/pgSQL: as a
--   SQL function it was parsed, rewritten and planned on every call (~1.3 ms of the 2.4). For the
--   same reason roi.template_question() is now PL/pgSQL assignments (~0.5 ms of the top-up's insert)
--   and roi.pool_counts() PL/pgSQL (three calls per benchmark call, ~0.05 ms each).
-- - pglz compressing each recall snapshot (~5.5 kB of jsonb, 20 per run, ~1.7 ms a run): the
--   snapshots are now stored uncompressed (storage external; still out of line, ~50% more bytes).
-- And a deterministic run, which is judged, closed and rotated before the call returns, no longer
-- writes a pending_runs row only to delete it, nor takes roi.close_run_if_done()'s lock and recount.
-- Nothing else changes: the same probes rotate out, the same memories come in, every recall still
-- runs as the caller under RLS, and every result row is written as before.
--
-- Redefines, with the same results: roi.template_question() and roi.pool_counts() (from
-- 20261130000200_roi_benchmark), roi.never_probed_knowledge() (from 20261130000500_recall_at_scale)
-- and roi.start_run() (current body from 20261201050000_hybrid_recall).

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table roi.recalls alter column surfaced set storage external;

-- ============================================================================================
-- Functions
-- ============================================================================================
-- A deterministic question per kind: reads naturally, quotes the title safely, stays short.
-- PL/pgSQL assignments, not a SQL query: a SQL function that cannot be inlined is parsed and
-- planned again in every statement that calls it (~0.5 ms of each top-up's insert).
create or replace function roi.template_question(kind text, title text, body text) returns text
  language plpgsql immutable security invoker set search_path = ''
as $$
declare
  cleaned text;
  subject text;
begin
  cleaned := coalesce(
    nullif(btrim(regexp_replace(coalesce(title, ''), '[[:space:][:cntrl:]]+', ' ', 'g')), ''),
    btrim(regexp_replace(left(coalesce(body, ''), 1000), '[[:space:][:cntrl:]]+', ' ', 'g')));
  subject := case when length(cleaned) <= 120 then cleaned
                  else regexp_replace(left(cleaned, 120), '\s+\S*$', '') || '…' end;
  return case kind
    when 'decision' then format('What did we decide about "%s", and why?', subject)
    when 'gotcha' then format('What goes wrong with "%s", and how do we avoid it?', subject)
    when 'convention' then format('What is our convention for "%s"?', subject)
  end;
end
$$;

-- The owner's pool size right now (pending + active). PL/pgSQL so the count stays prepared for the
-- session (a SQL function here is planned again on each of its three calls per benchmark call).
create or replace function roi.pool_counts(out active integer, out pending integer)
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  select count(*) filter (where p.state = 'active')::integer,
         count(*) filter (where p.state = 'pending')::integer
  into active, pending
  from roi.probes p
  where p.owner_id = (select auth.uid()) and p.state in ('active', 'pending');
end
$$;

-- The caller's never-probed live knowledge, newest first, at most `wanted`: the newest few of each
-- layer the caller reads (personal, each member project, each member team), each read in created_at
-- order from that layer's partial index and stopped as soon as it has enough, then merged. The
-- newest `wanted` overall are among the newest `wanted` of some layer, so the choice is the same as
-- a scan through RLS would make; the cost grows with the caller's layers, not with the corpus.
-- Shared by top-up (what to add) and rotation (whether anything fresh exists). PL/pgSQL, not SQL:
-- a SQL function that cannot be inlined is parsed, rewritten (RLS) and planned on every call, which
-- cost ~1.3 ms of its ~2.4 ms per call; PL/pgSQL keeps the statement prepared for the session.
create or replace function roi.never_probed_knowledge(wanted integer) returns setof public.memories
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query
    select m.* from (
      (select v.* from public.memories v
       where v.scope = 'personal' and v.invalidated_at is null and v.author_id = (select auth.uid())
         and v.kind in ('decision', 'gotcha', 'convention')
         and not exists (select from roi.probes p where p.owner_id = (select auth.uid()) and p.memory_id = v.id)
       order by v.created_at desc, v.id
       limit wanted)
      union all
      select v.* from unnest(array(select public.caller_project_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'project' and v.invalidated_at is null and v.project_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and not exists (select from roi.probes p where p.owner_id = (select auth.uid()) and p.memory_id = v.id)
        order by v.created_at desc, v.id
        limit wanted
      ) v
      union all
      select v.* from unnest(array(select public.caller_team_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'team' and v.invalidated_at is null and v.team_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and not exists (select from roi.probes p where p.owner_id = (select auth.uid()) and p.memory_id = v.id)
        order by v.created_at desc, v.id
        limit wanted
      ) v
    ) m
    order by m.created_at desc, m.id
    limit wanted;
end
$$;

-- After a deterministic run, in the same call: rotation (as roi.rotate_pool) and the top-up that
-- refills the rotated places (as roi.top_up_pool), with one read of never-probed knowledge instead
-- of two (each read is a statement per layer the owner reads, under RLS: ~1 ms). The newest n
-- never-probed memories are the first n of the newest m for any m >= n, and retiring a probe does
-- not make its memory never-probed again, so the rows rotation read to decide how many to retire
-- are the rows the top-up adds; a pool short by more than that reads again. Returns probes retired.
create function roi.rotate_and_top_up(completed_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  fresh public.memories[] := '{}';
  retired integer := 0;
  counts record;
  wanted integer;
  added integer;
begin
  select * into config from roi.settings;
  if not exists (select from roi.rotations r where r.run_id = completed_run) then
    fresh := array(select m from roi.never_probed_knowledge(config.rotation_per_run) m);
    if cardinality(fresh) > 0 then
      with longest_serving as (
        select p.id from roi.probes p
        where p.owner_id = (select auth.uid()) and p.state = 'active'
        order by p.runs_served desc, p.activated_at, p.id
        limit cardinality(fresh)
      )
      update roi.probes p
      set state = 'retired', retired_reason = 'rotated', retired_at = now()
      from longest_serving l
      where p.id = l.id;
      get diagnostics retired = row_count;
    end if;
    insert into roi.rotations (run_id, owner_id, retired_count)
    values (completed_run, (select auth.uid()), retired)
    on conflict (run_id) do nothing;
  end if;

  -- The top-up, as roi.top_up_pool() does it.
  select * into counts from roi.pool_counts();
  if config.extractor = 'deterministic' and counts.pending > 0 then
    perform roi.take_over_pending_probes();
  end if;
  wanted := config.pool_target - counts.active - counts.pending;
  if wanted <= 0 then
    return retired;
  end if;
  if wanted > cardinality(fresh) then
    fresh := array(select m from roi.never_probed_knowledge(wanted) m);
  end if;
  insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                          pin_project_id, pin_team_id, question, state, activated_at)
  select (select auth.uid()), m.id, m.kind, m.scope, m.title, m.body, m.project_id, m.team_id,
         q.question,
         case when q.question is null then 'pending' else 'active' end,
         case when q.question is null then null else now() end
  from unnest(fresh[1:wanted]) m
  cross join lateral (
    select case when config.extractor = 'deterministic'
      then roi.template_question(m.kind, m.title, m.body) end as question
  ) q
  on conflict (owner_id, memory_id) do nothing;
  get diagnostics added = row_count;
  if added > 0 and config.extractor = 'llm' then
    perform pg_notify('roi_work', 'probe_generation');
  end if;
  return retired;
end
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced, and either record strict verdicts at once (deterministic) or queue one judgment per
-- probe (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged, closed, rotated and refilled before this returns, so it is never
-- pending: upkeep has nothing to attend to, and no pending_runs row is written only to be deleted.
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
          case when (select s.recall_function from roi.settings s) like '%extensions.vector)' then question_model end)
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
    perform roi.rotate_and_top_up(new_run);
  else
    insert into roi.judgments (run_id, probe_id, owner_id)
    select rc.run_id, rc.probe_id, rc.owner_id from roi.recalls rc where rc.run_id = new_run;
    perform pg_notify('roi_work', 'judgment');
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total);
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.rotate_and_top_up(uuid) from public;
grant execute on function roi.rotate_and_top_up(uuid) to authenticated;
