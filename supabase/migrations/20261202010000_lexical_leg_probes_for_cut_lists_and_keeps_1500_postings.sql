-- The lexical leg decided whether a posting list was cut by grouping every posting it read by list:
-- at 100,000 real-text rows that aggregate, and the materialised postings it forced, cost ~3.5 ms of a
-- 13 ms recall (issue 22: lexical p50 <= 10 ms at 100,000 rows). It now probes each list's
-- per_term-th posting on the index instead: the same results for all 81 bench questions at 1k, 10k
-- and 100k rows, 13.4 -> 9.8 ms at 100k interleaved. And a list keeps 1,500 postings, not 2,000:
-- 11.4 -> 8.9 ms at 100k, the source still in the top 10 for 68 of 81, 7.5 instead of 8.1 of the
-- exact top 10 on average; 4.1 -> 4.8 ms at 10,000 rows (more lists cut, still exact there).

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
create or replace function roi.recall_lexical_leg(query text, pin_project uuid, pin_team uuid, personal_only boolean,
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
  -- ts_rank (bench/README.md, "Impact-ordered postings": the frontier of cost against the exact ranking;
  -- "Large layers": 1,500 rather than 2,000 reaches 10 ms at 100,000 rows for 0.7 of the exact top 10).
  per_term constant integer := 1500;
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
      -- A list was cut if it holds a per_term-th posting: probed on the index, so that the postings
      -- feed one aggregate and are never materialised (grouping them by list cost ~3.5 of 13 ms at
      -- 100,000 rows).
      select exists (
        select from layers l cross join unnest(terms) t
        where exists (select from public.memory_postings p
                      where p.layer_id = l.id and p.lexeme = t and p.scope = l.scope
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
