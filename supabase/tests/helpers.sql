-- Helpers for the pgTAP suites in supabase/tests/database, installed into throwaway test clusters
-- only (never pushed). They act as a user exactly as PostgREST does: a transaction-local `role`
-- and `request.jwt.claims`. Modelled on basejump's supabase_test_helpers.
create extension if not exists pgtap with schema extensions;
create schema if not exists tests;
grant usage on schema tests to anon, authenticated;

-- A user in auth.users, found again by email; used by every suite to set up its cast.
create or replace function tests.create_user(email text) returns uuid
  language sql security invoker set search_path = ''
as $$
  insert into auth.users (email) values (create_user.email)
  on conflict (email) do update set email = excluded.email
  returning id
$$;

create or replace function tests.user_id(email text) returns uuid
  language sql stable security invoker set search_path = ''
as $$ select id from auth.users where users.email = user_id.email $$;

-- Become `email` for the rest of the transaction, as a signed-in Data API request would.
create or replace function tests.authenticate_as(email text) returns void
  language plpgsql security invoker set search_path = ''
as $$
declare
  who uuid := tests.user_id(email);
begin
  if who is null then
    raise exception 'tests.authenticate_as: no user %', email;
  end if;
  perform set_config('request.jwt.claims',
    jsonb_build_object('sub', who, 'role', 'authenticated', 'email', email)::text, true);
  perform set_config('role', 'authenticated', true);
end
$$;

-- Become an anonymous Data API request.
create or replace function tests.authenticate_as_anon() returns void
  language plpgsql security invoker set search_path = ''
as $$
begin
  perform set_config('request.jwt.claims', '{"role":"anon"}', true);
  perform set_config('role', 'anon', true);
end
$$;

-- Back to the test's own (superuser) identity.
create or replace function tests.clear_authentication() returns void
  language plpgsql security invoker set search_path = ''
as $$
begin
  perform set_config('role', 'none', true);
  perform set_config('request.jwt.claims', '', true);
end
$$;

grant execute on all functions in schema tests to anon, authenticated;
