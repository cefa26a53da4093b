-- 20261130000500_recall_at_scale: recall() and roi.top_up_pool() read the caller's layers through
-- their indexes instead of the whole corpus. Same answers as before: unpinned recall is exactly
-- what RLS lets the caller see, a caller without identity still reads everything their role may,
-- and top-up still takes the newest never-probed knowledge overall, merged across layers.
begin;
select plan(9);

select tests.create_user('wide@scale.test');
select tests.create_user('other@scale.test');
insert into public.teams (id, name) values
  ('00000000-0000-0000-0000-0000000a1e01', 'scale-team'),
  ('00000000-0000-0000-0000-0000000a1e02', 'scale-team-other');
insert into public.projects (id, name, team_id) values
  ('00000000-0000-0000-0000-0000000a1b01', 'scale-one', null),
  ('00000000-0000-0000-0000-0000000a1b02', 'scale-two', '00000000-0000-0000-0000-0000000a1e01'),
  ('00000000-0000-0000-0000-0000000a1b03', 'scale-hidden', null);
insert into public.team_members values
  ('00000000-0000-0000-0000-0000000a1e01', tests.user_id('wide@scale.test')),
  ('00000000-0000-0000-0000-0000000a1e02', tests.user_id('other@scale.test'));
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000a1b01', tests.user_id('wide@scale.test')),
  ('00000000-0000-0000-0000-0000000a1b02', tests.user_id('wide@scale.test')),
  ('00000000-0000-0000-0000-0000000a1b03', tests.user_id('other@scale.test'));

-- Every layer gets memories about "lattice", created an hour apart, so "newest" interleaves layers.
insert into public.memories (author_id, scope, project_id, team_id, kind, title, body, created_at, invalidated_at)
select case when layer in ('hidden', 'other-team', 'other-personal') then tests.user_id('other@scale.test')
            else tests.user_id('wide@scale.test') end,
       case when layer in ('personal', 'other-personal') then 'personal'
            when layer in ('team', 'other-team') then 'team' else 'project' end,
       case layer when 'one' then '00000000-0000-0000-0000-0000000a1b01'::uuid
                  when 'two' then '00000000-0000-0000-0000-0000000a1b02'::uuid
                  when 'hidden' then '00000000-0000-0000-0000-0000000a1b03'::uuid end,
       case layer when 'team' then '00000000-0000-0000-0000-0000000a1e01'::uuid
                  when 'other-team' then '00000000-0000-0000-0000-0000000a1e02'::uuid end,
       case when i % 4 = 0 then 'episode' else 'decision' end,
       format('lattice %s %s', layer, i), format('lattice note %s in %s', i, layer),
       timestamptz '2026-01-01' + (i * 7 + ord) * interval '1 hour',
       case when i = 5 then timestamptz '2026-06-01' end
from unnest(array['personal', 'one', 'two', 'team', 'hidden', 'other-team', 'other-personal'])
       with ordinality as l (layer, ord),
     generate_series(1, 6) i;

select tests.authenticate_as('wide@scale.test');
select set_eq(
  $$select memory_id from public.recall('lattice', match_count => 100)$$,
  $$select id from public.memories m where m.invalidated_at is null and m.search @@ public.recall_query('lattice')$$,
  'unpinned recall returns exactly the live matches RLS lets the caller see: personal, member projects, member teams');
select set_eq(
  $$select memory_id from public.recall('lattice', project_id => '00000000-0000-0000-0000-0000000a1b02', match_count => 100)$$,
  $$select id from public.memories m where m.invalidated_at is null and m.search @@ public.recall_query('lattice')
      and (m.project_id = '00000000-0000-0000-0000-0000000a1b02' or m.scope = 'personal')$$,
  'a project pin is that project plus the caller''s personal layer, nothing else');
select is_empty(
  $$select 1 from public.recall('lattice', project_id => '00000000-0000-0000-0000-0000000a1b03', match_count => 100)
    where scope <> 'personal'$$,
  'pinning a project the caller is not in adds nothing from it');
select is(
  (select array_agg(title) from public.recall('lattice', match_count => 3)),
  (select array_agg(title) from (
     select m.title from public.memories m where m.invalidated_at is null and m.search @@ public.recall_query('lattice')
     order by ts_rank(m.search, public.recall_query('lattice'), 1) desc, m.created_at desc, m.id limit 3) best),
  'ranking and limit: best ts_rank first (recall_index_only), then newest');
select tests.clear_authentication();

-- A caller with no identity (here the superuser, as maintenance would be) has no layers of its own:
-- unpinned recall keeps reading everything the role may see, as it did before the migration.
select is(
  (select count(*)::int from public.recall('lattice', match_count => 100)),
  (select count(*)::int from public.memories m where m.invalidated_at is null and m.search @@ public.recall_query('lattice')),
  'without an identity, unpinned recall reads every live match the role can see');

-- Top-up takes the newest never-probed knowledge over all layers, not the newest of one layer.
update roi.settings set extractor = 'deterministic', pool_target = 4;
select tests.authenticate_as('wide@scale.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'the first run of the wide user starts');
select tests.clear_authentication();
select set_eq(
  $$select source_title from roi.probes where owner_id = tests.user_id('wide@scale.test') and exists (select from roi.recalls r where r.probe_id = probes.id)$$,
  $$select m.title from public.memories m
    where m.title like 'lattice %' and m.invalidated_at is null and m.kind <> 'episode'
      and m.title !~ '^lattice (hidden|other-team|other-personal) '
    order by m.created_at desc limit 4$$,
  'the first pool is the four newest knowledge memories across personal, both projects and the team');
select ok(
  (select count(distinct source_scope || coalesce(pin_project_id::text, '') || coalesce(pin_team_id::text, ''))
   from roi.probes where owner_id = tests.user_id('wide@scale.test') and exists (select from roi.recalls r where r.probe_id = probes.id)) > 1,
  'and they come from more than one layer (the merge, not one layer''s newest)');
select is_empty(
  $$select 1 from roi.probes where owner_id = tests.user_id('wide@scale.test')
    and source_title ~ '^lattice (hidden|other-team|other-personal) '$$,
  'nothing the owner cannot see enters their pool');

select * from finish();
rollback;
