-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- sql/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (README, "Changing the schema"); tests/test_schema_files.py builds a
-- database from each and prints any difference.
--
-- Upkeep: the minute-by-minute care of every owner's pool and runs, scheduled with pg_cron.
--
-- It runs as a privileged role (the cron job's owner) but never reads memories as such: for any
-- step that touches memories it impersonates the owner exactly as PostgREST would (role
-- `authenticated` plus `request.jwt.claims`), so retirement and top-up see what the owner sees.
-- An idle cycle reads a sequence and two small bookkeeping tables, nothing else.

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

-- Retire, rotate and top up one owner's pool, as that owner. Returns what it did.
create function roi.upkeep_owner(owner uuid) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  retired integer;
  rotated integer := 0;
  added integer;
  done_run uuid;
begin
  perform roi.impersonate(owner);
  perform roi.open_gate();
  retired := roi.retire_unreachable_probes();
  for done_run in
    select pr.run_id from roi.pending_runs pr where pr.owner_id = owner and pr.closed
  loop
    rotated := rotated + roi.rotate_pool(done_run);
  end loop;
  added := roi.top_up_pool();
  perform roi.close_gate();
  perform set_config('role', 'none', true);
  perform set_config('request.jwt.claims', '', true);
  return jsonb_build_object('retired', retired, 'rotated', rotated, 'added', added);
end
$$;

-- One upkeep cycle, idempotent: close runs past the timeout (and any whose last verdict landed
-- without closing it), then care for the owners whose pools could have changed: everyone with a
-- pool when memories or memberships moved since the last cycle, and owners with a closed run to
-- rotate. A failure for one owner is reported and does not stop the others.
create function roi.upkeep() returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  epoch bigint;
  epoch_moved boolean;
  overdue integer := 0;
  finished integer := 0;
  owners integer := 0;
  failures integer := 0;
  busy integer := 0;
  retired integer := 0;
  rotated integer := 0;
  added integer := 0;
  target record;
  outcome jsonb;
begin
  select case when s.is_called then s.last_value else 0 end into epoch from roi.memory_epoch s;
  select epoch <> u.checked_epoch into epoch_moved from roi.upkeep_state u;

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

  begin
  for target in
    select pr.owner_id from roi.pending_runs pr where pr.closed
    union
    select p.owner_id from roi.probes p where epoch_moved
  loop
    -- The owner's own lock, held only while we work on them: a benchmark call in flight is never
    -- raced (we skip the owner this cycle), and a call arriving now waits a moment, not a cycle.
    if not pg_try_advisory_lock(roi.owner_lock_key(target.owner_id)) then
      busy := busy + 1;
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
    end;
    perform pg_advisory_unlock(roi.owner_lock_key(target.owner_id));
  end loop;
  exception when others or query_canceled then
    -- Session-level locks outlive an aborted transaction: never leave an owner locked out.
    perform pg_advisory_unlock_all();
    raise;
  end;

  -- Owners skipped as busy or failed are visited again next cycle: the epoch stays unchecked.
  update roi.upkeep_state
  set checked_epoch = case when busy + failures = 0 then epoch else checked_epoch end, last_run_at = now();
  return jsonb_build_object('overdue_closed', overdue, 'finished_closed', finished, 'owners', owners,
                            'retired', retired, 'rotated', rotated, 'added', added,
                            'busy', busy, 'failures', failures);
end
$$;

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
revoke execute on function roi.impersonate(uuid), roi.upkeep_owner(uuid), roi.upkeep() from public;
