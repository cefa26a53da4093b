-- The baseline: supabase/schemas/ as it stood when the migration history was squashed, one file per
-- topic (supabase/baseline.toml; docs/decisions/0022-one-baseline.md). A database that ran the old
-- history already has a roi schema: `zm-roi db up` moves it onto the baseline, docs/deploy.md says how
-- to move a hosted project, and this guard stops the baseline from running over it.
do $guard$
begin
  if to_regnamespace('roi') is not null then
    raise exception 'this database already has a roi schema: the baseline only builds new databases'
      using hint = 'a database the old migrations built moves onto the baseline with `zm-roi db up` (local) '
                   'or the `supabase migration repair` commands in docs/deploy.md (hosted)';
  end if;
end
$guard$;

-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- What every other file stands on, so that each can say who may touch its tables beside them: the
-- extensions (pgvector for recall's semantic leg, pgcrypto for owners' own provider keys), the private
-- schema `roi`, and the two least-privilege roles besides the API's (roi_worker, roi_embedder), with
-- the schemas each may enter. First, because policies and grants name these roles and schemas.
--
-- The roles are created NOLOGIN. Locally `zm-roi db up` gives them passwords; on Supabase give them
-- one yourself (`alter role roi_worker with login password '…'`, and the same for roi_embedder) and
-- point ZM_WORKER_DB_URL (the worker) and the embedder's URL at them. roi_worker runs the queue of
-- work (70_roi_queue.sql, 71_roi_worker_verbs.sql); roi_embedder backfills memory embeddings
-- (85_embeddings.sql). What each may read is said by the policies beside each table.

-- ============================================================================================
-- Extensions and schemas
-- ============================================================================================
-- Nothing new in `public` is executable by the API roles unless a grant below says so.
alter default privileges in schema public revoke execute on functions from public, anon, authenticated;

-- pgvector for the semantic leg of recall, in schema `extensions` as Supabase installs it (the schema
-- comes from the platform, or locally from supabase/compat/supabase_compat.sql).
create schema if not exists extensions;
create extension if not exists vector with schema extensions;
-- pgcrypto for the owners' own provider keys (90_keys_and_totals.sql).
create extension if not exists pgcrypto with schema extensions;

-- The benchmark's private schema, which the Data API does not expose (the privacy model:
-- 30_roi_probes_runs_and_work.sql).
create schema if not exists roi;
revoke all on schema roi from public;
grant usage on schema roi to authenticated;
alter default privileges in schema roi revoke execute on functions from public;

-- ============================================================================================
-- Roles
-- ============================================================================================
-- The worker: it runs the queue of work (LLM mode, and question embeddings in both modes).
do $role$
begin
  if not exists (select from pg_roles where rolname = 'roi_worker') then
    create role roi_worker nologin noinherit;
  end if;
end
$role$;

-- The embedder: it backfills the embeddings of memories written by paths that did not embed them.
do $$
begin
  if not exists (select from pg_roles where rolname = 'roi_embedder') then
    create role roi_embedder nologin noinherit;
  end if;
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
-- Each role enters the schemas whose objects its grants name; service_role reads the token totals.
grant usage on schema public, roi to roi_worker;
grant usage on schema extensions to roi_worker;
grant usage on schema extensions, public, roi to roi_embedder;
grant usage on schema roi to service_role;
