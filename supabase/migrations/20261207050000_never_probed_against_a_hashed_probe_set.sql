-- The never-probed walk checks each memory it passes against the owner's probes as one hashed set,
-- read once (docs/decisions/0044). As `not exists`, the planner chose the anti-join from the probes an
-- owner is estimated to have, and for the few it predicts, a nested loop that rescans all of the owner's
-- probes for every memory the walk passes: at 1M with 110 probes an owner, 1,973 comparisons for the 32
-- memories one layer's walk passed. Both numbers grow with the owner's history.

create or replace function roi.never_probed_knowledge(wanted integer) returns setof public.memories
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query
    select m.* from (
      (select v.* from public.memories v
       where v.scope = 'personal' and v.invalidated_at is null and v.author_id = (select auth.uid())
         and v.kind in ('decision', 'gotcha', 'convention')
         and v.id not in (select p.memory_id from roi.probes p where p.owner_id = (select auth.uid()))
       order by v.created_at desc, v.id
       limit wanted)
      union all
      select v.* from unnest(array(select public.caller_project_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'project' and v.invalidated_at is null and v.project_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and v.id not in (select p.memory_id from roi.probes p where p.owner_id = (select auth.uid()))
        order by v.created_at desc, v.id
        limit wanted
      ) v
      union all
      select v.* from unnest(array(select public.caller_team_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'team' and v.invalidated_at is null and v.team_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and v.id not in (select p.memory_id from roi.probes p where p.owner_id = (select auth.uid()))
        order by v.created_at desc, v.id
        limit wanted
      ) v
    ) m
    order by m.created_at desc, m.id
    limit wanted;
end
$$;
