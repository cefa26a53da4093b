-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- sql/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (README, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Upkeep: the minute-by-minute care of every owner's pool and runs, scheduled with pg_cron.
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
-- layers marked dirty since the last cycle, and owners with a closed run to rotate. The marks are
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

  update roi.upkeep_state set last_run_at = now();
  return jsonb_build_object('overdue_closed', overdue, 'finished_closed', finished, 'owners', owners,
                            'retired', retired, 'rotated', rotated, 'added', added,
                            'busy', busy, 'failures', failures);
end
$$;

-- ============================================================================================
-- Triggers (transition tables need one trigger per event)
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
-- Policies
-- ============================================================================================
alter table roi.upkeep_state enable row level security;
alter table roi.dirty_layers enable row level security;

-- A signed-in writer's statement marks the layers it touched; no user reads or removes a mark.
create policy "Signed-in writers mark the layers they changed" on roi.dirty_layers
  for insert to authenticated with check ((select auth.uid()) is not null);

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

-- ============================================================================================
-- Grants
-- ============================================================================================
-- Upkeep is for the database owner and pg_cron only; impersonation is never a client's verb.
revoke execute on function roi.impersonate(uuid), roi.upkeep_owner(uuid), roi.owners_of_layers(jsonb),
  roi.upkeep() from public;

-- A writer's statement fires the marking triggers as the writer: they may insert marks and run the
-- trigger functions, nothing else.
revoke all on roi.dirty_layers from public, anon, authenticated;
grant insert on roi.dirty_layers to authenticated;
revoke execute on function roi.mark_memory_layers(), roi.mark_member_layers() from public;
grant execute on function roi.mark_memory_layers(), roi.mark_member_layers() to authenticated;
