-- What a plain PostgreSQL 15 needs to look like a Supabase project to our migrations and tests.
--
-- Applied by `zm-roi db up` (and the test clusters) before the migrations. Every object is created
-- only where it is absent, so on a real Supabase database this file would change nothing; it is
-- never pushed there. Attributes and memberships follow Supabase's own init scripts
-- (supabase/postgres: migrations/db/init-scripts/00000000000000-initial-schema.sql).

-- ============================================================================================
-- Roles
-- ============================================================================================
do $roles$
begin
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticator') then
    create role authenticator login noinherit;
  end if;
end
$roles$;

-- Locally `authenticator` is the MCP transport's login and may become `anon` or `authenticated` only
-- (Supabase also lets PostgREST become service_role for service keys; nothing local uses that).
grant anon, authenticated to authenticator;

-- ============================================================================================
-- Schemas
-- ============================================================================================
create schema if not exists extensions;
create schema if not exists auth;

grant usage on schema public, extensions to anon, authenticated, service_role;
grant usage on schema auth to anon, authenticated, service_role;

-- Supabase grants the API roles everything that `postgres` creates in `public` by default; our
-- migrations must therefore revoke what they do not mean to expose, exactly as on the platform. The
-- platform does it once, when the project is made: so does this file, or every `zm-roi db up` after the
-- first would grant again what the migrations revoked.
do $default_privileges$
begin
  if not exists (select from pg_default_acl d join pg_namespace n on n.oid = d.defaclnamespace
                 where n.nspname = 'public') then
    alter default privileges in schema public grant all on tables to anon, authenticated, service_role;
    alter default privileges in schema public grant all on functions to anon, authenticated, service_role;
    alter default privileges in schema public grant all on sequences to anon, authenticated, service_role;
  end if;
end
$default_privileges$;

-- ============================================================================================
-- auth.users and the claim helpers
-- ============================================================================================
create table if not exists auth.users (
  id uuid primary key default gen_random_uuid(),
  email text unique,
  role text not null default 'authenticated',
  created_at timestamptz not null default now()
);

-- The claim helpers as Supabase defines them: plain SQL without a `set search_path`, so the planner
-- inlines them into each policy's `(select auth.uid())` instead of calling, parsing and planning a
-- function about twenty times a recall (docs/decisions/0024). They call only pg_catalog functions,
-- whatever the search_path; an unset or reset claim reads as null, never as a cast error. A database
-- whose helpers an earlier compat layer defined (with `set search_path`) gets these; Supabase's own
-- (none of which sets one) are never touched.
do $helpers$
begin
  if coalesce((select p.proconfig is not null from pg_catalog.pg_proc p where p.oid = to_regprocedure('auth.jwt()')), true) then
    -- auth.jwt(): the verified claims PostgREST placed in `request.jwt.claims` for this request.
    create or replace function auth.jwt() returns jsonb
      language sql stable
      as $fn$ select coalesce(nullif(current_setting('request.jwt.claim', true), ''),
                              nullif(current_setting('request.jwt.claims', true), ''))::jsonb $fn$;
  end if;
  if coalesce((select p.proconfig is not null from pg_catalog.pg_proc p where p.oid = to_regprocedure('auth.uid()')), true) then
    -- auth.uid(): the caller's user id (the `sub` claim), null for anonymous requests.
    create or replace function auth.uid() returns uuid
      language sql stable
      as $fn$ select nullif(coalesce(nullif(current_setting('request.jwt.claim.sub', true), ''),
                                     (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')), '')::uuid $fn$;
  end if;
  if coalesce((select p.proconfig is not null from pg_catalog.pg_proc p where p.oid = to_regprocedure('auth.role()')), true) then
    -- auth.role(): the `role` claim (anon, authenticated, service_role).
    create or replace function auth.role() returns text
      language sql stable
      as $fn$ select nullif(coalesce(nullif(current_setting('request.jwt.claim.role', true), ''),
                                     (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')), '')::text $fn$;
  end if;
end
$helpers$;

grant execute on function auth.jwt(), auth.uid(), auth.role() to anon, authenticated, service_role;

-- The local transport (PostgREST's stand-in) logs in as `authenticator` only, so "does the token's
-- user still exist" must be answerable as that user: each signed-in user may see their own row's id
-- and nothing else. Local databases only: Supabase (recognised by its auth admin role) is left alone.
-- `zm-roi db up` runs this file on every call, also on a running database: enabling RLS and creating
-- a policy lock auth.users exclusively, so they run only when missing; otherwise `db up` would queue
-- behind any open import (which inserts users) and every token, recall and MCP call behind it.
do $own_row$
begin
  if exists (select from pg_roles where rolname = 'supabase_auth_admin') then
    return;
  end if;
  if not (select c.relrowsecurity from pg_class c where c.oid = 'auth.users'::regclass) then
    alter table auth.users enable row level security;
  end if;
  if not exists (select from pg_policy p where p.polrelid = 'auth.users'::regclass
                 and p.polname = 'Users see their own row') then
    create policy "Users see their own row" on auth.users
      for select to authenticated using (id = (select auth.uid()));
  end if;
  -- Supabase Auth keeps emails in a varchar(255); locally a check holds RFC 5321's 254, before the
  -- unique index would refuse a long one with "index row size exceeds btree maximum 2704". Added only
  -- when missing, for the same reason as the policy above.
  if not exists (select from pg_constraint c where c.conrelid = 'auth.users'::regclass
                 and c.conname = 'users_email_at_most_254_characters') then
    alter table auth.users add constraint users_email_at_most_254_characters
      check (char_length(email) <= 254);
  end if;
  revoke all on auth.users from anon, authenticated;
  grant select (id) on auth.users to authenticated;
  revoke service_role from authenticator;
end
$own_row$;

-- Supabase's databases resolve unqualified names in `public` and then `extensions`.
do $search_path$
begin
  execute format('alter database %I set search_path to "$user", public, extensions', current_database());
end
$search_path$;
