-- The postings slimmed (docs/decisions/0033-slim-postings.md): at 100,000 memories they were ~45 rows a
-- memory and half of every byte. A posting loses its author (the write policies ask the memory who wrote
-- it), its scope becomes a one-byte layer_kind ('u' personal, 'p' project, 't' team) and the
-- fixed-width columns come first, so no byte is alignment padding: the heap row and the impact index's
-- entry both shrink. Postgres cannot reorder columns, so the table is rebuilt: the old one is renamed,
-- the new one filled from it, the old one dropped. Its indexes, policies, grants, the triggers'
-- functions and the lexical leg follow the new columns; what they do is unchanged.
alter table public.memory_postings rename to memory_postings_before_slim;
drop index public.memory_postings_impact_idx;
drop index public.memory_postings_memory_idx;
alter table public.memory_postings_before_slim drop constraint memory_postings_memory_id_fkey;

create table public.memory_postings (
  memory_id uuid not null references public.memories (id) on delete cascade,
  layer_id uuid not null,
  impact real not null,
  layer_kind "char" not null check (layer_kind in ('u', 'p', 't')),
  lexeme text not null
);

insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
select memory_id, layer_id, impact,
       (case scope when 'personal' then 'u' when 'project' then 'p' else 't' end)::"char", lexeme
from public.memory_postings_before_slim
order by layer_id, lexeme, impact desc;
drop table public.memory_postings_before_slim;

create index memory_postings_impact_idx on public.memory_postings (layer_id, lexeme, impact desc)
  include (layer_kind, memory_id);
-- A memory's postings, for the foreign key's cascade and roi.repost_memory()'s delete. Keyed on the
-- memory alone, so b-tree deduplication keeps one key and a list of heap pointers for its ~45 postings.
create index memory_postings_memory_idx on public.memory_postings (memory_id);
-- The rebuilt table keeps the memories' autovacuum thresholds (migration 20261205060000 gave them to the old one).
alter table public.memory_postings set (autovacuum_vacuum_scale_factor = 0.01,
                                        autovacuum_vacuum_insert_scale_factor = 0.01,
                                        autovacuum_analyze_scale_factor = 0.01);

alter table public.memory_postings enable row level security;

-- Matched against arrays gathered once per statement (InitPlans): a recall reads thousands of postings,
-- and each is then matched against a short array instead of probing a hashed subplan (the memories'
-- policy keeps its subplan: 10_memory_core.sql).
create policy "Postings are visible to their memory's audience" on public.memory_postings
  for select to authenticated using (
    (layer_kind = 'u' and layer_id = (select auth.uid()))
    or (layer_kind = 'p' and layer_id = any (array(select public.caller_project_ids())))
    or (layer_kind = 't' and layer_id = any (array(select public.caller_team_ids())))
  );

-- A posting names a memory its writer wrote, in that memory's own layer, which the writer still
-- belongs to. The memory says who wrote it (one probe of its primary key a posting), so the postings
-- carry no author of their own.
create policy "Authors post their memories where they belong" on public.memory_postings
  for insert to authenticated with check (
    (
      (layer_kind = 'u' and layer_id = (select auth.uid()))
      or (layer_kind = 'p' and layer_id in (select public.caller_project_ids()))
      or (layer_kind = 't' and layer_id in (select public.caller_team_ids()))
    )
    and exists (
      select from public.memories m
      where m.id = memory_id and m.author_id = (select auth.uid())
        and m.scope = case layer_kind when 'u' then 'personal' when 'p' then 'project' else 'team' end
        and coalesce(m.project_id, m.team_id, m.author_id) = layer_id
    )
  );

create policy "Authors withdraw their memories' postings" on public.memory_postings
  for delete to authenticated using (
    exists (select from public.memories m where m.id = memory_id and m.author_id = (select auth.uid()))
  );

create or replace function roi.post_new_memories() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
  select n.id, coalesce(n.project_id, n.team_id, n.author_id),
         ts_rank(roi.lexical_weights(), n.search,
                 ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
         (case n.scope when 'personal' then 'u' when 'project' then 'p' else 't' end)::"char", l.lexeme
  from new_memories n
  cross join lateral unnest(n.search) l
  where n.invalidated_at is null;
  return null;
end
$$;

-- A memory whose words, layer or liveness changed gets its postings again (an invalidated one none).
-- A delete needs nothing here: the postings' foreign key cascades.
create or replace function roi.repost_memory() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  delete from public.memory_postings p where p.memory_id = old.id;
  if new.invalidated_at is null then
    insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
    select new.id, coalesce(new.project_id, new.team_id, new.author_id),
           ts_rank(roi.lexical_weights(), new.search,
                   ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
           (case new.scope when 'personal' then 'u' when 'project' then 'p' else 't' end)::"char", l.lexeme
    from unnest(new.search) l;
  end if;
  return null;
end
$$;

create or replace function roi.recall_lexical_leg(query text, pin_project uuid, pin_team uuid, personal_only boolean,
  depth integer)
  returns table (memory_id uuid, created_at timestamptz, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  -- Candidates: the per_term postings of highest impact of each question lexeme in each layer read,
  -- and where a list was cut the `pool` memories of highest summed impact, re-ranked exactly by
  -- ts_rank (docs/decisions/0007-impact-ordered-postings.md: the frontier of cost against the exact
  -- ranking; docs/decisions/0012-large-layers-get-hnsw-indexes.md: 1,500 rather than 2,000 reaches
  -- 10 ms at 100,000 rows for 0.7 of the exact top 10).
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

revoke all on public.memory_postings from anon, authenticated;
grant select, insert, delete on public.memory_postings to authenticated;
