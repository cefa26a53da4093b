-- Each probe is pinned to where its ground truth lives, in every layer: the caller
-- belongs to two projects and a team, and one look-alike memory sits in each of them and in the
-- personal layer, so one question matches all four. The probe from the SECOND project and the probe
-- from the team must each surface their own layer plus the personal layer, nothing else (40-pool-life
-- checks the first project's probe; a pin that always took the caller's first project passed it).
begin;
select plan(12);

select tests.create_user('layers@pin.test');
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000b0b03', 'pin-team');
insert into public.team_members values ('00000000-0000-0000-0000-0000000b0b03', tests.user_id('layers@pin.test'));
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000b0b01', 'pin-first'),
  ('00000000-0000-0000-0000-0000000b0b02', 'pin-second');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000b0b01', tests.user_id('layers@pin.test')),
  ('00000000-0000-0000-0000-0000000b0b02', tests.user_id('layers@pin.test'));
insert into public.memories (author_id, scope, project_id, team_id, kind, title, body)
select tests.user_id('layers@pin.test'), s.scope, s.project_id, s.team_id, 'decision',
       'Calibrate the flux valve with the green dial', 'Always calibrate the flux valve with the green dial.'
from (values ('project', '00000000-0000-0000-0000-0000000b0b01'::uuid, null::uuid),
             ('project', '00000000-0000-0000-0000-0000000b0b02'::uuid, null::uuid),
             ('team', null::uuid, '00000000-0000-0000-0000-0000000b0b03'::uuid),
             ('personal', null::uuid, null::uuid)) s (scope, project_id, team_id);
update roi.settings set extractor = 'deterministic', pool_target = 20;

select tests.authenticate_as('layers@pin.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'a run over the four look-alikes');
select tests.clear_authentication();

-- Each probe with its source's layer ('first', 'second', 'team', 'personal') and the layers of what its
-- recall surfaced, read as the superuser.
create temporary table layer_case on commit drop as
select src.layer as source_layer, p.question, rc.surfaced_ids, p.memory_id,
       array(select l.layer from unnest(rc.surfaced_ids) s (id)
             join public.memories m on m.id = s.id
             cross join lateral (select case
               when m.scope = 'personal' then 'personal'
               when m.project_id = '00000000-0000-0000-0000-0000000b0b01' then 'first'
               when m.project_id = '00000000-0000-0000-0000-0000000b0b02' then 'second'
               when m.team_id = '00000000-0000-0000-0000-0000000b0b03' then 'team' end as layer) l
             order by 1) as surfaced_layers
from roi.probes p join public.memories m on m.id = p.memory_id
join roi.recalls rc on rc.probe_id = p.id
cross join lateral (select case
  when m.scope = 'personal' then 'personal'
  when m.project_id = '00000000-0000-0000-0000-0000000b0b01' then 'first'
  when m.project_id = '00000000-0000-0000-0000-0000000b0b02' then 'second'
  else 'team' end as layer) src
where p.owner_id = tests.user_id('layers@pin.test');
grant select on layer_case to authenticated;

select is(array(select source_layer from layer_case order by 1), array['first', 'personal', 'second', 'team'],
  'one probe from each layer went into the run');

select is((select surfaced_layers from layer_case where source_layer = 'second'), array['personal', 'second'],
  'the probe from the second project surfaced that project and the personal layer, nothing else');
select ok((select memory_id = any (surfaced_ids) from layer_case where source_layer = 'second'),
  'and it surfaced its own source');
select is((select surfaced_layers from layer_case where source_layer = 'team'), array['personal', 'team'],
  'the probe from the team surfaced the team and the personal layer, nothing else');
select ok((select memory_id = any (surfaced_ids) from layer_case where source_layer = 'team'),
  'and it surfaced its own source');
select is((select surfaced_layers from layer_case where source_layer = 'first'), array['first', 'personal'],
  'the probe from the first project surfaced that project and the personal layer, nothing else');
select ok((select memory_id = any (surfaced_ids) from layer_case where source_layer = 'first'),
  'and it surfaced its own source');
select is((select surfaced_layers from layer_case where source_layer = 'personal'), array['personal'],
  'the personal probe surfaced the personal layer alone');

-- The probes carry the pin of their own layer (what the recall above was given).
select is((select array_agg(coalesce(p.pin_project_id, p.pin_team_id) order by p.source_scope, p.pin_project_id)
           from roi.probes p where p.owner_id = tests.user_id('layers@pin.test') and p.source_scope <> 'personal'),
  array['00000000-0000-0000-0000-0000000b0b01', '00000000-0000-0000-0000-0000000b0b02',
        '00000000-0000-0000-0000-0000000b0b03']::uuid[],
  'the project probes are pinned to their own projects, the team probe to its team');

-- The check can fail: unpinned, or pinned to another layer, the same question reaches the others.
select tests.authenticate_as('layers@pin.test');
select is((select count(distinct r.scope || coalesce(m.project_id::text, m.team_id::text, ''))::int
           from layer_case c, public.recall(c.question) r join public.memories m on m.id = r.memory_id
           where c.source_layer = 'team'), 4,
  '(sensitivity) unpinned, the team''s question surfaces all four layers');
select ok(not exists (select from layer_case c,
                        public.recall(c.question, '00000000-0000-0000-0000-0000000b0b01'::uuid) r
                      join public.memories m on m.id = r.memory_id
                      where c.source_layer = 'second' and m.project_id = '00000000-0000-0000-0000-0000000b0b02'),
  '(sensitivity) pinned to the first project, the second project''s question misses its source');
select tests.clear_authentication();

select * from finish();
rollback;
