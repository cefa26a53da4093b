-- The hybrid recall's lexical leg re-ranks a smaller pool (docs/decisions/0038-a-smaller-pool-for-the-hybrids-lexical-leg.md).
-- Where a posting list was cut, roi.recall_lexical_leg read its 500 best candidates again by primary key
-- (~4 shared buffers each) for both recalls. Its best 2 × match_count are one vote of public.recall's
-- fusion, not an answer: at 100,000 real-text rows a pool of 300 keeps the hybrid's hit@1, hit@10 and MRR
-- on both question sets for ~800 fewer buffers a recall. The pool becomes the leg's argument: public.recall
-- passes 300, public.recall_lexical keeps 500. A new argument is a new signature, so the leg is dropped
-- and created again (no object depends on it: PL/pgSQL bodies resolve it when they run), and both recalls
-- are replaced to pass it.

drop function roi.recall_lexical_leg(text, uuid, uuid, boolean, integer);

create function roi.recall_lexical_leg(query text, pin_project uuid, pin_team uuid, personal_only boolean,
  depth integer, pool integer)
  returns table (memory_id uuid, created_at timestamptz, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  -- Candidates: the per_term postings of highest impact of each question lexeme in each layer read,
  -- and where a list was cut the `pool` memories of highest summed impact (the caller's argument),
  -- re-ranked exactly by ts_rank (docs/decisions/0007-impact-ordered-postings.md: the frontier of cost
  -- against the exact ranking; docs/decisions/0012-large-layers-get-hnsw-indexes.md: 1,500 rather
  -- than 2,000 reaches 10 ms at 100,000 rows for 0.7 of the exact top 10).
  per_term constant integer := 1500;
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
      -- Each layer with its postings' layer_kind (21_recall_postings.sql).
      select 'u'::"char" as kind, caller as id where caller is not null
      union all
      select 'p'::"char", p from unnest(projects) p
      union all
      select 't'::"char", t from unnest(teams) t
    ), postings as (
      select l.id as layer_id, t as lexeme, h.memory_id, h.impact
      from layers l
      cross join unnest(terms) t
      cross join lateral (
        select p.memory_id, p.impact from public.memory_postings p
        where p.layer_id = l.id and p.lexeme = t and p.layer_kind = l.kind
        order by p.impact desc
        limit per_term
      ) h
    ), summed as (
      select p.memory_id, sum(p.impact) as impact from postings p group by p.memory_id
    ), cut as (
      -- A list was cut if it holds a per_term-th posting: probed on the index, so that the postings
      -- feed one aggregate and are never materialised (grouping them by list cost ~3.5 of 13 ms at
      -- 100,000 rows).
      select exists (
        select from layers l cross join unnest(terms) t
        where exists (select from public.memory_postings p
                      where p.layer_id = l.id and p.lexeme = t and p.layer_kind = l.kind
                      order by p.impact desc
                      offset per_term - 1)) as list
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
      select m.id, m.created_at, ts_rank(roi.lexical_weights(), m.search, tsq, 1)::real as score
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
  -- Where a posting list was cut, the lexical leg's candidates re-ranked exactly: this recall's ranking
  -- is the answer, so it keeps the pool chosen for the exact top 10 (docs/decisions/0007; at 100,000
  -- real-text rows 300 lose a paraphrased source from its top 10: docs/decisions/0038).
  pool constant integer := 500;
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
  tsq tsquery;
begin
  if recall_lexical.project_id is null and recall_lexical.team_id is null and not coalesce(personal_only, false)
     and auth.uid() is null then
    tsq := public.recall_query(coalesce(query, ''));
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank(roi.lexical_weights(), m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  return query
    with best as (
      select b.memory_id, b.created_at, b.score
      from roi.recall_lexical_leg(query, recall_lexical.project_id, recall_lexical.team_id, personal_only, wanted,
                                  pool) b
    )
    -- `= any (array(…))`: the text of the chosen rows by primary key, never a join planned over the table.
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.memory_id = m.id
    where m.id = any (array(select best.memory_id from best))
    order by b.score desc, b.created_at desc, b.memory_id;
end
$$;

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
  -- Chosen on the paraphrased questions with all three legs (docs/decisions/0010-three-recall-legs.md): a small k
  -- lets a leg's first ranks count, and the two embedding legs weigh alike, a quarter above the lexical.
  rrf_k constant integer := 5;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.25;
  minilm_weight constant real := 1.25;
  -- Where a posting list was cut, the lexical leg's candidates re-ranked exactly (~4 shared buffers each):
  -- fewer than recall_lexical's 500, since its best 2 × match_count are one vote of the fusion, not the
  -- answer. At 100,000 real-text rows 300 keep the fused hit@1, hit@10 and MRR of both question sets
  -- for ~800 fewer buffers a recall; 200 lose a paraphrased source (docs/decisions/0038).
  lexical_pool constant integer := 300;
  caller uuid := auth.uid();
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if (query_embedding is null and query_embedding_minilm is null)
     or (recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false) and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  return query
    with lexical as (
      select x.memory_id as id, x.created_at,
             row_number() over (order by x.score desc, x.created_at desc, x.memory_id) as rank
      from roi.recall_lexical_leg(query, recall.project_id, recall.team_id, personal_only, wanted * 2,
                                  lexical_pool) x
    ), semantic as (
      select s.memory_id as id, s.created_at,
             row_number() over (order by s.distance, s.created_at desc, s.memory_id) as rank
      from roi.recall_semantic_leg('embedding', query_embedding, recall.project_id, recall.team_id, personal_only,
                                   wanted * 2) s
    ), minilm as (
      select s.memory_id as id, s.created_at,
             row_number() over (order by s.distance, s.created_at desc, s.memory_id) as rank
      from roi.recall_semantic_leg('embedding_minilm', query_embedding_minilm, recall.project_id, recall.team_id,
                                   personal_only, wanted * 2) s
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

revoke execute on function roi.recall_lexical_leg(text, uuid, uuid, boolean, integer, integer) from public, anon;
grant execute on function roi.recall_lexical_leg(text, uuid, uuid, boolean, integer, integer) to authenticated;
