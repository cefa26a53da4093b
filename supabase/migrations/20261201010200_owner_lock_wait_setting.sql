-- How long a concurrent benchmark call waits for the owner's lock before answering `in_progress`
-- becomes a setting (default 30 seconds, as before), so the wait can be tuned per deployment and
-- the `in_progress`-after-waiting branch can be exercised without waiting half a minute.

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table roi.settings
  add column owner_lock_wait interval not null default interval '30 seconds'
    check (owner_lock_wait between interval '0 seconds' and interval '5 minutes');

-- ============================================================================================
-- Functions
-- ============================================================================================

-- Wait up to roi.settings.owner_lock_wait for the owner's lock: a concurrent call finishes well
-- within that, and a caller should hear `in_progress` rather than hang behind something stuck.
create or replace function roi.wait_for_owner_lock(lock_key bigint) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  previous text := current_setting('lock_timeout');
  wait_ms bigint;
begin
  select greatest(1, (extract(epoch from s.owner_lock_wait) * 1000)::bigint) into wait_ms from roi.settings s;
  perform set_config('lock_timeout', coalesce(wait_ms, 30000) || 'ms', true);
  perform pg_advisory_xact_lock(lock_key);
  perform set_config('lock_timeout', previous, true);
  return true;
exception when lock_not_available then
  return false;
end
$$;
