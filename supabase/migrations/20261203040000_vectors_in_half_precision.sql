-- Issue 35, bytes per memory: both vector columns of public.memories in half precision. Each vector
-- is stored in the row and again in its layer kind's covering index (and, in a large layer, in that
-- layer's HNSW index); as halfvec(384) each copy takes 776 bytes instead of 1,544. At 10,000 memories
-- written the import's way a memory costs 19,832 bytes instead of 25,245, and recall ranks the
-- project's paraphrase set exactly as before (docs/decisions/0023).
--
-- What it costs to run. `alter column ... type` rewrites public.memories and rebuilds every index on
-- it under an ACCESS EXCLUSIVE lock: no recall, write, upkeep cycle or benchmark run reads or writes
-- memories until it commits, and the disk must hold a second copy of the table and its indexes until
-- then. The rewrite is also the `vacuum full` decision 0019 left to the operator: every row is
-- written again, its vectors in the row (STORAGE plain), and the import's dead versions are gone. At
-- 100,000 memories (909 MB of memories and their indexes, 566 MB after) it took 20 s on the bench's
-- 2-core machine; a hosted instance with a slower disk takes longer, and writes the new table and
-- indexes to its WAL too. Run it when agents can wait (docs/deploy.md).
--
-- A change of type resets a column's storage to the type's default (external), which would move the
-- vectors out of line again (decision 0019): both are set back to `plain` in the same statement, before
-- the rewrite writes a row.
--
-- A large layer's HNSW indexes (22_recall_layer_indexes.sql) were built with vector's operator class,
-- which cannot index halfvec, and the rewrite would fail on them: they are dropped first, with any
-- pg_cron job still scheduled to build one the old way. The ten-minute decision
-- (`zm-roi-layer-indexes`) then builds them again, concurrently and one at a time, with halfvec's
-- operator class; until each is valid the layer's semantic leg ranks by exact distance.
--
-- Query embeddings stay `vector`: recall's signature, the worker's questions (roi.probes) and every
-- client are unchanged, and a `vector` casts to halfvec implicitly where it meets a stored one.

-- ============================================================================================
-- Tables
-- ============================================================================================
-- First the large layers' HNSW indexes (named by roi.layer_vector_indexes) and their pending builds.
do $drop$
declare
  index_name text;
begin
  for index_name in
    select c.relname from pg_catalog.pg_index i
    join pg_catalog.pg_class c on c.oid = i.indexrelid
    join pg_catalog.pg_am a on a.oid = c.relam
    where i.indrelid = 'public.memories'::regclass and a.amname = 'hnsw'
      and c.relname ~ '^hnsw_[0-9a-f]{32}_embedding(_minilm)?$'
  loop
    execute format('drop index public.%I', index_name);
  end loop;
  if exists (select from pg_catalog.pg_extension where extname = 'pg_cron') then
    perform cron.unschedule(j.jobid) from cron.job j where j.jobname like 'zm-roi-hnsw\_%';
  end if;
end
$drop$;

alter table public.memories
  alter column embedding type extensions.halfvec(384),
  alter column embedding_minilm type extensions.halfvec(384),
  alter column embedding set storage plain,
  alter column embedding_minilm set storage plain;

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The statement that builds a large layer's HNSW index names halfvec's operator class.
create or replace function roi.layer_vector_indexes(min_rows integer default 20000)
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
