-- Recall's lexical leg and its layer resolution were written twice, once in public.recall_lexical and
-- once in public.recall, held equal by a test (issue 19, item 5: written once if a side-by-side run
-- at 1M keeps pinned recall within 5% of 46284ba; the run after the exact-sums change put it 43% and
-- 56% below). Now both recalls call roi.recall_layers and roi.recall_lexical_leg. In roi, which the
-- API does not expose: they are steps of a recall, not a recall of their own.

-- The layers a recall reads for the caller under a pin, besides their personal layer: the caller's
-- own member projects and teams that the pin names (all of them with no pin, none with
-- `personal_only`), so pinning someone else's project or team reads nothing of it and its size cannot
-- be timed. A caller with no identity (maintenance) reads the pin as given. Both recalls' one answer.
create function roi.recall_layers(pin_project uuid, pin_team uuid, personal_only boolean,
  out projects uuid[], out teams uuid[])
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  unpinned boolean := pin_project is null and pin_team is null and not coalesce(personal_only, false);
begin
  if auth.uid() is null then
    projects := array_remove(array[pin_project], null);
    teams := array_remove(array[pin_team], null);
  else
    projects := array(select p from public.caller_project_ids() p where p = pin_project or unpinned);
    teams := array(select t from public.caller_team_ids() t where t = pin_team or unpinned);
  end if;
end
$$;

-- The lexical leg of both recalls, written once: the `depth` best live memories for the question in
-- the caller's layers under the pin (roi.recall_layers) and their personal layer, best first by
-- ts_rank (title weighted like the body), newest first among equals. Candidates come from the
-- postings of the question's lexemes in those layers (index-only scans, at most per_term per lexeme
-- and layer, so the cost does not grow with the layer). The question is an OR of lexemes, whose
-- ts_rank is the sum of the matched lexemes' impacts over their number: where no posting list was
-- cut, the summed impacts are ts_rank's order and only the memories within rounding of the depth-th
-- (ties included) are read by primary key and ranked again; where one was, the best `pool` by summed
-- impact are. Either way under the memories' own policy and the pin. No text: the recalls read the
-- text of the rows they return.
create function roi.recall_lexical_leg(query text, pin_project uuid, pin_team uuid, personal_only boolean,
  depth integer)
  returns table (memory_id uuid, created_at timestamptz, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  -- ts_rank's weights for D, C, B (the body) and A (the title): the title weighted like the body.
  weights constant real[] := '{0.1, 0.2, 0.4, 0.4}';
  -- Candidates: the per_term postings of highest impact of each question lexeme in each layer read,
  -- and where a list was cut the `pool` memories of highest summed impact, re-ranked exactly by
  -- ts_rank (bench/README.md, "Impact-ordered postings": the frontier of cost against the exact ranking).
  per_term constant integer := 2000;
  pool constant integer := 500;
  -- Summed impacts within this factor of the depth-th are ranked again: float rounding, and ties.
  within_rounding constant real := 0.9999;
  tsq tsquery := public.recall_query(coalesce(query, ''));
  terms text[] := tsvector_to_array(to_tsvector('english'::regconfig, coalesce(query, '')));
  caller uuid := auth.uid();
  projects uuid[];
  teams uuid[];
begin
  select l.projects, l.teams into projects, teams from roi.recall_layers(pin_project, pin_team, personal_only) l;
  return query
    with layers as (
      select 'personal'::text as scope, caller as id where caller is not null
      union all
      select 'project', p from unnest(projects) p
      union all
      select 'team', t from unnest(teams) t
    ), postings as (
      select l.id as layer_id, t as lexeme, h.memory_id, h.impact
      from layers l
      cross join unnest(terms) t
      cross join lateral (
        select p.memory_id, p.impact from public.memory_postings p
        where p.layer_id = l.id and p.lexeme = t and p.scope = l.scope
        order by p.impact desc
        limit per_term
      ) h
    ), summed as (
      select p.memory_id, sum(p.impact) as impact from postings p group by p.memory_id
    ), cut as (
      select exists (select from postings p group by p.layer_id, p.lexeme having count(*) >= per_term) as list
    ), hits as (
      select s.memory_id from summed s
      where not (select c.list from cut c)
        and s.impact >= within_rounding * coalesce(
          (select x.impact from summed x order by x.impact desc offset greatest(depth - 1, 0) limit 1), 0)
      union all
      (select s.memory_id from summed s
       where (select c.list from cut c)
       order by s.impact desc
       limit pool)
    )
    select c.id, c.created_at, c.score
    from (
      select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real as score
      from public.memories m
      where m.id = any (array(select hits.memory_id from hits)) and m.invalidated_at is null
        and ((m.scope = 'personal' and m.author_id = caller)
             or (m.scope = 'project' and m.project_id = any (projects))
             or (m.scope = 'team' and m.team_id = any (teams)))
        and m.search @@ tsq
    ) c
    order by c.score desc, c.created_at desc, c.id
    limit depth;
end
$$;

-- The lexical recall: public.recall without a query embedding, and a recall of its own a deployment
-- can configure (the demo compares against it). Runs as the caller: row-level security decides what
-- exists, the pin decides which of it a session working in that scope would read (project or team
-- plus the caller's personal layer; `personal_only` the personal layer alone; no pin every project
-- and team the caller is a member of). Best match first, live memories only: the lexical leg
-- (roi.recall_lexical_leg), and the text of its best `match_count` read by primary key. A caller with
-- no identity and no pin (maintenance) reads everything their role may see, in its own statement.
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
  -- The lexical leg's ts_rank weights (roi.recall_lexical_leg), for the maintenance statement.
  weights constant real[] := '{0.1, 0.2, 0.4, 0.4}';
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
  tsq tsquery;
begin
  if recall_lexical.project_id is null and recall_lexical.team_id is null and not coalesce(personal_only, false)
     and auth.uid() is null then
    tsq := public.recall_query(coalesce(query, ''));
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank(weights, m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  return query
    with best as (
      select b.memory_id, b.created_at, b.score
      from roi.recall_lexical_leg(query, recall_lexical.project_id, recall_lexical.team_id, personal_only, wanted) b
    )
    -- `= any (array(…))`: the text of the chosen rows by primary key, never a join planned over the table.
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.memory_id = m.id
    where m.id = any (array(select best.memory_id from best))
    order by b.score desc, b.created_at desc, b.memory_id;
end
$$;

-- The bundled recall: the contract's five arguments plus two optional query embeddings (the documented
-- extension of the contract): the first model's (`embedding`) and MiniLM's (`embedding_minilm`).
-- Without an embedding, or for a caller with no identity and no pin (maintenance: exact distances over
-- a whole corpus are not a read path), it is the lexical recall. With one or both, the lexical leg
-- (roi.recall_lexical_leg, its best 2 × match_count) plus a semantic leg per embedding given (a leg
-- whose embedding is null is left out, so a deployment with one hosted model fuses two legs), over
-- the layers the lexical leg reads (roi.recall_layers): the semantic legs rank the embedded memories
-- by exact cosine distance from their covering indexes alone (index-only scans: id, created_at and the
-- distance; `minilm` on the second column), each keeping its best 2 × match_count. Reciprocal rank
-- fusion adds weight / (k + rank) per leg (k and the three weights chosen on paraphrased questions:
-- bench/README.md, "Three legs"), and only the best match_count rows are read from the table for their
-- text. Planned per call, unlike recall_lexical: a generic plan estimates the pinned layers at a share
-- of the table, and where one project holds most of the memories that share made the semantic leg
-- scan the whole table for every pin (bench/README.md, "Pinned recall against the layer's size").
create or replace function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false,
  query_embedding extensions.vector default null,
  query_embedding_minilm extensions.vector default null
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_custom_plan
  set jit = off
as $$
declare
  -- Chosen on the paraphrased questions with all three legs (bench/README.md, "Three legs"): a small k
  -- lets a leg's first ranks count, and the two embedding legs weigh alike, a quarter above the lexical.
  rrf_k constant integer := 5;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.25;
  minilm_weight constant real := 1.25;
  caller uuid := auth.uid();
  projects uuid[];
  teams uuid[];
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if (query_embedding is null and query_embedding_minilm is null)
     or (recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false) and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  select l.projects, l.teams into projects, teams from roi.recall_layers(recall.project_id, recall.team_id, personal_only) l;
  return query
    with lexical as (
      select x.memory_id as id, x.created_at,
             row_number() over (order by x.score desc, x.created_at desc, x.memory_id) as rank
      from roi.recall_lexical_leg(query, recall.project_id, recall.team_id, personal_only, wanted * 2) x
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
    ), minilm as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm as distance
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and m.embedding_minilm is not null
        union all
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and m.embedding_minilm is not null
        union all
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and m.embedding_minilm is not null
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), fused as (
      -- A leg whose query embedding is null is left out (planned per call, so it is not even read).
      select l.id, max(l.created_at) as created_at, sum(l.weight / (rrf_k + l.rank))::real as score
      from (
        select x.id, x.created_at, x.rank, lexical_weight as weight from lexical x
        union all
        select s.id, s.created_at, s.rank, semantic_weight from semantic s where query_embedding is not null
        union all
        select n.id, n.created_at, n.rank, minilm_weight from minilm n where query_embedding_minilm is not null
      ) l
      group by l.id
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

revoke execute on function roi.recall_layers(uuid, uuid, boolean),
  roi.recall_lexical_leg(text, uuid, uuid, boolean, integer) from public, anon;
grant execute on function roi.recall_layers(uuid, uuid, boolean),
  roi.recall_lexical_leg(text, uuid, uuid, boolean, integer) to authenticated;
