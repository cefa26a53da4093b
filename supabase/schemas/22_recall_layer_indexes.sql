-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Recall, part 3 of 3: the HNSW indexes of a large layer's own and the pg_cron job that builds them.
-- Cut from 20_recall.sql because it is maintenance, run by the database owner, not by recall's callers.
-- Its pg_cron job is scheduled beside upkeep's (80_roi_upkeep.sql), once upkeep has created pg_cron.
--
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

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The HNSW indexes the layers with at least `min_rows` live memories should have, one per layer and
-- embedding column, with their state and the one statement that moves them on: building it while
-- missing, dropping it while invalid and no build is running, none once valid (or while building).
-- The operator class is halfvec's, the columns' type (10_memory_core.sql): an index built over `vector`
-- before the columns became halfvec was dropped with that change and is built again from here.
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
                       '(%I extensions.halfvec_cosine_ops) with (m = 32, ef_construction = 200) '
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
-- Grants
-- ============================================================================================
-- For the database owner and pg_cron only: they read every layer's size and build indexes.
revoke execute on function roi.layer_vector_indexes(integer), roi.schedule_layer_indexes(integer) from public;
