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
-- function or transaction, so the job that decides (`zm-roi-layer-indexes`, every minute) keeps ONE
-- pg_cron job, `zm-roi-layer-index-build` (every minute), whose command is the statement of the next
-- index to build, and moves that command on while a build runs (decision 0031). pg_cron runs one
-- instance of a job at a time and keeps a run that falls due while the job is busy, starting it the
-- moment the running one ends with the job's command as it is then: the next build starts as the
-- previous one ends, not at the minute after a decision has seen it end. A failed build leaves an
-- invalid index; the job then drops it (concurrently too) and builds it again. The job is unscheduled
-- once nothing is left to build and none of its runs is in flight, never during a run (pg_cron ends a
-- run whose job went away: "job canceled").

-- The way from an import to fast recall (decision 0028). The import runs as the user, who may neither
-- create an index nor schedule a job, so it leaves no signal of its own: the table's write counters are
-- the signal. The decision runs every minute and stops after one row of statistics while the memories
-- saw no write since its last look and no build of its is in flight. A layer's index is wanted once
-- `min_rows` of its live memories carry that column's vector, so a build starts while an import still
-- writes vectors, and the import's later UPDATEs join the graph as they come. Deciders are serialised by
-- an advisory lock (roi.layer_index_lock_key()); a build in flight is the build job's run (pg_cron's
-- run log, cron.job_run_details, names its process), or any CREATE INDEX on the memories in progress. Anyone else who builds one of these indexes (an operator,
-- a bench) holds that lock for the session while building, so the decision never starts a second build
-- beside theirs: two CREATE INDEX CONCURRENTLY on one table deadlock.
--
-- A build's session: an HNSW graph that fits in maintenance_work_mem is built in memory, several times
-- faster than one spilled to the index's pages, and a build outlasts Supabase's global statement_timeout
-- (2 minutes, which would cancel it and leave an invalid index to drop and build again, forever).
-- pg_cron runs one statement a job, so no SET can go before the CREATE INDEX: the decision sets the
-- owner role's own defaults in this database (ALTER ROLE ... IN DATABASE ... SET, which any role may do
-- for itself, Supabase's `postgres` included; it outranks the database's and the role's own settings),
-- a maintenance_work_mem sized to the layer and no statement_timeout, and resets both once nothing is
-- left to build. Those two per-database defaults of the owner role are the decision's own.

-- ============================================================================================
-- Tables
-- ============================================================================================
-- What the decision saw last (one row): the memories' write counter, and the build memory it set on
-- its role (null: none of its own).
create table roi.layer_index_state (
  singleton boolean primary key default true check (singleton),
  writes_seen bigint,
  build_memory text
);
insert into roi.layer_index_state default values;

-- Autovacuum on the memories visits after 1% of the table changed (PostgreSQL's default is 20%): a
-- 10,000-row import into a 1,000,000-row table leaves its layer's index-only scans fetching the heap
-- until vacuum sets the visibility map, and at 20% that waits for 200,000 more changes.
alter table public.memories set (autovacuum_vacuum_scale_factor = 0.01,
                                 autovacuum_vacuum_insert_scale_factor = 0.01,
                                 autovacuum_analyze_scale_factor = 0.01);
-- The postings change with the memories (an import inserts its layer's), and the lexical leg's
-- index-only scans fetch their heap until vacuum has been: the same thresholds.
alter table public.memory_postings set (autovacuum_vacuum_scale_factor = 0.01,
                                        autovacuum_vacuum_insert_scale_factor = 0.01,
                                        autovacuum_analyze_scale_factor = 0.01);

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The advisory lock every builder of a layer's index holds: the decision for its transaction, anyone
-- else for their session while they build.
create function roi.layer_index_lock_key() returns bigint
  language sql immutable security invoker set search_path = ''
as $$
  select hashtextextended('zm-roi layer index builds', 0)
$$;

-- The HNSW indexes the layers with at least `min_rows` live memories should have, with their state and
-- the one statement that moves them on: building it once `min_rows` of the layer's live memories carry
-- what it indexes ('waiting' before), dropping it while invalid and no build is running, none once valid
-- (or while building). Per layer and embedding column, one index over the column's sign bits
-- (roi.embedding_bits, bit_hamming_ops; named `…_bits`, `…_minilm_bits`), which the semantic leg reads
-- for its candidates and ranks exactly (docs/decisions/0032), and one over the column's vectors
-- (halfvec_cosine_ops, the columns' type: 10_memory_core.sql; named for the column) only while
-- `min_rows` of them have no bits (a model with no centre). An index over the vectors that is no longer
-- wanted ('unwanted') is dropped once the layer's index over the bits is valid, never before: the leg
-- reads the old one until then. `embedded` counts the memories an index would hold while it is missing
-- (null otherwise: counting reads the rows); `layer_rows`, the layer's live memories.
create function roi.layer_vector_indexes(min_rows integer default 20000)
  returns table (index_name text, state text, statement text, embedded bigint, layer_rows bigint)
  language sql stable security invoker set search_path = ''
as $$
  with layers as (
    select 'project'::text as scope, m.project_id as layer_id, count(*) as layer_rows
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null
    group by m.project_id
    having count(*) >= min_rows
    union all
    select 'team', m.team_id, count(*)
    from public.memories m
    where m.scope = 'team' and m.invalidated_at is null
    group by m.team_id
    having count(*) >= min_rows
  ), wanted as (
    select l.scope, l.layer_id, l.layer_rows, v.column_name, v.bits,
           format('hnsw_%s_%s', replace(l.layer_id::text, '-', ''), v.suffix) as index_name,
           format('hnsw_%s_%s', replace(l.layer_id::text, '-', ''), v.twin) as twin_name
    from layers l
    cross join (values ('embedding', true, 'bits', 'embedding'), ('embedding_minilm', true, 'minilm_bits', 'embedding_minilm'),
                       ('embedding', false, 'embedding', 'bits'),
                       ('embedding_minilm', false, 'embedding_minilm', 'minilm_bits')) v (column_name, bits, suffix, twin)
  ), counted as (
    select w.*, i.indisvalid as valid,
           exists (select from pg_catalog.pg_stat_progress_create_index p where p.index_relid = c.oid) as building,
           coalesce((select t.indisvalid from pg_catalog.pg_index t
                     where t.indexrelid = to_regclass('public.' || w.twin_name)), false) as twin_valid,
           -- What the index holds: memories with the column's bits, or with its vector and no bits. Counted
           -- for an index over the vectors always (its covering index is empty while every vector has bits).
           case when i.indisvalid is null or not w.bits then
             (select count(*) from public.memories m
              where m.scope = w.scope and m.invalidated_at is null
                and (w.scope = 'project' and m.project_id = w.layer_id or w.scope = 'team' and m.team_id = w.layer_id)
                and case when w.bits and w.column_name = 'embedding' then m.embedding_bits is not null
                         when w.bits then m.embedding_minilm_bits is not null
                         when w.column_name = 'embedding' then m.embedding is not null and m.embedding_bits is null
                         else m.embedding_minilm is not null and m.embedding_minilm_bits is null end)
           end as holds
    from wanted w
    left join pg_catalog.pg_class c on c.relname = w.index_name and c.relnamespace = 'public'::regnamespace
    left join pg_catalog.pg_index i on i.indexrelid = c.oid
  ), found as (
    select c.*, case when c.valid is null then c.holds end as embedded,
           c.bits or c.holds >= min_rows as kept
    from counted c
    -- An index over the vectors that is neither wanted nor there is no index of the layer's.
    where c.bits or c.holds >= min_rows or c.valid is not null
  )
  select f.index_name,
         case when f.valid and not f.kept and f.twin_valid then 'unwanted'
              when f.valid then 'valid' when f.building then 'building'
              when f.valid is null and f.embedded >= min_rows then 'missing'
              when f.valid is null then 'waiting' else 'invalid' end,
         case when f.valid is null and f.embedded >= min_rows then
                format('create index concurrently if not exists %I on public.memories using hnsw '
                       '(%I extensions.%s) with (m = 32, ef_construction = 200) '
                       'where %I = %L and scope = %L and invalidated_at is null',
                       f.index_name, f.column_name || case when f.bits then '_bits' else '' end,
                       case when f.bits then 'bit_hamming_ops' else 'halfvec_cosine_ops' end,
                       f.scope || '_id', f.layer_id, f.scope)
              when not f.valid and not f.building
                   or f.valid and not f.kept and f.twin_valid then
                format('drop index concurrently if exists public.%I', f.index_name)
         end,
         f.embedded, f.layer_rows
  from found f
  order by 1
$$;

-- The memories' writes as the statistics count them (inserted, updated, deleted rows), this
-- transaction's own included: the cheap signal that something may have changed.
create function roi.memories_writes() returns bigint
  language sql stable security invoker set search_path = ''
as $$
  select pg_catalog.pg_stat_get_tuples_inserted(t.oid) + pg_catalog.pg_stat_get_tuples_updated(t.oid)
         + pg_catalog.pg_stat_get_tuples_deleted(t.oid) + pg_catalog.pg_stat_get_xact_tuples_inserted(t.oid)
         + pg_catalog.pg_stat_get_xact_tuples_updated(t.oid) + pg_catalog.pg_stat_get_xact_tuples_deleted(t.oid)
  from (select 'public.memories'::regclass::oid as oid) t
$$;

-- The one-minute decision: the build job's command set to the statement of the first index that has
-- one, while the job is idle or while its own run builds another index (its queued run then starts the
-- next build the moment this one ends); nothing run beside anyone else's index build on the memories
-- (two CREATE INDEX CONCURRENTLY on one table deadlock each other: each waits for every older
-- transaction, the other build's included), so then an idle job is unscheduled and a running one's
-- command left alone (a queued run repeats `create index concurrently if not exists` of an index that
-- is there, which does nothing). Once nothing is left to build and no run is in flight, the job is
-- unscheduled and the role's build defaults reset. Returns 1 while the job holds a statement to run,
-- else 0; 0 at once when another builder holds the lock, or when the memories saw no write since the
-- last look and there is neither a build job nor a build. The job's run in flight is its latest in
-- pg_cron's run log (cron.log_run, on by default) not yet succeeded or failed whose process is still
-- there (pg_cron marks the runs of a server that restarted failed). pg_cron starts the job's runs at
-- the minute's start, as it starts this decision, and a run may repeat a statement whose index is
-- there, so the decision waits for what a run does: up to a second for an idle job's run to begin,
-- up to ten for a run to be building or over (pg_cron 1.4 in background-worker mode, this machine's,
-- runs no other job while a build runs, so the decisions that see a build are the ones that start
-- beside it). `build_memory_cap` bounds the build memory it sets (2.5 kB a live
-- memory of the layer, at least 64 MB: the graph of 32 neighbours a level-0 node and a 384-half-float
-- vector takes about 2 kB). Sized on the layer's rows, not the vectors there so far: an import's
-- vectors keep coming while the build waits for its minute, and a graph sized on the first 20,000
-- spilled after 32,081 of 100,000 (decision 0028).
create function roi.schedule_layer_indexes(min_rows integer default 20000, build_memory_cap integer default 1024)
  returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job_name constant text := 'zm-roi-layer-index-build';
  wanted record;
  writes bigint := roi.memories_writes();
  seen roi.layer_index_state;
  job_id bigint;
  job_command text;
  job_active boolean;
  running boolean;
  attempt integer;
  run_pid integer;
  run_command text;
  memory text;
  postings_statement text;
begin
  if not pg_catalog.pg_try_advisory_xact_lock(roi.layer_index_lock_key()) then
    return 0;
  end if;
  select * into seen from roi.layer_index_state;
  select j.jobid, j.command, j.active into job_id, job_command, job_active from cron.job j where j.jobname = job_name;
  if job_id is null and writes is not distinct from seen.writes_seen
     and not exists (select from pg_catalog.pg_stat_progress_create_index p
                     where p.relid = 'public.memories'::regclass) then
    return 0;
  end if;
  update roi.layer_index_state set writes_seen = writes;
  -- The job's run in flight, as it shows once it has begun: its own CREATE INDEX, or its process gone.
  if job_id is not null then
    for attempt in 1 .. 50 loop
      perform pg_catalog.pg_stat_clear_snapshot();
      select d.status not in ('succeeded', 'failed'), d.job_pid, d.command into running, run_pid, run_command
      from cron.job_run_details d where d.jobid = job_id order by d.runid desc limit 1;
      running := coalesce(running, false)
                 and (run_pid is null or exists (select from pg_catalog.pg_stat_activity a where a.pid = run_pid));
      exit when running and exists (select from pg_catalog.pg_stat_progress_create_index p where p.pid = run_pid)
             or not running and (attempt > 5 or not job_active);
      perform pg_catalog.pg_sleep(0.2);
    end loop;
  end if;
  running := coalesce(running, false);
  if exists (select from pg_catalog.pg_stat_progress_create_index p
             where p.relid = 'public.memories'::regclass and (not running or p.pid is distinct from run_pid)) then
    if job_id is not null and not running then
      perform cron.unschedule(job_id);
    end if;
    return 0;
  end if;
  select l.index_name, l.statement, l.embedded, l.layer_rows into wanted
  from roi.layer_vector_indexes(min_rows) l
  where l.statement is not null
    -- The run's own index, before its CREATE INDEX has put it in the catalog.
    and (not running or l.index_name is distinct from substring(run_command from 'hnsw_[0-9a-f]+_[a-z_]+'))
  order by l.index_name
  limit 1;
  if wanted.statement is not null then
    if wanted.embedded is not null then
      memory := least(build_memory_cap, greatest(64, ceil(wanted.layer_rows * 2.5 / 1024)::integer)) || 'MB';
      if memory is distinct from seen.build_memory then
        execute format('alter role %I in database %I set maintenance_work_mem = %L',
                       current_user, current_database(), memory);
        execute format('alter role %I in database %I set statement_timeout = 0', current_user, current_database());
        update roi.layer_index_state set build_memory = memory;
      end if;
    end if;
    -- By the same name pg_cron updates the job in place (same job id, a run in flight goes on).
    if wanted.statement is distinct from job_command then
      perform cron.schedule(job_name, '* * * * *', wanted.statement);
    end if;
    return 1;
  end if;
  if running then
    -- A rebuild of the postings' impact index is not repeated by the run pg_cron queued behind it.
    if run_command ~* '^reindex' and job_command = run_command then
      perform cron.schedule(job_name, '* * * * *', 'select 1');
    end if;
    return 0;
  end if;
  -- Nothing left to build: the postings' impact index, filled in memory order by an import, rebuilt
  -- once it holds more than 80 bytes a posting (a rebuilt one holds about 69) and at least ten a
  -- `min_rows` layer's memory (its statistics, as vacuum or analyze left them), or the invalid copy a
  -- failed rebuild left dropped.
  select format('drop index concurrently if exists public.%I', c.relname) into postings_statement
  from pg_catalog.pg_class c join pg_catalog.pg_index i on i.indexrelid = c.oid
  where c.relnamespace = 'public'::regnamespace and c.relname like 'memory\_postings\_impact\_idx\_ccnew%'
    and not i.indisvalid
  limit 1;
  if postings_statement is null and exists (
       select from pg_catalog.pg_class c
       where c.oid = to_regclass('public.memory_postings_impact_idx') and c.reltuples >= 10 * min_rows
         and pg_catalog.pg_relation_size(c.oid) > 80 * c.reltuples) then
    postings_statement := 'reindex index concurrently public.memory_postings_impact_idx';
  end if;
  if postings_statement is not null then
    if postings_statement is distinct from job_command then
      perform cron.schedule(job_name, '* * * * *', postings_statement);
    end if;
    return 1;
  end if;
  if job_id is not null then
    perform cron.unschedule(job_id);
  end if;
  if seen.build_memory is not null then
    execute format('alter role %I in database %I reset maintenance_work_mem', current_user, current_database());
    execute format('alter role %I in database %I reset statement_timeout', current_user, current_database());
    update roi.layer_index_state set build_memory = null;
  end if;
  return 0;
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
-- For the database owner and pg_cron only: they read every layer's size and build indexes.
revoke execute on function roi.layer_vector_indexes(integer), roi.memories_writes(),
  roi.schedule_layer_indexes(integer, integer), roi.layer_index_lock_key() from public;
alter table roi.layer_index_state enable row level security;
revoke all on roi.layer_index_state from public, anon, authenticated;
