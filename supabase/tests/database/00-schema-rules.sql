-- The house rules, checked over every schema the project owns: no SECURITY DEFINER function,
-- every function with a fixed search_path, every view security_invoker, RLS on every table.
-- Each check first proves it can fail (a deliberate offender inside this transaction), then passes.
-- One exception, Supabase's own: the claim helpers auth.jwt(), auth.uid() and auth.role() set no
-- search_path on the platform, so the planner inlines them, and the compat layer defines them alike.
-- Last, the caller's memberships are planned once per session (docs/decisions/0024): their form is the
-- claim, so it is checked by structure; and so is every function a policy calls (docs/decisions/0042).
begin;
select plan(18);

create temporary view project_functions as
  select p.oid, n.nspname, p.proname, p.prosecdef,
         case when n.nspname = 'auth' and p.proname in ('jwt', 'uid', 'role') then array['search_path=""']
              else p.proconfig end as proconfig
  from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname in ('public', 'roi', 'auth')
    and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e');

create function pg_temp.explain_verbose(statement text) returns text language plpgsql as $$
declare
  line text;
  plan text := '';
begin
  for line in execute 'explain (verbose, costs off) ' || statement loop
    plan := plan || line || E'\n';
  end loop;
  return plan;
end
$$;

create temporary view project_views as
  select c.oid, n.nspname, c.relname, c.reloptions
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where c.relkind = 'v' and n.nspname in ('public', 'roi');

create temporary view tables_without_rls as
  select n.nspname, c.relname
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where c.relkind in ('r', 'p') and n.nspname in ('public', 'roi') and not c.relrowsecurity;

-- 1 issue: a definer function is caught.
create function public.offender() returns int language sql security definer set search_path = '' as 'select 1';
select is((select count(*)::int from project_functions where prosecdef), 1, 'the definer check catches an offender');
drop function public.offender();
select is((select count(*)::int from project_functions where prosecdef), 0,
  'no SECURITY DEFINER function in public, roi or auth');

create function public.offender() returns int language sql security invoker as 'select 1';
select is((select count(*)::int from project_functions
  where not coalesce(proconfig::text[] @> array['search_path=""'], false)), 1,
  'the search_path check catches a function without one');
drop function public.offender();
select is_empty($$select nspname || '.' || proname from project_functions
  where not coalesce(proconfig::text[] @> array['search_path=""'], false)$$,
  'every function in public, roi and auth sets search_path to ''''');

create view public.offending_view as select 1 as one;
select is((select count(*)::int from project_views
  where not coalesce(reloptions @> array['security_invoker=true'], false)), 1,
  'the view check catches a definer-rights view');
drop view public.offending_view;
select is_empty($$select nspname || '.' || relname from project_views
  where not coalesce(reloptions @> array['security_invoker=true'], false)$$,
  'every view in public and roi is security_invoker');

create table public.offending_table (id int);
select is((select count(*)::int from tables_without_rls), 1, 'the RLS check catches a table without it');
drop table public.offending_table;
select is_empty($$select * from tables_without_rls$$, 'every table in public and roi has RLS enabled');

-- Functions are executable by PUBLIC unless revoked (a per-schema default cannot take that away).
create function roi.offender() returns int language sql security invoker set search_path = '' as 'select 1';
select is((select count(*)::int from project_functions f
  where f.nspname = 'roi' and has_function_privilege('public', f.oid, 'execute')), 1,
  'the PUBLIC-execute check catches a function nobody revoked');
drop function roi.offender();
select is_empty($$select nspname || '.' || proname from project_functions f
  where f.nspname in ('public', 'roi') and has_function_privilege('public', f.oid, 'execute')$$,
  'no function in public or roi is executable by PUBLIC');

select is_empty(
  $$select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname = 'public' and has_function_privilege('anon', p.oid, 'execute')
      and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')$$,
  'anon can execute no function in public');
select is_empty(
  $$select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'v', 'm')
      and has_table_privilege('anon', c.oid, 'select')$$,
  'anon can select from no table or view in public');

-- The claim helpers are inlined where policies call them: a plan shows the settings they read, not a
-- call (a `set search_path` on any of them makes this fail: such a function is never inlined).
select ok((select bool_and(plan::text like '%current_setting%' and plan::text not like '%auth.%')
           from (select pg_temp.explain_verbose(q) as plan
                 from unnest(array['select auth.uid()', 'select auth.role()', 'select auth.jwt()']) q) e),
  'auth.uid(), auth.role() and auth.jwt() are inlined into the statements that call them');

-- The caller's memberships, read by every policy and recall leg, planned once per session
-- (docs/decisions/0024): PL/pgSQL, whose `return query` statement stays prepared for the session, not
-- SQL (a SQL function with `set search_path` is never inlined, so each call planned its query again),
-- nor a dynamic `execute` (planned on every call); stable, so a policy's `(select …)` reads it once a
-- statement. The old form, SQL with `set search_path`, is caught.
create function pg_temp.planned_once(f regprocedure) returns boolean language sql as $$
  select l.lanname = 'plpgsql' and p.provolatile = 's' and p.proretset
         and p.prosrc ~* '\mreturn\s+query\s+select\M' and p.prosrc !~* '\mexecute\M'
  from pg_proc p join pg_language l on l.oid = p.prolang
  where p.oid = f
$$;
create function public.offending_memberships() returns setof uuid
  language sql stable security invoker set search_path = ''
as $$
  select pm.project_id from public.project_members pm where pm.user_id = (select auth.uid())
$$;
select is(pg_temp.planned_once('public.offending_memberships()'), false,
  '(sensitivity) the memberships'' old form, SQL with set search_path, is caught');
drop function public.offending_memberships();
select is(pg_temp.planned_once('public.caller_project_ids()'), true,
  'public.caller_project_ids() is PL/pgSQL, stable, its one statement prepared for the session');
select is(pg_temp.planned_once('public.caller_team_ids()'), true,
  'public.caller_team_ids() is PL/pgSQL, stable, its one statement prepared for the session');

-- What a policy calls runs in every statement that reads its table (the question gate ~30 times a
-- benchmark call): never a SQL function with `set search_path`, which is not inlined, so each statement
-- parsed and planned its body again (docs/decisions/0042). The claim helpers above are inlined.
create temporary view policy_calls_planned_per_statement as
  select distinct p.oid::regprocedure::text as called
  from pg_policy pol
  join pg_depend d on d.classid = 'pg_policy'::regclass and d.objid = pol.oid
                  and d.refclassid = 'pg_proc'::regclass
  join pg_proc p on p.oid = d.refobjid
  join pg_language l on l.oid = p.prolang
  where l.lanname = 'sql' and p.proconfig is not null;
create function public.offending_gate() returns boolean
  language sql stable security invoker set search_path = '' as 'select true';
create table public.offending_table (id int);
create policy "offends" on public.offending_table using ((select public.offending_gate()));
select is((select count(*)::int from policy_calls_planned_per_statement), 1,
  '(sensitivity) a policy calling a SQL function with set search_path is caught');
drop table public.offending_table;
drop function public.offending_gate();
select is_empty($$select called from policy_calls_planned_per_statement$$,
  'no policy calls a SQL function with set search_path (each statement would plan it again)');

select * from finish();
rollback;
