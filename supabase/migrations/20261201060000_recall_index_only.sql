-- Pinned lexical recall within 10 ms at 1M memories, under RLS: every layer is read from a covering
-- index (an index-only scan over the layer's own entries, which a b-tree keeps together), and matches
-- are ranked with ts_rank instead of ts_rank_cd. (The hybrid's semantic leg: the next migration.)
--
-- Why (issue 13; measured in bench/README.md, "Pinned recall at 1M"): a pinned recall at 1M took
-- 14 ms (project) and 27 ms (team) at p50, against a target of 10. Under RLS no index can serve the
-- question (`@@` is not leakproof, so Postgres applies the policy first), so recall tests every live
-- memory of the pinned layer. Three costs, all per row of the layer:
--   1. one heap page per row: a layer's memories arrive interleaved with everyone else's, so a
--      2,000-row layer is ~2,000 pages of a table larger than shared_buffers. A b-tree keeps a
--      layer's entries next to each other whatever order they arrive in, and an index-only scan
--      evaluates the policy and `@@` on the index entry itself: the same layer is ~200 index pages
--      and no heap page. This stays true as memories are written (CLUSTER would decay);
--   2. ts_rank_cd: ~10× the CPU of ts_rank per match, and a third of a layer can match an OR
--      question. ts_rank ranks the templated questions as well or better (bench: source in the top
--      10 unchanged; the public ADR set: hit@1 321 → 323 of 328, MRR 0.988 → 0.991);
--   3. replanning: PL/pgSQL re-planned the statement (with its RLS subplans) on every call because
--      the custom plan looked cheaper; the plan is the same shape for every pin, so it is now generic.
-- RLS still decides visibility on every read: the covering indexes carry the policy's columns
-- (scope, author_id, project_id, team_id), so the policy runs on each entry before the question does.
-- A pin narrows to the caller's own memberships first, so pinning someone else's project or team
-- reads nothing of it (its size cannot be timed).
--
-- A b-tree entry holds at most ~2.7 kB, and a memory's search vector can be larger (bodies are
-- indexed up to 100,000 characters). Only vectors that fit go into the covering indexes; the rest
-- (bodies of several pages: rare) have a small partial index per layer and one arm of their own.
-- `octet_length(search::text) + 4 * length(search)` bounds the stored size of a tsvector from above
-- (per lexeme the binary form is at most 4 bytes longer than its text form), is immutable, and is
-- repeated verbatim in recall_lexical() so the planner can match each arm to its index.

-- ============================================================================================
-- Indexes
-- ============================================================================================
-- One covering index per layer kind: the layer key, then every column the read policy and recall
-- need. 2,400 bytes of search vector keeps each entry under the b-tree limit (2,704) with the rest.
create index memories_personal_search_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, search)
  where invalidated_at is null and scope = 'personal'
    and octet_length(search::text) + 4 * length(search) <= 2400;
create index memories_project_search_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, search)
  where invalidated_at is null and scope = 'project'
    and octet_length(search::text) + 4 * length(search) <= 2400;
create index memories_team_search_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, search)
  where invalidated_at is null and scope = 'team'
    and octet_length(search::text) + 4 * length(search) <= 2400;

-- The live memories whose search vector is too large for the covering indexes, per layer.
create index memories_personal_oversized_idx on public.memories (author_id)
  where invalidated_at is null and scope = 'personal'
    and octet_length(search::text) + 4 * length(search) > 2400;
create index memories_project_oversized_idx on public.memories (project_id)
  where invalidated_at is null and scope = 'project'
    and octet_length(search::text) + 4 * length(search) > 2400;
create index memories_team_oversized_idx on public.memories (team_id)
  where invalidated_at is null and scope = 'team'
    and octet_length(search::text) + 4 * length(search) > 2400;

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The lexical recall (public.recall without a query embedding, and the hybrid's lexical leg); contract
-- unchanged. The caller's layers are their personal layer (every pin includes it), the pinned project
-- or team if they are a member, or with no pin every project and team they are a member of. The best
-- `match_count` are chosen from the covering indexes alone (index-only scans: id, created_at and
-- score), then only those rows are read from the table for their text. A caller with no identity
-- (maintenance) keeps the old behaviour: the pin as given, or with no pin everything their role may
-- see, in its own statement (as a branch of the main one its cost estimate alone made every call
-- JIT-compile at 1M).
create or replace function public.recall_lexical(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
as $$
declare
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall_lexical.project_id is null and recall_lexical.team_id is null
                      and not coalesce(personal_only, false);
  projects uuid[];
  teams uuid[];
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if unpinned and caller is null then
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank(m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  if caller is null then
    projects := array_remove(array[recall_lexical.project_id], null);
    teams := array_remove(array[recall_lexical.team_id], null);
  else
    projects := array(select p from public.caller_project_ids() p where p = recall_lexical.project_id or unpinned);
    teams := array(select t from public.caller_team_ids() t where t = recall_lexical.team_id or unpinned);
  end if;
  return query
    with best as (
      select c.id, c.created_at, c.score
      from (
        select m.id, m.created_at, ts_rank(m.search, tsq, 1)::real as score
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(m.search, tsq, 1)::real
        from public.memories m
        where m.invalidated_at is null
          and octet_length(m.search::text) + 4 * length(m.search) > 2400
          and ((m.scope = 'personal' and m.author_id = caller)
               or (m.scope = 'project' and m.project_id = any (projects))
               or (m.scope = 'team' and m.team_id = any (teams)))
          and m.search @@ tsq
      ) c
      order by c.score desc, c.created_at desc, c.id
      limit wanted
    )
    -- `= any (array(…))`: the text of the chosen rows by primary key, never a join planned over the table.
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.id = m.id
    where m.id = any (array(select best.id from best))
    order by b.score desc, b.created_at desc, b.id;
end
$$;
