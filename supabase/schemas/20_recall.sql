-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- sql/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (README, "Changing the schema"); tests/test_schema_files.py builds a
-- database from each and prints any difference.
--
-- Recall: the one read path agents use, and the query parser it shares with nothing else.
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
-- so results are unchanged (supabase/tests/database/08-recall-at-scale.sql passes before and after).
-- A caller with no identity (service role, maintenance) has no layers; unpinned recall keeps
-- reading everything their role may see for them, as before.

-- ============================================================================================
-- Functions
-- ============================================================================================

-- Turns a natural-language question into an OR of its stemmed terms: an agent's question rarely
-- contains every word of the memory that answers it, so an AND (plainto/websearch) finds nothing.
-- Postgres renders and parses the tsquery text itself, so no user text is ever spliced into syntax.
-- A question with no searchable word (empty, stop words only) yields null, quietly: no NOTICE.
create function public.recall_query(query text) returns tsquery
  language sql immutable strict security invoker set search_path = ''
as $$
  select case when length(to_tsvector('english'::regconfig, query)) > 0
    then replace(plainto_tsquery('english'::regconfig, query)::text, ' & ', ' | ')::tsquery
  end
$$;

-- The one read path agents use. Runs as the caller: row-level security decides what exists, the pin
-- decides which of it a session working in that scope would read (project or team plus the caller's
-- personal layer; `personal_only` the personal layer alone; no pin means everything visible).
-- Best match first, live memories only.
--
-- How (the at-scale rewrite, 20261130000500_recall_at_scale). One UNION ALL arm per layer
-- the caller reads: their personal layer (every pin includes it), the pinned project or team, or
-- with no pin every project and team they are a member of; each arm is an index scan on that
-- layer's partial index, and only the layer's rows are tested against the question. (The GIN index
-- on `search` cannot serve a caller under RLS: `@@` is not leakproof, so Postgres must apply the
-- policy before it, never inside an index scan. Narrowing by the layer keys, whose `=` is
-- leakproof, is what an index can do for a signed-in caller.) PL/pgSQL keeps the plan for the
-- session instead of planning the statement on every call, as a SQL function would, and keeps the
-- no-identity path (a scan of everything) in its own statement: as an arm of the main one, its
-- estimated cost alone pushed every call over jit_above_cost at 1M, and JIT cost ~90 ms a call.
create function public.recall(
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

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function public.recall_query(text), public.recall(text, uuid, uuid, integer, boolean)
  from public, anon;
grant execute on function public.recall_query(text), public.recall(text, uuid, uuid, integer, boolean)
  to authenticated;
