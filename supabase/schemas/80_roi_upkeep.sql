-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Upkeep: the minute-by-minute care of every owner's pool and runs, scheduled with pg_cron.
-- The marks of changed layers that tell it whom to visit, the owners' routine runs it starts (their
-- schedules are tables of 31_roi_results.sql), and both pg_cron jobs. Cut here because it is the one
-- part that runs as a privileged role, after everything it drives (the pool, runs and queue) exists.
--
-- It runs as a privileged role (the cron job's owner) but never reads memories as such: for any
-- step that touches memories it impersonates the owner exactly as PostgREST would (role
-- `authenticated` plus `request.jwt.claims`), so retirement and top-up see what the owner sees.
--
-- Upkeep is proportional to what changed: waking every owner with a pool on any write anywhere
-- would make a busy cycle at 10,000 owners take most of a minute. The memory and membership
-- triggers mark the *layers* a statement touched (a personal layer, a project, a team) in
-- roi.dirty_layers, and upkeep resolves those layers to their owners through the memberships,
-- visiting only owners whose visible knowledge could have moved (plus owners with a closed run to
-- rotate). The triggers run as the writing user and only write layer ids that the statement's own
-- rows carry, so they read no membership and RLS never hides anything they need; a signed-in writer
-- may add a mark and read none. An idle cycle touches only small bookkeeping tables (pending runs,
-- dirty layers, upkeep state) and the settings row.

-- ============================================================================================
-- Tables
-- ============================================================================================
-- When upkeep last ran (one row): proof that the schedule is alive.
create table roi.upkeep_state (
  singleton boolean primary key default true check (singleton),
  last_run_at timestamptz
);
insert into roi.upkeep_state default values;

-- A layer whose memories or audience changed since the last upkeep cycle. `personal` marks one
-- owner (their own memories, or their memberships); `project` and `team` mark every member.
-- `can_retire` is false for a change that only adds (new memories, a new membership): it cannot
-- make a probe's source invisible, so an owner whose pool is already full has nothing to do. It is
-- part of the key so that a writer only ever inserts (an upsert would need to read marks).
create table roi.dirty_layers (
  layer text not null check (layer in ('personal', 'project', 'team')),
  layer_id uuid not null,
  can_retire boolean not null,
  primary key (layer, layer_id, can_retire)
);

-- ============================================================================================
-- Functions
-- ============================================================================================
-- How long a schedule's period is: a day or a week, or roi.settings.schedule_period_override (tests).
create function roi.schedule_period(frequency text) returns interval
  language sql stable security invoker set search_path = ''
as $$
  select coalesce((select s.schedule_period_override from roi.settings s),
                  case frequency when 'weekly' then interval '7 days' else interval '1 day' end)
$$;

-- When the owner's scheduled run of the current period is due: the period's start (UTC days; weeks
-- from Monday) plus the owner's own quiet minute, an offset derived from their id, so that owners'
-- runs spread over the period instead of all landing on midnight.
create function roi.schedule_due_at(owner uuid, frequency text) returns timestamptz
  language sql stable security invoker set search_path = ''
as $$
  select date_bin(p.period, now(), timestamptz '2001-01-01 00:00:00+00')
         + (abs(hashtextextended('roi.schedule:' || owner::text, 0))
            % greatest(1, (extract(epoch from p.period) / 60)::bigint)) * interval '1 minute'
  from (select roi.schedule_period(frequency) as period) p
$$;

-- `zm-roi schedule`: the caller's wish for a routine run, 'daily' or 'weekly', or 'off' to remove it.
-- SECURITY INVOKER: the row is written as the caller, under RLS. Refused for an unknown frequency and,
-- unless turning it off, for a caller with no live knowledge to probe (nothing a run could measure).
create function public.benchmark_schedule(frequency text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  caller uuid := auth.uid();
  wanted text := lower(btrim(coalesce(frequency, '')));
begin
  if caller is null or coalesce(auth.role(), '') <> 'authenticated' then
    raise exception 'benchmark_schedule() needs a signed-in user: call it with the user''s access token'
      using errcode = '28000';
  end if;
  if wanted not in ('daily', 'weekly', 'off') then
    raise exception 'unknown schedule %: daily, weekly or off', coalesce(frequency, 'null') using errcode = '22023';
  end if;
  if wanted = 'off' then
    delete from roi.benchmark_schedules s where s.owner_id = caller;
    return jsonb_build_object('frequency', 'off');
  end if;
  if not exists (select from public.memories m
                 where m.kind in ('decision', 'gotcha', 'convention') and m.invalidated_at is null) then
    raise exception 'no live decision, gotcha or convention memory is visible to this user: a scheduled run would have nothing to measure'
      using errcode = '22023';
  end if;
  insert into roi.benchmark_schedules (owner_id, frequency) values (caller, wanted)
  on conflict (owner_id) do update set frequency = excluded.frequency, updated_at = now();
  return jsonb_build_object('frequency', wanted,
                            'period', roi.schedule_period(wanted)::text,
                            'next_run_after', greatest(now(), roi.schedule_due_at(caller, wanted)));
end
$$;

-- Start the scheduled run of one owner, as that owner exactly as a Data API call of theirs would
-- (public.benchmark_memory() under role authenticated and their claims, recall under RLS), and record
-- it as this period's when one started. Any other answer (in_progress: a run is still open; generating;
-- empty) starts nothing, and a later upkeep cycle of the period tries again.
create function roi.start_scheduled_run(owner uuid, period_start timestamptz) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  result jsonb;
begin
  perform roi.impersonate(owner);
  result := public.benchmark_memory();
  perform set_config('role', 'none', true);
  perform set_config('request.jwt.claims', '', true);
  if result ->> 'status' = 'started' then
    insert into roi.scheduled_runs (run_id, owner_id, period_start)
    values ((result ->> 'run_id')::uuid, owner, period_start);
  end if;
  return result;
end
$$;

-- Become `owner` for the rest of the transaction, as a Data API request of theirs would.
create function roi.impersonate(owner uuid) returns void
  language sql volatile security invoker set search_path = ''
as $$
  select set_config('request.jwt.claims',
                    jsonb_build_object('sub', owner, 'role', 'authenticated')::text, true),
         set_config('role', 'authenticated', true);
$$;

-- Retire, rotate and top up one owner's pool, as that owner: the backstop for an owner who does not
-- call again after a run (the call itself rotates, through the same roi.rotate_completed_runs()).
-- Returns what it did (`added` counts the top-up after rotation's own refill).
create function roi.upkeep_owner(owner uuid) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  retired integer;
  rotated integer;
  added integer;
begin
  perform roi.impersonate(owner);
  perform roi.open_gate();
  retired := roi.retire_unreachable_probes();
  rotated := roi.rotate_completed_runs(null);
  added := roi.top_up_pool();
  perform roi.close_gate();
  perform set_config('role', 'none', true);
  perform set_config('request.jwt.claims', '', true);
  return jsonb_build_object('retired', retired, 'rotated', rotated, 'added', added);
end
$$;

-- Statement-level trigger on memories: mark each layer the changed rows lived in, before and after.
create function roi.mark_memory_layers() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  if tg_op in ('INSERT', 'UPDATE') then
    insert into roi.dirty_layers (layer, layer_id, can_retire)
    select distinct m.scope,
           case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end,
           tg_op = 'UPDATE'
    from new_rows m
    on conflict do nothing;
  end if;
  if tg_op in ('UPDATE', 'DELETE') then
    insert into roi.dirty_layers (layer, layer_id, can_retire)
    select distinct m.scope,
           case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end,
           true
    from old_rows m
    on conflict do nothing;
  end if;
  return null;
end
$$;

-- Statement-level trigger on project and team memberships: a member who joins or leaves sees a
-- different set of memories, so that owner (their personal mark) is visited.
create function roi.mark_member_layers() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  if tg_op in ('INSERT', 'UPDATE') then
    insert into roi.dirty_layers (layer, layer_id, can_retire)
    select distinct 'personal', m.user_id, tg_op = 'UPDATE' from new_rows m
    on conflict do nothing;
  end if;
  if tg_op in ('UPDATE', 'DELETE') then
    insert into roi.dirty_layers (layer, layer_id, can_retire)
    select distinct 'personal', m.user_id, true from old_rows m
    on conflict do nothing;
  end if;
  return null;
end
$$;

-- The owners upkeep must visit for the marks it just took: personal marks are owners themselves,
-- project and team marks are their members now. Only owners with a pool need care, and of those an
-- owner whose marks only add knowledge needs none while their pool is full (nothing to retire,
-- nothing to top up).
create function roi.owners_of_layers(layers jsonb) returns setof uuid
  language sql stable security invoker set search_path = ''
as $$
  with taken as (
    select l ->> 'layer' as layer, (l ->> 'layer_id')::uuid as layer_id, (l ->> 'can_retire')::boolean as can_retire
    from jsonb_array_elements(layers) l
  ), marked as (
    select t.layer_id as owner_id, t.can_retire from taken t where t.layer = 'personal'
    union all
    select pm.user_id, t.can_retire from taken t join public.project_members pm on pm.project_id = t.layer_id
    where t.layer = 'project'
    union all
    select tm.user_id, t.can_retire from taken t join public.team_members tm on tm.team_id = t.layer_id
    where t.layer = 'team'
  ), owners as (
    select m.owner_id, bool_or(m.can_retire) as can_retire from marked m group by m.owner_id
  )
  select o.owner_id from owners o
  cross join lateral (
    select count(*) filter (where p.state in ('pending', 'active')) as live, count(*) as ever
    from roi.probes p where p.owner_id = o.owner_id
  ) pool
  where pool.ever > 0
    and (o.can_retire or pool.live < (select s.pool_target from roi.settings s))
$$;

-- One upkeep cycle, idempotent: close runs past the timeout (and any whose last verdict landed
-- without closing it), then care for the owners whose pools could have changed: the owners of the
-- layers marked dirty since the last cycle, and owners with a closed run to rotate; last, start the
-- scheduled runs that are due (roi.start_scheduled_run, as each owner, one per period). The marks are
-- taken (deleted) in this transaction; an owner skipped as busy, or whose care failed, is marked
-- again so the next cycle retries them. A failure for one owner does not stop the others. JIT off:
-- at 1M memories an idle cycle spent ~10 ms compiling plans that ran in microseconds.
create function roi.upkeep() returns jsonb
  language plpgsql volatile security invoker set search_path = '' set jit = off
as $$
declare
  overdue integer := 0;
  finished integer := 0;
  owners integer := 0;
  failures integer := 0;
  busy integer := 0;
  retired integer := 0;
  rotated integer := 0;
  added integer := 0;
  scheduled integer := 0;
  marks jsonb;
  target record;
  outcome jsonb;
begin
  for target in
    select pr.run_id from roi.pending_runs pr
    where not pr.closed and pr.started_at <= clock_timestamp() - (select s.run_timeout from roi.settings s)
  loop
    overdue := overdue + roi.close_overdue_run(target.run_id)::integer;
  end loop;
  for target in
    select pr.run_id from roi.pending_runs pr join roi.runs r on r.id = pr.run_id
    where not pr.closed
      and (select count(*) from roi.verdicts v where v.run_id = pr.run_id) >= r.probe_count
  loop
    finished := finished + roi.close_run_if_done(target.run_id)::integer;
  end loop;

  with taken as (delete from roi.dirty_layers d returning d.layer, d.layer_id, d.can_retire)
  select coalesce(jsonb_agg(jsonb_build_object('layer', t.layer, 'layer_id', t.layer_id,
                                               'can_retire', t.can_retire)), '[]'::jsonb)
  into marks from taken t;

  begin
  for target in
    select pr.owner_id from roi.pending_runs pr where pr.closed
    union
    select o.owner_id from roi.owners_of_layers(marks) o(owner_id)
  loop
    -- The owner's own lock, held only while we work on them: a benchmark call in flight is never
    -- raced (we skip the owner this cycle), and a call arriving now waits a moment, not a cycle.
    if not pg_try_advisory_lock(roi.owner_lock_key(target.owner_id)) then
      busy := busy + 1;
      insert into roi.dirty_layers values ('personal', target.owner_id, true) on conflict do nothing;
      continue;
    end if;
    begin
      outcome := roi.upkeep_owner(target.owner_id);
      owners := owners + 1;
      retired := retired + (outcome ->> 'retired')::integer;
      rotated := rotated + (outcome ->> 'rotated')::integer;
      added := added + (outcome ->> 'added')::integer;
    exception when others then
      failures := failures + 1;
      raise warning 'roi.upkeep: owner % skipped: %', target.owner_id, sqlerrm;
      insert into roi.dirty_layers values ('personal', target.owner_id, true) on conflict do nothing;
    end;
    perform pg_advisory_unlock(roi.owner_lock_key(target.owner_id));
  end loop;
  exception when others or query_canceled then
    -- Session-level locks outlive an aborted transaction: never leave an owner locked out.
    perform pg_advisory_unlock_all();
    raise;
  end;

  -- Scheduled runs: each owner whose run of this period is due and not yet started, under the owner's
  -- lock (a benchmark call in flight: skipped, tried again next cycle; an open run: in_progress).
  begin
  for target in
    select s.owner_id, date_bin(roi.schedule_period(s.frequency), now(), timestamptz '2001-01-01 00:00:00+00')
             as period_start
    from roi.benchmark_schedules s
    where now() >= roi.schedule_due_at(s.owner_id, s.frequency)
      and not exists (select from roi.scheduled_runs x
                      where x.owner_id = s.owner_id
                        and x.period_start = date_bin(roi.schedule_period(s.frequency), now(),
                                                      timestamptz '2001-01-01 00:00:00+00'))
  loop
    if not pg_try_advisory_lock(roi.owner_lock_key(target.owner_id)) then
      busy := busy + 1;
      continue;
    end if;
    begin
      outcome := roi.start_scheduled_run(target.owner_id, target.period_start);
      scheduled := scheduled + (outcome ->> 'status' = 'started')::integer;
    exception when others then
      failures := failures + 1;
      raise warning 'roi.upkeep: scheduled run of owner % not started: %', target.owner_id, sqlerrm;
    end;
    perform pg_advisory_unlock(roi.owner_lock_key(target.owner_id));
  end loop;
  exception when others or query_canceled then
    perform pg_advisory_unlock_all();
    raise;
  end;

  update roi.upkeep_state set last_run_at = now();
  return jsonb_build_object('overdue_closed', overdue, 'finished_closed', finished, 'owners', owners,
                            'retired', retired, 'rotated', rotated, 'added', added,
                            'busy', busy, 'failures', failures, 'scheduled', scheduled);
end
$$;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger memories_mark_inserted_layers after insert on public.memories
  referencing new table as new_rows for each statement execute function roi.mark_memory_layers();
create trigger memories_mark_updated_layers after update on public.memories
  referencing old table as old_rows new table as new_rows
  for each statement execute function roi.mark_memory_layers();
create trigger memories_mark_deleted_layers after delete on public.memories
  referencing old table as old_rows for each statement execute function roi.mark_memory_layers();

create trigger project_members_mark_joined after insert on public.project_members
  referencing new table as new_rows for each statement execute function roi.mark_member_layers();
create trigger project_members_mark_changed after update on public.project_members
  referencing old table as old_rows new table as new_rows
  for each statement execute function roi.mark_member_layers();
create trigger project_members_mark_left after delete on public.project_members
  referencing old table as old_rows for each statement execute function roi.mark_member_layers();

create trigger team_members_mark_joined after insert on public.team_members
  referencing new table as new_rows for each statement execute function roi.mark_member_layers();
create trigger team_members_mark_changed after update on public.team_members
  referencing old table as old_rows new table as new_rows
  for each statement execute function roi.mark_member_layers();
create trigger team_members_mark_left after delete on public.team_members
  referencing old table as old_rows for each statement execute function roi.mark_member_layers();

-- ============================================================================================
-- Who reads and writes each table
-- ============================================================================================
alter table roi.upkeep_state enable row level security;
alter table roi.dirty_layers enable row level security;
-- A signed-in writer's statement marks the layers it touched; no user reads or removes a mark.
create policy "Signed-in writers mark the layers they changed" on roi.dirty_layers
  for insert to authenticated with check ((select auth.uid()) is not null);
create policy "The embedder marks the layers of the memories it embeds" on roi.dirty_layers
  for insert to roi_embedder with check (true);

-- ============================================================================================
-- Schedule
-- ============================================================================================
-- pg_cron where it can exist (Supabase; the embedded database). Elsewhere the migration still
-- applies and says how to run upkeep by hand.
do $schedule$
begin
  if not exists (select from pg_available_extensions where name = 'pg_cron') then
    raise notice 'pg_cron is not installed: run `select roi.upkeep()` every minute yourself';
    return;
  end if;
  begin
    create extension if not exists pg_cron with schema pg_catalog;
    perform cron.schedule('zm-roi-upkeep', '* * * * *', 'select roi.upkeep()');
  exception when others then
    raise notice 'pg_cron unavailable here (%): run `select roi.upkeep()` every minute yourself', sqlerrm;
  end;
end
$schedule$;

-- The job that builds a large layer's own HNSW indexes (roi.schedule_layer_indexes,
-- 22_recall_layer_indexes.sql), beside upkeep's, once pg_cron can exist; elsewhere the file still applies.
do $schedule$
begin
  if not exists (select from pg_catalog.pg_extension where extname = 'pg_cron') then
    raise notice 'pg_cron is not installed: large layers keep exact semantic recall';
    return;
  end if;
  perform cron.schedule('zm-roi-layer-indexes', '* * * * *', 'select roi.schedule_layer_indexes()');
end
$schedule$;

-- ============================================================================================
-- Grants
-- ============================================================================================
-- Upkeep is for the database owner and pg_cron only; impersonation is never a client's verb.
revoke execute on function roi.impersonate(uuid), roi.upkeep_owner(uuid), roi.owners_of_layers(jsonb),
  roi.upkeep(), roi.start_scheduled_run(uuid, timestamptz) from public;

-- The schedule: the owner's own wish, written through public.benchmark_schedule() as the owner.
revoke execute on function roi.schedule_period(text), roi.schedule_due_at(uuid, text),
  public.benchmark_schedule(text) from public, anon;
grant execute on function roi.schedule_period(text), roi.schedule_due_at(uuid, text),
  public.benchmark_schedule(text) to authenticated;

-- A writer's statement fires the marking triggers as the writer: they may insert marks and run the
-- trigger functions, nothing else.
revoke all on roi.dirty_layers from public, anon, authenticated;
grant insert on roi.dirty_layers to authenticated;
revoke execute on function roi.mark_memory_layers(), roi.mark_member_layers() from public;
grant execute on function roi.mark_memory_layers(), roi.mark_member_layers() to authenticated;

-- Its updates of memories mark their layers dirty like any other write (a statement trigger); an
-- embedding changes no visibility, but the trigger cannot tell, so the embedder may add marks too.
grant insert on roi.dirty_layers to roi_embedder;
grant execute on function roi.mark_memory_layers() to roi_embedder;
