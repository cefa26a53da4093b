-- A probe whose source went away between two calls: benchmark_memory() reads a source again only when
-- the run's recall did not surface it (a surfaced source is visible and live by construction), so a
-- source invalidated or moved out of the owner's sight is found after the recalls, before anything
-- is written. The probe retires with its reason, the pool tops up, and the one run the call starts
-- has the replacements and not the retired probes; a source that is still there but did not surface
-- stays in the pool.
begin;
select plan(12);

select tests.create_user('gone@pool.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000b0b01', 'gone-here'),
  ('00000000-0000-0000-0000-0000000b0b02', 'gone-elsewhere');
insert into public.project_members values ('00000000-0000-0000-0000-0000000b0b01', tests.user_id('gone@pool.test'));
-- 22 facts: the pool takes the 20 newest, two are left to replace what retires.
insert into public.memories (author_id, scope, project_id, kind, title, body, created_at)
select tests.user_id('gone@pool.test'), 'project', '00000000-0000-0000-0000-0000000b0b01', 'decision',
       format('Gone fact %s', i), format('Gone body %s about valve %s', i, md5(i::text)),
       now() - make_interval(days => i)
from generate_series(1, 22) i;
update roi.settings set extractor = 'deterministic', pool_target = 20, rotation_per_run = 0;

select tests.authenticate_as('gone@pool.test');
select is(public.benchmark_memory() ->> 'probes', '20', 'run 1: the 20 newest facts');
select tests.clear_authentication();

-- Between the calls: fact 1 is invalidated, fact 2 moves to a project its owner is not in, and
-- fact 3's probe gets a question that does not find it (its source is still there).
update public.memories set invalidated_at = now()
where author_id = tests.user_id('gone@pool.test') and title = 'Gone fact 1';
update public.memories set project_id = '00000000-0000-0000-0000-0000000b0b02'
where author_id = tests.user_id('gone@pool.test') and title = 'Gone fact 2';
update roi.probes set question = 'What did we decide about the quarterly offsite menu?'
where owner_id = tests.user_id('gone@pool.test') and source_title = 'Gone fact 3';
-- Made by the user (so they can read it back), filled by the test.
select tests.authenticate_as('gone@pool.test');
create temporary table changed (question text, project_id uuid, memory_id uuid) on commit drop;
select tests.clear_authentication();
insert into changed
select p.question, p.pin_project_id, p.memory_id from roi.probes p
where p.owner_id = tests.user_id('gone@pool.test') and p.source_title in ('Gone fact 1', 'Gone fact 2', 'Gone fact 3');

select tests.authenticate_as('gone@pool.test');
-- The check can fail: none of the three sources surfaces for its question, so only reading it tells.
select is((select count(*)::int from changed c
           where not exists (select from public.recall(c.question, c.project_id, null, 10, false) r
                             where r.memory_id = c.memory_id)), 3,
  '(sensitivity) the recall surfaces none of the three sources changed between the calls');
select is(public.benchmark_memory() ->> 'probes', '20', 'run 2 has 20 probes: two retired, two replacements');
select tests.clear_authentication();

select is((select p.retired_reason from roi.probes p
           where p.owner_id = tests.user_id('gone@pool.test') and p.source_title = 'Gone fact 1'),
  'source_invalidated', 'the probe of the invalidated fact retired as source_invalidated');
select is((select p.retired_reason from roi.probes p
           where p.owner_id = tests.user_id('gone@pool.test') and p.source_title = 'Gone fact 2'),
  'source_unreachable', 'the probe of the fact moved out of sight retired as source_unreachable');
select is((select p.state from roi.probes p
           where p.owner_id = tests.user_id('gone@pool.test') and p.source_title = 'Gone fact 3'),
  'active', 'the probe whose source is there but did not surface stays');
select is((select count(*)::int from roi.runs r where r.owner_id = tests.user_id('gone@pool.test')), 2,
  'the call started one run');
select is((select count(*)::int from roi.recalls rc where rc.owner_id = tests.user_id('gone@pool.test')), 40,
  'and recorded 20 recalls for it, none for the run it did not start');

create temporary table run_two on commit drop as
select p.source_title from roi.recalls rc join roi.probes p on p.id = rc.probe_id
where rc.run_id = (select r.id from roi.runs r where r.owner_id = tests.user_id('gone@pool.test')
                   order by r.started_at desc limit 1);
select ok(not exists (select from run_two where source_title in ('Gone fact 1', 'Gone fact 2')),
  'run 2 did not recall the retired probes');
select ok((select count(*) from run_two where source_title in ('Gone fact 21', 'Gone fact 22')) = 2,
  'run 2 recalled the two replacements');
select ok(exists (select from run_two where source_title = 'Gone fact 3'),
  'run 2 recalled the probe whose source did not surface');
select is((select count(*)::int from roi.verdicts v where v.run_id = (
             select r.id from roi.runs r where r.owner_id = tests.user_id('gone@pool.test')
             order by r.started_at desc limit 1) and v.with_memory), 19,
  'its verdicts: every source surfaced but the one its question does not find');

select * from finish();
rollback;
