-- The hybrid recall reads each layer's vectors from a covering index (its semantic leg), and its
-- lexical leg reads the lexical covering indexes with ts_rank, as recall_lexical does (the previous
-- migration).
--
-- Why (issue 13; bench/README.md, "Pinned recall at 1M"): the hybrid computes an exact cosine distance
-- for every embedded memory of the pinned layer (no approximate index: under RLS it would
-- under-return and time other tenants' density). Its layer CTE read every row of the layer from the
-- table, and each 384-dimension vector (1.5 kB) is stored out of line in TOAST: per row a heap page,
-- a TOAST index probe and a TOAST page, all scattered, plus ts_rank_cd over the same rows. On the 1M
-- bench corpus that made the hybrid 3× the lexical recall it extends. A b-tree covering index per layer
-- kind (the layer key, the policy's columns, id, created_at, embedding) keeps a layer's vectors
-- together, inline (~4 a page), and the index-only scan evaluates the policy and the distance on the
-- entry itself. Measured side by side at 1M: ~0.2× the time of the previous hybrid.
--
-- A 384-dimension vector always fits a b-tree entry (1.5 kB of 2.7 kB), so no row is left out. The
-- price is the vectors stored a second time (~1.9 kB per embedded memory with the entry's overhead).
-- Fusion is unchanged: each leg's best 2 × match_count, reciprocal rank fusion with k = 50, weights
-- 1 (lexical) and 1.5 (semantic). Only the lexical leg's ranking changed, with the lexical recall.

-- ============================================================================================
-- Indexes
-- ============================================================================================
create index memories_personal_embedding_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'personal' and embedding is not null;
create index memories_project_embedding_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'project' and embedding is not null;
create index memories_team_embedding_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'team' and embedding is not null;

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The bundled recall: the contract's five arguments plus an optional query embedding. Without an
-- embedding, or for a caller with no identity and no pin (maintenance: exact distances over a whole
-- corpus are not a read path), it is the lexical recall. With one, two legs over the layers the
-- lexical recall reads (the pins narrowed to the caller's memberships), each from its covering
-- indexes alone (index-only scans: id, created_at and the leg's rank): the lexical leg's arms are
-- recall_lexical's, ranked by ts_rank; the semantic leg ranks the embedded memories by exact cosine
-- distance. Each keeps its best 2 × match_count, reciprocal rank fusion picks the best match_count,
-- and only those rows are read from the table for their text. (Calling recall_lexical for the
-- lexical leg instead cost a fifth more: its text fetch of 2 × match_count rows, then this one's.)
-- The plan is generic (same shape for every pin), so it is not re-planned on every call.
create or replace function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false,
  query_embedding extensions.vector default null
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
as $$
declare
  rrf_k constant integer := 50;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.5;
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false);
  projects uuid[];
  teams uuid[];
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if query_embedding is null or (unpinned and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  if caller is null then
    projects := array_remove(array[recall.project_id], null);
    teams := array_remove(array[recall.team_id], null);
  else
    projects := array(select p from public.caller_project_ids() p where p = recall.project_id or unpinned);
    teams := array(select t from public.caller_team_ids() t where t = recall.team_id or unpinned);
  end if;
  return query
    with lexical as (
      select c.id, c.created_at, row_number() over (order by c.score desc, c.created_at desc, c.id) as rank
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
        order by 3 desc, 2 desc, 1
        limit wanted * 2
      ) c
    ), semantic as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding as distance
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and m.embedding is not null
        union all
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and m.embedding is not null
        union all
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and m.embedding is not null
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), fused as (
      select coalesce(x.id, s.id) as id, coalesce(x.created_at, s.created_at) as created_at,
             (coalesce(lexical_weight / (rrf_k + x.rank), 0) + coalesce(semantic_weight / (rrf_k + s.rank), 0))::real
               as score
      from lexical x
      full join semantic s on s.id = x.id
    ), best as (
      select f.id, f.created_at, f.score from fused f
      order by f.score desc, f.created_at desc, f.id
      limit wanted
    )
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.id = m.id
    where m.id = any (array(select best.id from best))
    order by b.score desc, b.created_at desc, b.id;
end
$$;
