-- The caller's projects and teams, read by every policy and recall leg, as PL/pgSQL: a SQL function
-- with `set search_path` is never inlined, so each call parsed, rewrote and planned its query again
-- (~0.2 ms, about six calls a recall); PL/pgSQL keeps the plan for the session
-- (docs/decisions/0024). `create or replace` keeps the grants and the policies that call them.
create or replace function public.caller_project_ids() returns setof uuid
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query select pm.project_id from public.project_members pm where pm.user_id = (select auth.uid());
end
$$;

create or replace function public.caller_team_ids() returns setof uuid
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query select tm.team_id from public.team_members tm where tm.user_id = (select auth.uid());
end
$$;
