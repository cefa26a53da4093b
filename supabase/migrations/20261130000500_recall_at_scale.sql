-- Recall and pool top-up at scale: read the caller's layers through their indexes, never the corpus.
--
-- Why (measured by `make bench`, bench/README.md): with the first definitions a pinned recall at 1M
-- memories took ~0.8 s (p50) and grew with the whole corpus, so benchmark_memory() (20 recalls)
-- took seconds, and every top-up scanned every memory. EXPLAIN (ANALYZE, BUFFERS) shows why:
--   1. recall() is planned generically (a SQL function with `set search_path` is never inlined),
--      so the pin sat in an OR whose first arm (`no pin`) references no column: no index could
--      serve it. The plan came from the RLS policy instead, a BitmapOr over every live project and
--      team memory of everyone, then a filter; and recall_query(question) sat in that filter (the
--      CTE was inlined, the function is not), running once per row.
--   2. roi.top_up_pool() chose never-probed knowledge through RLS alone, which no index can serve
--      (`project_id in (select …)` under an OR): a sequential scan of all memories per owner, per
--      run and per upkeep visit.
-- The fix reads only the layers the caller reads (their personal layer, the pinned or member
-- projects, the pinned or member teams), each through the partial index memory_core already has
-- for it (no index is added), and computes the tsquery once. Row-level security still applies to
-- every read: narrowing to the caller's layers is the visibility rule itself for a signed-in user,
-- so results are unchanged (supabase/tests/database/07-recall-at-scale.sql passes before and after).
-- A caller with no identity (service role, maintenance) has no layers; unpinned recall keeps
-- reading everything their role may see for them, as before.

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The one read path agents use; contract unchanged (see memory_core). One UNION ALL arm per layer
-- the caller reads: their personal layer (every pin includes it), the pinned project or team, or
-- with no pin every project and team they are a member of; each arm is an index scan on that
-- layer's partial index, and only the layer's rows are tested against the question. (The GIN index
-- on `search` cannot serve a caller under RLS: `@@` is not leakproof, so Postgres must apply the
-- policy before it, never inside an index scan. Narrowing by the layer keys, whose `=` is
-- leakproof, is what an index can do for a signed-in caller.) PL/pgSQL keeps the plan for the
-- session instead of planning the statement on every call, as a SQL function would, and keeps the
-- no-identity path (a scan of everything) in its own statement: as an arm of the main one, its
-- estimated cost alone pushed every call over jit_above_cost at 1M, and JIT cost ~90 ms a call.
create or replace function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false);
  projects uuid[] := '{}';
  teams uuid[] := '{}';
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if unpinned and caller is null then
    -- No identity (service role, maintenance): everything the role may see, as before.
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank_cd(m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  if recall.project_id is not null then
    projects := array[recall.project_id];
  elsif unpinned then
    projects := array(select public.caller_project_ids());
  end if;
  if recall.team_id is not null then
    teams := array[recall.team_id];
  elsif unpinned then
    teams := array(select public.caller_team_ids());
  end if;
  return query
    select c.id, c.kind, c.scope, c.title, c.body, ts_rank_cd(c.search, tsq, 1)::real as score
    from (
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.created_at
      from public.memories m
      where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
      union all
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.created_at
      from public.memories m
      where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
      union all
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.created_at
      from public.memories m
      where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
    ) c
    where c.search @@ tsq
    order by score desc, c.created_at desc, c.id
    limit wanted;
end
$$;

-- The caller's never-probed live knowledge, newest first, at most `wanted`: the newest few of each
-- layer the caller reads (personal, each member project, each member team), each read in created_at
-- order from that layer's partial index and stopped as soon as it has enough, then merged. The
-- newest `wanted` overall are among the newest `wanted` of some layer, so the choice is the same as
-- a scan through RLS would make; the cost grows with the caller's layers, not with the corpus.
-- Shared by top-up (what to add) and rotation (whether anything fresh exists).
create function roi.never_probed_knowledge(wanted integer) returns setof public.memories
  language sql stable security invoker set search_path = ''
as $$
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
  limit wanted
$$;

-- Fill the caller's pool up to the target from never-probed live knowledge, newest first, selected
-- as the caller. Unchanged from roi_benchmark except where candidates come from (above).
create or replace function roi.top_up_pool() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  counts record;
  added integer;
begin
  select * into config from roi.settings;
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

-- After a completed run: retire a few of the longest-serving probes, but only when never-probed
-- knowledge exists to replace them. Unchanged from roi_benchmark except that "does fresh knowledge
-- exist" now reads the caller's layers through their indexes, not every memory through RLS.
create or replace function roi.rotate_pool(completed_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  fresh integer;
  retired integer := 0;
begin
  if exists (select from roi.rotations r where r.run_id = completed_run) then
    delete from roi.pending_runs pr where pr.run_id = completed_run;
    return 0;
  end if;
  select * into config from roi.settings;
  select count(*) into fresh from roi.never_probed_knowledge(config.rotation_per_run);
  if fresh > 0 then
    with longest_serving as (
      select p.id from roi.probes p
      where p.owner_id = (select auth.uid()) and p.state = 'active'
      order by p.runs_served desc, p.activated_at, p.id
      limit fresh
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
  delete from roi.pending_runs pr where pr.run_id = completed_run;
  return retired;
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.never_probed_knowledge(integer) from public;
grant execute on function roi.never_probed_knowledge(integer) to authenticated;
