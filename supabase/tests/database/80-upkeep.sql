-- roi.upkeep(): retirement (invalidated, unreachable), top-up from never-probed knowledge, rotation
-- after a completed run, overdue runs, idempotence, and the pg_cron schedule.
begin;
select plan(19);

select tests.create_user('keeper@upkeep.test');
select tests.create_user('stranger@upkeep.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000f0b01', 'upkeep-proj'),
  ('00000000-0000-0000-0000-0000000f0b02', 'upkeep-elsewhere');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000f0b01', tests.user_id('keeper@upkeep.test')),
  ('00000000-0000-0000-0000-0000000f0b02', tests.user_id('stranger@upkeep.test'));
insert into public.memories (author_id, scope, project_id, kind, title, body) values
  (tests.user_id('keeper@upkeep.test'), 'project', '00000000-0000-0000-0000-0000000f0b01', 'decision', 'Upkeep A', 'alpha'),
  (tests.user_id('keeper@upkeep.test'), 'project', '00000000-0000-0000-0000-0000000f0b01', 'gotcha', 'Upkeep B', 'beta'),
  (tests.user_id('keeper@upkeep.test'), 'personal', null, 'convention', 'Upkeep C', 'gamma');
update roi.settings set extractor = 'deterministic', pool_target = 20, rotation_per_run = 3;

create function pg_temp.probe_states() returns table (title text, state text, reason text)
  language sql as $$
  select p.source_title, p.state, p.retired_reason from roi.probes p
  where p.owner_id = tests.user_id('keeper@upkeep.test') order by 1
$$;

select tests.authenticate_as('keeper@upkeep.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'the keeper''s first run starts with three probes');
select tests.clear_authentication();

select ok((select (roi.upkeep() ->> 'failures')::int = 0), 'an upkeep cycle after activity runs without failures');
select is(roi.upkeep() ->> 'owners', '0', 'a second cycle with nothing changed touches no owner (idle)');

-- Invalidation retires the probe, with the reason.
update public.memories set invalidated_at = now() where title = 'Upkeep A';
select lives_ok($$select roi.upkeep()$$, 'upkeep runs after an invalidation');
select results_eq($$select * from pg_temp.probe_states()$$,
  $$values ('Upkeep A', 'retired', 'source_invalidated'), ('Upkeep B', 'active', null), ('Upkeep C', 'active', null)$$,
  'the probe of an invalidated memory retires with reason source_invalidated');

-- New knowledge tops the pool back up, newest first, as the owner: a memory they cannot see is not taken.
insert into public.memories (author_id, scope, project_id, kind, title, body) values
  (tests.user_id('keeper@upkeep.test'), 'project', '00000000-0000-0000-0000-0000000f0b01', 'decision', 'Upkeep D', 'delta'),
  (tests.user_id('stranger@upkeep.test'), 'project', '00000000-0000-0000-0000-0000000f0b02', 'decision', 'Upkeep hidden', 'secret');
select lives_ok($$select roi.upkeep()$$, 'upkeep runs after new knowledge arrives');
select results_eq($$select title, state from pg_temp.probe_states() where state <> 'retired'$$,
  $$values ('Upkeep B', 'active'), ('Upkeep C', 'active'), ('Upkeep D', 'active')$$,
  'the pool is topped up with the new memory the keeper can see, and only that one');
select is_empty($$select 1 from roi.probes where source_title = 'Upkeep hidden' and owner_id = tests.user_id('keeper@upkeep.test')$$,
  'a memory the owner cannot see never enters their pool, even when upkeep runs as a superuser');

-- Losing membership retires the project probes at the next upkeep; the personal one stays.
delete from public.project_members where user_id = tests.user_id('keeper@upkeep.test');
select lives_ok($$select roi.upkeep()$$, 'upkeep runs after a membership ends');
select results_eq($$select title, state, reason from pg_temp.probe_states() where title <> 'Upkeep A'$$,
  $$values ('Upkeep B', 'retired', 'source_unreachable'), ('Upkeep C', 'active', null), ('Upkeep D', 'retired', 'source_unreachable')$$,
  'probes sourced in a project the owner left retire as unreachable');

-- Rotation after a run closed outside the caller (as the worker would): upkeep rotates and refills.
insert into public.project_members values ('00000000-0000-0000-0000-0000000f0b01', tests.user_id('keeper@upkeep.test'));
insert into public.memories (author_id, scope, kind, title, body)
select tests.user_id('keeper@upkeep.test'), 'personal', 'decision', 'Upkeep fresh ' || i, 'fresh ' || i
from generate_series(1, 2) i;
update roi.settings set extractor = 'llm', pool_target = 1;
-- The next call in LLM mode hands the template question back to the writer: write one, as the worker would.
select tests.authenticate_as('keeper@upkeep.test');
select is(public.benchmark_memory() ->> 'status', 'generating',
  'in LLM mode the next call hands the template question to the writer');
select tests.clear_authentication();
update roi.probes set state = 'active', question = 'What about Q?', activated_at = now()
where owner_id = tests.user_id('keeper@upkeep.test') and state = 'pending';
select tests.authenticate_as('keeper@upkeep.test');
create temporary table llm_run on commit drop as select (public.benchmark_memory() ->> 'run_id')::uuid as id;
select tests.clear_authentication();
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
select j.run_id, j.probe_id, j.owner_id, p.memory_id, true, false, 'llm'
from roi.work j join roi.probes p on p.id = j.probe_id where j.kind = 'judge' and j.run_id = (select id from llm_run);
select ok((roi.upkeep() ->> 'finished_closed')::int >= 1, 'upkeep closes runs whose last verdict landed');
select ok(exists (select from roi.run_closures where run_id = (select id from llm_run) and reason = 'complete'),
  'among them this one');
select is((select count(*)::int from roi.rotations where run_id = (select id from llm_run)), 1,
  'and rotates the pool once for it');
select is((select count(*)::int from roi.probes where owner_id = tests.user_id('keeper@upkeep.test') and state = 'pending'), 1,
  'the rotated-out probe is replaced by a pending one (LLM mode waits for the worker)');

-- An overdue run is closed by upkeep, unjudged probes skipped.
update roi.probes set state = 'active', question = 'What about Q?' where owner_id = tests.user_id('keeper@upkeep.test') and state = 'pending';
select tests.authenticate_as('keeper@upkeep.test');
create temporary table overdue_run on commit drop as select (public.benchmark_memory() ->> 'run_id')::uuid as id;
select tests.clear_authentication();
update roi.settings set run_timeout = interval '0 seconds';
select ok((roi.upkeep() ->> 'overdue_closed')::int >= 1, 'upkeep closes runs past their timeout');
select ok(exists (select from roi.run_closures where run_id = (select id from overdue_run) and reason = 'timeout'),
  'among them this one, closed for the timeout');
-- Read through the public view as its owner (the view is what users see), not from the tables.
select tests.authenticate_as('keeper@upkeep.test');
select results_eq($$select status, judged_count, skipped_count from public.roi_benchmark_runs
  where run_id = (select id from overdue_run)$$,
  $$values ('complete', 0, 1)$$, 'the view shows it complete, its unjudged probe skipped for the timeout');
select tests.clear_authentication();

select results_eq($$select schedule, command from cron.job where jobname = 'zm-roi-upkeep'$$,
  $$values ('* * * * *'::text, 'select roi.upkeep()'::text)$$, 'pg_cron runs upkeep every minute');

select * from finish();
rollback;
