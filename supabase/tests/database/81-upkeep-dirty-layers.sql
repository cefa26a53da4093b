-- Upkeep visits exactly the owners whose layers changed: the memory and membership triggers mark
-- layers (as the writing user, RLS applied), upkeep resolves them to owners with a pool, and
-- retirement and top-up still happen for those owners.
begin;
select plan(28);

select tests.create_user('ann@dirty.test');
select tests.create_user('ben@dirty.test');
select tests.create_user('cat@dirty.test');
select tests.create_user('dan@dirty.test');
select tests.create_user('eve@dirty.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000d1001', 'dirty-p1'),
  ('00000000-0000-0000-0000-0000000d1002', 'dirty-p2');
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000d2001', 'dirty-t1');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000d1001', tests.user_id('ann@dirty.test')),
  ('00000000-0000-0000-0000-0000000d1001', tests.user_id('ben@dirty.test')),
  ('00000000-0000-0000-0000-0000000d1002', tests.user_id('cat@dirty.test'));
insert into public.team_members values ('00000000-0000-0000-0000-0000000d2001', tests.user_id('dan@dirty.test'));
insert into public.memories (author_id, scope, project_id, team_id, kind, title, body) values
  (tests.user_id('ann@dirty.test'), 'project', '00000000-0000-0000-0000-0000000d1001', null, 'decision', 'Dirty P1 a', 'p1 a'),
  (tests.user_id('cat@dirty.test'), 'project', '00000000-0000-0000-0000-0000000d1002', null, 'decision', 'Dirty P2 a', 'p2 a'),
  (tests.user_id('dan@dirty.test'), 'team', null, '00000000-0000-0000-0000-0000000d2001', 'gotcha', 'Dirty T1 a', 't1 a'),
  (tests.user_id('eve@dirty.test'), 'personal', null, null, 'convention', 'Dirty Eve a', 'eve a');
update roi.settings set extractor = 'deterministic', pool_target = 20, rotation_per_run = 3;

-- Ann, Ben, Cat and Dan have pools; Eve never called the benchmark.
select tests.authenticate_as('ann@dirty.test');
select public.benchmark_memory();
select tests.clear_authentication();
select tests.authenticate_as('ben@dirty.test');
select public.benchmark_memory();
select tests.clear_authentication();
select tests.authenticate_as('cat@dirty.test');
select public.benchmark_memory();
select tests.clear_authentication();
select tests.authenticate_as('dan@dirty.test');
select public.benchmark_memory();
select tests.clear_authentication();
select ok((roi.upkeep() ->> 'failures')::int = 0, 'a first cycle takes the marks of the setup');
select is_empty($$select 1 from roi.dirty_layers$$, 'and leaves no mark behind');
select is(roi.upkeep() ->> 'owners', '0', 'an idle cycle visits no owner');

-- The owners a cycle would visit for the marks present now.
create function pg_temp.would_visit() returns setof text language sql as $$
  select u.email from roi.owners_of_layers(
    (select coalesce(jsonb_agg(jsonb_build_object('layer', d.layer, 'layer_id', d.layer_id, 'can_retire', d.can_retire)), '[]')
     from roi.dirty_layers d)
  ) o(id) join auth.users u on u.id = o.id order by 1
$$;
create function pg_temp.pool(email text) returns setof text language sql as $$
  select p.source_title || ':' || p.state from roi.probes p where p.owner_id = tests.user_id(email) order by 1
$$;

-- One project memory, written by Ann as `authenticated` (the trigger runs as her).
select tests.authenticate_as('ann@dirty.test');
select lives_ok($$insert into public.memories (author_id, scope, project_id, kind, title, body) values
  (auth.uid(), 'project', '00000000-0000-0000-0000-0000000d1001', 'decision', 'Dirty P1 b', 'p1 b')$$,
  'a member writes a project memory as authenticated; the trigger marks its layer under RLS');
select throws_ok($$select * from roi.dirty_layers$$, '42501', null, 'a writer cannot read the marks');
select throws_ok($$delete from roi.dirty_layers$$, '42501', null, 'nor remove them');
select tests.clear_authentication();
select results_eq($$select layer, layer_id, can_retire from roi.dirty_layers$$,
  $$values ('project'::text, '00000000-0000-0000-0000-0000000d1001'::uuid, false)$$,
  'the project is marked (an addition: it cannot retire anything), nothing else');
select results_eq($$select * from pg_temp.would_visit()$$, $$values ('ann@dirty.test'), ('ben@dirty.test')$$,
  'a cycle would visit exactly the project''s members');
select is(roi.upkeep() ->> 'owners', '2', 'and visits two owners');
select results_eq($$select * from pg_temp.pool('ben@dirty.test')$$,
  $$values ('Dirty P1 a:active'), ('Dirty P1 b:active')$$, 'the other member''s pool is topped up with it');
select results_eq($$select * from pg_temp.pool('cat@dirty.test')$$, $$values ('Dirty P2 a:active')$$,
  'an owner elsewhere is untouched');

-- A personal memory marks only its author; a team memory only the team's members.
select tests.authenticate_as('cat@dirty.test');
insert into public.memories (author_id, scope, kind, title, body) values
  (auth.uid(), 'personal', 'gotcha', 'Dirty Cat own', 'cat own');
select tests.clear_authentication();
select tests.authenticate_as('dan@dirty.test');
insert into public.memories (author_id, scope, team_id, kind, title, body) values
  (auth.uid(), 'team', '00000000-0000-0000-0000-0000000d2001', 'convention', 'Dirty T1 b', 't1 b');
select tests.clear_authentication();
select results_eq($$select * from pg_temp.would_visit()$$, $$values ('cat@dirty.test'), ('dan@dirty.test')$$,
  'a personal write marks its author, a team write the team''s members');
select is(roi.upkeep() ->> 'owners', '2', 'and the cycle visits those two');

-- An owner without a pool is never visited, whatever they write.
insert into public.memories (author_id, scope, kind, title, body) values
  (tests.user_id('eve@dirty.test'), 'personal', 'decision', 'Dirty Eve b', 'eve b');
select isnt_empty($$select 1 from roi.dirty_layers where layer = 'personal' and layer_id = tests.user_id('eve@dirty.test')$$,
  'her write marked her layer');
select is_empty($$select * from pg_temp.would_visit()$$, 'but an owner with no pool is not visited');
select is(roi.upkeep() ->> 'owners', '0', 'the cycle visits nobody');

-- Invalidation, written by the author, retires the probe in every member's pool.
select tests.authenticate_as('ann@dirty.test');
update public.memories set invalidated_at = now() where title = 'Dirty P1 a';
select tests.clear_authentication();
select is(roi.upkeep() ->> 'retired', '2', 'an invalidated project memory retires both members'' probes');
select results_eq($$select * from pg_temp.pool('ben@dirty.test')$$,
  $$values ('Dirty P1 a:retired'), ('Dirty P1 b:active')$$, 'in the other member''s pool too');

-- Joining and leaving: only the member whose view moved is visited.
insert into public.project_members values ('00000000-0000-0000-0000-0000000d1001', tests.user_id('cat@dirty.test'));
select results_eq($$select * from pg_temp.would_visit()$$, $$values ('cat@dirty.test')$$,
  'a new member is visited, not the project''s other members');
select lives_ok($$select roi.upkeep()$$, 'upkeep runs after the join');
select results_eq($$select * from pg_temp.pool('cat@dirty.test')$$,
  $$values ('Dirty Cat own:active'), ('Dirty P1 b:active'), ('Dirty P2 a:active')$$,
  'the new member''s pool is topped up from the project');
delete from public.project_members where user_id = tests.user_id('cat@dirty.test')
  and project_id = '00000000-0000-0000-0000-0000000d1001';
select is(roi.upkeep() ->> 'retired', '1', 'leaving retires the project''s probe at the next cycle');

-- A full pool and a change that only adds: nothing to retire, nothing to top up, no visit.
update roi.settings set pool_target = 2;
insert into public.memories (author_id, scope, project_id, kind, title, body) values
  (tests.user_id('cat@dirty.test'), 'project', '00000000-0000-0000-0000-0000000d1002', 'gotcha', 'Dirty P2 b', 'p2 b');
select isnt_empty($$select 1 from roi.dirty_layers where layer = 'project' and layer_id = '00000000-0000-0000-0000-0000000d1002'$$,
  'the addition marked its project');
select is_empty($$select * from pg_temp.would_visit()$$, 'but an addition to an owner whose pool is full visits nobody');
select is(roi.upkeep() ->> 'owners', '0', 'so the cycle is idle');
update public.memories set invalidated_at = now() where title = 'Dirty Cat own';
select results_eq($$select * from pg_temp.would_visit()$$, $$values ('cat@dirty.test')$$,
  'an invalidation in the same full pool is visited');
select is(roi.upkeep() ->> 'retired', '1', 'and retires its probe');
select results_eq($$select x from pg_temp.pool('cat@dirty.test') x where x like '%:active'$$,
  $$values ('Dirty P2 a:active'), ('Dirty P2 b:active')$$, 'the pool is topped back up from the new memory');

select * from finish();
rollback;
