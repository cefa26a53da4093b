-- Probe questions and recall snapshots are server-only: readable inside benchmark_memory() (and by
-- the worker role), never by a direct select as their owner, another user or anon. And a memory the
-- owner cannot see never becomes their probe nor appears in their snapshots.
begin;
select plan(22);

select tests.create_user('owner@priv.test');
select tests.create_user('other@priv.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000d0b01', 'priv-shared'),
  ('00000000-0000-0000-0000-0000000d0b02', 'priv-hidden');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000d0b01', tests.user_id('owner@priv.test')),
  ('00000000-0000-0000-0000-0000000d0b02', tests.user_id('other@priv.test'));
insert into public.memories (author_id, scope, project_id, kind, title, body) values
  (tests.user_id('owner@priv.test'), 'project', '00000000-0000-0000-0000-0000000d0b01', 'decision',
   'Kafka retention is seven days', 'We keep Kafka retention at seven days because replays beyond that hit cold storage.'),
  (tests.user_id('owner@priv.test'), 'personal', null, 'gotcha',
   'Kafka consumer lag alarms', 'Kafka consumer lag alarms fire on deploys; silence them for ten minutes.'),
  (tests.user_id('other@priv.test'), 'project', '00000000-0000-0000-0000-0000000d0b02', 'decision',
   'Kafka secret partition plan', 'Kafka topics for payroll use 48 partitions: confidential to priv-hidden.');
update roi.settings set extractor = 'deterministic';

select tests.authenticate_as('owner@priv.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'the owner''s first call starts a run');
select is(current_setting('roi.inside_benchmark', true), '', 'benchmark_memory() closes the gate before it returns');

-- The owner, by direct select, reads none of the text-bearing rows.
select is_empty($$select question from roi.probes$$, 'the owner cannot read their probe questions');
select is_empty($$select surfaced from roi.recalls$$, 'the owner cannot read their recall snapshots');
select is_empty($$select * from roi.work$$, 'the owner cannot read the work queue');
select is_empty($$select * from roi.pending_runs$$, 'the owner cannot read run bookkeeping');
select isnt_empty($$select * from roi.verdicts$$, 'but the owner reads their own verdicts (ids and booleans)');
-- The premise of "a memory the owner cannot see never becomes their probe" (below), checked as the
-- owner: row-level security hides the other project's memory from them, even from an unpinned recall.
select is_empty($$select 1 from public.memories where title = 'Kafka secret partition plan'$$,
  'the owner cannot see the other project''s memory');
select is_empty($$select 1 from public.recall('Kafka secret partition plan payroll') where title = 'Kafka secret partition plan'$$,
  'nor does a recall over everything the owner can see surface it');
select throws_ok($$insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body)
  values (auth.uid(), gen_random_uuid(), 'decision', 'personal', 't', 'b')$$, '42501', null,
  'the owner cannot write probes outside the benchmark');
select throws_ok($$insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
  select run_id, probe_id, owner_id, memory_id, true, false, 'deterministic' from roi.verdicts limit 1$$, '42501', null,
  'the owner cannot forge verdicts outside the benchmark');

-- The other user sees nothing of the owner's benchmark, even through the views.
select tests.clear_authentication();
select tests.authenticate_as('other@priv.test');
select is_empty($$select * from roi.verdicts$$, 'another user reads none of the owner''s verdicts');
select is_empty($$select * from roi.runs$$, 'another user reads none of the owner''s runs');
select is_empty($$select * from public.roi_benchmark_runs$$, 'another user''s run list is empty');
select is((select state from public.roi_benchmark_tile), 'invite', 'another user''s tile is still an invitation');

-- Anonymous requests reach nothing in roi and neither view.
select tests.clear_authentication();
select tests.authenticate_as_anon();
select throws_ok($$select * from roi.probes$$, '42501', null, 'anon cannot even reach schema roi');
select throws_ok($$select * from public.roi_benchmark_tile$$, '42501', null, 'anon cannot read the tile');
select throws_ok($$select public.benchmark_memory()$$, '42501', null, 'anon cannot call benchmark_memory()');

-- What the superuser sees: the hidden memory is nowhere in the owner's probes or snapshots.
select tests.clear_authentication();
select is((select count(*)::int from roi.probes where owner_id = tests.user_id('owner@priv.test')), 2,
  'the owner''s pool holds exactly the two memories they can see');
select is_empty($$select 1 from roi.probes p join public.memories m on m.id = p.memory_id
  where p.owner_id = tests.user_id('owner@priv.test') and m.title = 'Kafka secret partition plan'$$,
  'a memory the owner cannot see never becomes their probe');
select is_empty($$select 1 from roi.recalls r join public.memories m on m.id = any (r.surfaced_ids)
  where r.owner_id = tests.user_id('owner@priv.test') and m.title = 'Kafka secret partition plan'$$,
  'nor does it surface in their recall snapshots, though every question mentions Kafka');
select ok((select bool_and(question is not null) from roi.probes where owner_id = tests.user_id('owner@priv.test')),
  'the questions exist: the owner simply cannot read them');

select * from finish();
rollback;
