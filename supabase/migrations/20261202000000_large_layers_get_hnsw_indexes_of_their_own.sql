-- Recall at 100,000 real-text memories a pinned layer cost 560 ms hybrid, nearly all of it the two
-- semantic legs' exact distances (issue 22: hybrid p50 <= 15 ms at 100,000 rows). A large layer now
-- gets HNSW indexes of its own, and the semantic legs take each layer's nearest by distance alone so
-- that such an index can serve them.

-- HNSW indexes of a large layer's own (issue 22, item 5). Exact distances over a pinned layer cost
-- ~2.8 ms per 1,000 rows a semantic leg (275 ms at 100,000 real-text rows), so a project or team
-- that holds many memories gets, per embedding column, a partial HNSW index whose predicate is that
-- layer. The hybrid recall pinned to it reads the index (a custom plan proves the pin implies the
-- predicate); every other layer keeps its exact distances. Unlike one index over the whole table
-- (20_recall.sql, point 2), the graph holds only rows every reader of the layer may read, so under
-- RLS it never under-returns and its work follows only the layer's own vectors.
--
-- Built with CREATE INDEX CONCURRENTLY, so writers are never blocked: that cannot run inside a
-- function or transaction, so the job that decides (`zm-roi-layer-indexes`, every ten minutes)
-- schedules a pg_cron job whose command is the statement itself, one index at a time, and
-- unschedules it once the index is valid. A build that failed leaves an invalid index; its job then drops it
-- (concurrently too) and the next decision schedules the build again.

-- The HNSW indexes the layers with at least `min_rows` live memories should have, one per layer and
-- embedding column, with their state and the one statement that moves them on: building it while
-- missing, dropping it while invalid and no build is running, none once valid (or while building).
create function roi.layer_vector_indexes(min_rows integer default 20000)
  returns table (index_name text, state text, statement text)
  language sql stable security invoker set search_path = ''
as $$
  with layers as (
    select 'project'::text as scope, m.project_id as layer_id
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null
    group by m.project_id
    having count(*) >= min_rows
    union all
    select 'team', m.team_id
    from public.memories m
    where m.scope = 'team' and m.invalidated_at is null
    group by m.team_id
    having count(*) >= min_rows
  ), wanted as (
    select l.scope, l.layer_id, v.column_name,
           format('hnsw_%s_%s', replace(l.layer_id::text, '-', ''), v.column_name) as index_name
    from layers l
    cross join (values ('embedding'), ('embedding_minilm')) v (column_name)
  ), found as (
    select w.*, i.indisvalid as valid,
           exists (select from pg_catalog.pg_stat_progress_create_index p where p.index_relid = c.oid) as building
    from wanted w
    left join pg_catalog.pg_class c on c.relname = w.index_name and c.relnamespace = 'public'::regnamespace
    left join pg_catalog.pg_index i on i.indexrelid = c.oid
  )
  select f.index_name,
         case when f.valid then 'valid' when f.building then 'building' when f.valid is null then 'missing'
              else 'invalid' end,
         case when f.valid is null then
                format('create index concurrently if not exists %I on public.memories using hnsw '
                       '(%I extensions.vector_cosine_ops) with (m = 32, ef_construction = 200) '
                       'where %I = %L and scope = %L and invalidated_at is null',
                       f.index_name, f.column_name, f.scope || '_id', f.layer_id, f.scope)
              when not f.valid and not f.building then
                format('drop index concurrently if exists public.%I', f.index_name)
         end
  from found f
  order by 1
$$;

-- The ten-minute decision: a pg_cron job for the first index with a statement to run, none for the
-- others: two concurrent builds on one table deadlock each other (CREATE INDEX CONCURRENTLY waits for
-- every older transaction, the other build's included), so nothing starts while one is building and
-- a layer's indexes are built one decision after another. Returns how many are scheduled (0 or 1).
-- Job names fit pg_cron's 63 characters: layer ids are uuids, unique across projects and teams.
create function roi.schedule_layer_indexes(min_rows integer default 20000) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  wanted record;
  scheduled integer := 0;
begin
  for wanted in
    select l.index_name, l.statement,
           coalesce(l.index_name = min(l.index_name) filter (where l.statement is not null) over ()
                    and not bool_or(l.state = 'building') over (), false) as next
    from roi.layer_vector_indexes(min_rows) l
  loop
    if wanted.next then
      perform cron.schedule('zm-roi-' || wanted.index_name, '* * * * *', wanted.statement);
      scheduled := scheduled + 1;
    else
      perform cron.unschedule(j.jobid) from cron.job j where j.jobname = 'zm-roi-' || wanted.index_name;
    end if;
  end loop;
  return scheduled;
end
$$;

-- ============================================================================================
-- Schedule
-- ============================================================================================

-- Beside upkeep, where pg_cron can exist; elsewhere the migration still applies.
do $schedule$
begin
  if not exists (select from pg_catalog.pg_extension where extname = 'pg_cron') then
    raise notice 'pg_cron is not installed: large layers keep exact semantic recall';
    return;
  end if;
  perform cron.schedule('zm-roi-layer-indexes', '*/10 * * * *', 'select roi.schedule_layer_indexes()');
end
$schedule$;

-- ============================================================================================
-- Grants
-- ============================================================================================
-- For the database owner and pg_cron only: they read every layer's size and build indexes.
revoke execute on function roi.layer_vector_indexes(integer), roi.schedule_layer_indexes(integer) from public;

-- The semantic legs read each layer's nearest by distance alone (an index order has no tie-breaks).
-- The bundled recall: the contract's five arguments plus two optional query embeddings (the documented
-- extension of the contract): the first model's (`embedding`) and MiniLM's (`embedding_minilm`).
-- Without an embedding, or for a caller with no identity and no pin (maintenance: exact distances over
-- a whole corpus are not a read path), it is the lexical recall. With one or both, the lexical leg
-- (roi.recall_lexical_leg, its best 2 × match_count) plus a semantic leg per embedding given (a leg
-- whose embedding is null is left out, so a deployment with one hosted model fuses two legs), over
-- the layers the lexical leg reads (roi.recall_layers): the semantic legs rank the embedded memories
-- by exact cosine distance from their covering indexes alone (index-only scans: id, created_at and the
-- distance; `minilm` on the second column), or, in a layer with HNSW indexes of its own
-- (42_recall_layer_indexes.sql), by those (ef_search 200: at 100,000 rows the source in the top 10
-- for 70 of 81 questions against 73 exact, at 2.7 against 275 ms), each keeping its best 2 × match_count. Reciprocal rank
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
  set jit = off set hnsw.ef_search = 200
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
  -- Each layer's nearest by distance alone, so a layer's own HNSW index can serve it (its order has
  -- no tie-breaks); twice what the leg keeps, so ties at the cut are still ranked by age.
  nearest integer := wanted * 4;
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
        (select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding as distance
         from public.memories m
         where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
           and m.embedding is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
         from public.memories m
         where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
           and m.embedding is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
         from public.memories m
         where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
           and m.embedding is not null
         order by 3 limit nearest)
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), minilm as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        (select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm as distance
         from public.memories m
         where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
           and m.embedding_minilm is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
         from public.memories m
         where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
           and m.embedding_minilm is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
         from public.memories m
         where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
           and m.embedding_minilm is not null
         order by 3 limit nearest)
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
