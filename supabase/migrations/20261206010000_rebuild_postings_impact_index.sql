-- The postings' impact index rebuilt by the build job of a large layer (decision 0036): postings arrive in
-- memory order, so the index ends about 62% full after an import. Once nothing is left to build, the
-- decision sets the job's command to `reindex index concurrently` of it while it holds more than 80
-- bytes a posting, and to a drop of the invalid copy a failed rebuild left.

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
create or replace function roi.schedule_layer_indexes(min_rows integer default 20000, build_memory_cap integer default 1024)
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
