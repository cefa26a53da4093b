-- Recall's lexical leg weights the title like the body (issue 22). ts_rank's default weights count a
-- title word 2.5 times a body word (A 1.0, B 0.4); a paraphrase avoids the title's words by
-- definition, so the memory it asks about lost rank to memories that merely share a title word.
-- Measured with `make bench-recall` (bench/README.md, "Title weighted like the body"). The stored
-- search vector keeps its weights (no table rewrite); only the ranking's weights change.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The lexical recall: public.recall without a query embedding, and a recall of its own a deployment
-- can configure (the demo compares against it). Runs as the caller: row-level security decides what
-- exists, the pin decides which of it a session working in that scope would read (project or team
-- plus the caller's personal layer; `personal_only` the personal layer alone; no pin every project
-- and team the caller is a member of). Best match first, live memories only. The best `match_count`
-- are chosen from the covering indexes alone (index-only scans: id, created_at and score), then only
-- those rows are read from the table for their text. A caller with no identity (maintenance): the
-- pin as given, or with no pin everything their role may see, in its own statement.
create or replace function public.recall_lexical(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  -- ts_rank's weights for D, C, B (the body) and A (the title): the title weighted like the body.
  weights constant real[] := '{0.1, 0.2, 0.4, 0.4}';
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
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank(weights, m.search, tsq, 1)::real as score
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
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real as score
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
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

-- The bundled recall: the contract's five arguments plus an optional query embedding (the documented
-- extension of the contract). Without an embedding, or for a caller with no identity and no pin
-- (maintenance: exact distances over a whole corpus are not a read path), it is the lexical recall.
-- With one, two legs over the layers the lexical recall reads, each from its covering indexes alone
-- (index-only scans: id, created_at and the leg's rank): the lexical leg's arms are recall_lexical's,
-- ranked by ts_rank; the semantic leg ranks the embedded memories by exact cosine distance. Each
-- keeps its best 2 × match_count, reciprocal rank fusion (k = 50, as Supabase's hybrid_search) adds
-- weight / (k + rank) per leg (weights 1 lexical, 1.5 semantic, tuned on paraphrased questions:
-- bench/README.md, "Hybrid recall"), and only the best match_count rows are read from the table for
-- their text. (Calling recall_lexical for the lexical leg instead cost a fifth more: its text fetch
-- of 2 × match_count rows, then this one's.)
create or replace function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false,
  query_embedding extensions.vector default null
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  rrf_k constant integer := 50;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.5;
  -- recall_lexical's ranking weights: the title weighted like the body.
  weights constant real[] := '{0.1, 0.2, 0.4, 0.4}';
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
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real as score
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
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
