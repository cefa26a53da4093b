-- benchmark_memory() per the contract, the metric and views, append-only results, timeouts, and the
-- one writer of verdicts.
begin;
select plan(47);

select tests.create_user('runner@runs.test');
select tests.create_user('episodic@runs.test');
select tests.create_user('nobody@runs.test');
insert into public.projects (id, name) values ('00000000-0000-0000-0000-0000000e0b01', 'runs-proj');
insert into public.project_members values ('00000000-0000-0000-0000-0000000e0b01', tests.user_id('runner@runs.test'));
insert into public.memories (author_id, scope, project_id, kind, title, body, created_at)
select tests.user_id('runner@runs.test'), 'project', '00000000-0000-0000-0000-0000000e0b01',
       (array['decision', 'gotcha', 'convention'])[1 + i % 3],
       format('Runs fact number %s about widget %s', i, md5(i::text)),
       format('Widget %s needs setting %s because of incident %s.', md5(i::text), i * 7, i * 13),
       now() - make_interval(days => i)
from generate_series(1, 25) i;
insert into public.memories (author_id, scope, kind, title, body) values
  (tests.user_id('episodic@runs.test'), 'personal', 'episode', 'Tuesday debugging', 'Spent the day on logs.'),
  (tests.user_id('runner@runs.test'), 'personal', 'episode', 'Runner diary', 'Nothing to probe here.');
update roi.settings set extractor = 'deterministic', pool_target = 20, rotation_per_run = 3;

-- Who may call.
select throws_ok($$select public.benchmark_memory()$$, '28000', null,
  'a call without a signed-in user fails with a clear error');
select tests.authenticate_as('episodic@runs.test');
select is(public.benchmark_memory() ->> 'status', 'empty', 'no knowledge to probe: empty');
select ok(length(public.benchmark_memory() ->> 'message') > 20, 'empty carries a message saying why');
select tests.clear_authentication();

-- Before any run the tile invites, never shows 0%.
select tests.authenticate_as('runner@runs.test');
select results_eq($$select state, exclusive_rate, hint like 'Ask your agent%' from public.roi_benchmark_tile$$,
  $$values ('invite', null::numeric, true)$$, 'before any run the tile is an invitation with no rate');

-- The memories table must not change because of a run.
create temporary table memories_before on commit drop as select * from public.memories;

-- First run, deterministic: pool filled and verdicts recorded in one call.
create temporary table first_call on commit drop as select public.benchmark_memory() as r;
select is((select r ->> 'status' from first_call), 'started', 'the first deterministic call starts a run');
select is((select (r ->> 'probes')::int from first_call), 20, 'with a full pool of 20 probes');
select results_eq($$select status, probe_count, judged_count, skipped_count from public.roi_benchmark_runs$$,
  $$values ('complete', 20, 20, 0)$$, 'the run is complete with every probe judged');
select is((select count(*)::int from roi.verdicts), 20, 'one verdict per probe');
select set_eq($$select v.memory_id from roi.verdicts v$$,
  $$select id from public.memories where author_id = auth.uid() and kind <> 'episode'
    order by created_at desc limit 20$$,
  'the first pool holds the 20 newest knowledge memories');
select ok((select bool_and(not without_memory) from roi.verdicts), 'deterministic: without_memory is always false');
select is((select count(distinct probe_id)::int from roi.verdicts), 20, 'no probe has two verdicts');

select results_eq($$select exclusive_count::numeric / judged_count = exclusive_rate,
    exclusive_rate_low <= exclusive_rate and exclusive_rate <= exclusive_rate_high
  from public.roi_benchmark_runs$$, $$values (true, true)$$,
  'exclusive_rate = exclusive / judged, inside its Wilson interval');
-- The Wilson bounds themselves, against hand-computed values (k = 3, n = 4, z = 1.96).
select is(roi.wilson_bound(3, 4, false), 0.3006, 'Wilson lower bound for 3 of 4 is 0.3006');
select is(roi.wilson_bound(3, 4, true), 0.9544, 'Wilson upper bound for 3 of 4 is 0.9544');
select is(roi.wilson_bound(0, 20, true), 0.1611, 'Wilson upper bound for 0 of 20 is 0.1611, not 0');
select results_eq($$select state, hint from public.roi_benchmark_tile$$,
  $$select 'ready', format('%s of 20 questions only memory answered', exclusive_count)
    from public.roi_benchmark_runs$$, 'the tile is ready with the hint sentence');
select is((select cardinality(trend) from public.roi_benchmark_tile), 1, 'one completed run: a one-point trend');

-- Rotation: 5 never-probed memories remain, so 3 long-serving probes rotated out and the pool refilled.
select tests.clear_authentication();
select is((select count(*)::int from roi.probes where owner_id = tests.user_id('runner@runs.test') and retired_reason = 'rotated'),
  3, 'after the run three of the longest-serving probes rotated out');
select is((select count(*)::int from roi.probes where owner_id = tests.user_id('runner@runs.test') and state = 'active'),
  20, 'and the pool was topped back up to 20 from never-probed knowledge');
select is((select count(*)::int from roi.probes p join public.memories m on m.id = p.memory_id
  where p.owner_id = tests.user_id('runner@runs.test') and m.kind = 'episode'), 0, 'episodes are never probed');

-- Second run: a two-point trend.
select tests.authenticate_as('runner@runs.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'a later call starts a second run');
select is((select cardinality(trend) from public.roi_benchmark_tile), 2, 'two completed runs: a two-point trend');
select is((select count(*)::int from public.roi_benchmark_runs), 2, 'the run list holds both runs');
select set_eq($$select * from public.memories$$, $$select * from memories_before$$,
  'the runs changed nothing in public.memories');

-- Append-only: no role updates or deletes a recorded result.
select throws_ok($$update roi.verdicts set with_memory = not with_memory$$, '42501', null,
  'the owner cannot update a verdict');
select throws_ok($$delete from roi.runs$$, '42501', null, 'the owner cannot delete a run');
select tests.clear_authentication();
select throws_ok($$update roi.verdicts set with_memory = not with_memory$$, '42501',
  'roi.verdicts: recorded results are append-only (update refused)', 'not even the database owner updates a verdict');
select throws_ok($$delete from roi.verdicts$$, '42501', null, 'nor deletes one');
select throws_ok($$update roi.runs set probe_count = 1$$, '42501', null, 'runs are append-only');
select throws_ok($$delete from roi.run_closures$$, '42501', null, 'closures are append-only');
select throws_ok($$update roi.recalls set surfaced = '[]'$$, '42501', null, 'recall snapshots are append-only');
-- A verdict and an outcome refer to their recall snapshot: none for a probe the run never recalled.
create temporary table never_recalled on commit drop as
select r.id as run_id, p.id as probe_id, p.owner_id, p.memory_id
from roi.runs r join roi.probes p on p.owner_id = r.owner_id
where r.owner_id = tests.user_id('runner@runs.test')
  and not exists (select from roi.recalls rc where rc.run_id = r.id and rc.probe_id = p.id)
limit 1;
select throws_ok($$insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
  select run_id, probe_id, owner_id, memory_id, true, false, 'deterministic' from never_recalled$$, '23503', null,
  'a verdict for a probe its run never recalled is refused');
select throws_ok($$insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope)
  select run_id, probe_id, owner_id, 'decision', 'personal' from never_recalled$$, '23503', null,
  'and so is its outcome');

-- LLM mode: the pool waits for the worker, and an open run makes later calls answer in_progress.
update roi.settings set extractor = 'llm';
select tests.create_user('llm@runs.test');
insert into public.memories (author_id, scope, kind, title, body)
select tests.user_id('llm@runs.test'), 'personal', 'decision', 'LLM fact ' || i, 'Body of LLM fact ' || i
from generate_series(1, 4) i;
select tests.authenticate_as('llm@runs.test');
select is(public.benchmark_memory(), '{"status": "generating", "ready": 0, "target": 4}'::jsonb,
  'LLM mode: the first call queues the pool and answers generating');
select tests.clear_authentication();
update roi.probes set question = 'What about ' || source_title || '?', state = 'active', activated_at = now()
where owner_id = tests.user_id('llm@runs.test');
select tests.authenticate_as('llm@runs.test');
create temporary table llm_call on commit drop as select public.benchmark_memory() as r;
select is((select r ->> 'status' from llm_call), 'started', 'with the pool written, a call starts a run');
select is(public.benchmark_memory(), jsonb_build_object('status', 'in_progress', 'run_id', (select r ->> 'run_id' from llm_call)),
  'while it is judged, another call answers in_progress with that run, starting nothing');
select results_eq($$select state, exclusive_rate from public.roi_benchmark_tile$$, $$values ('judging', null::numeric)$$,
  'the tile says judging and shows no rate yet');
select tests.clear_authentication();
select is((select count(*)::int from roi.work where kind = 'judge' and owner_id = tests.user_id('llm@runs.test')), 4,
  'one queued judgment per probe');
select is((select count(*)::int from roi.recalls rc
           where rc.owner_id = tests.user_id('llm@runs.test') and jsonb_array_length(rc.surfaced) > 0
             and pg_column_compression(rc.surfaced) is null), 4,
  'an LLM run''s snapshots keep the text its judge reads, stored uncompressed');

-- One verdict lands, then the run passes its timeout: the rest are skipped, the judged one counts.
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
select j.run_id, j.probe_id, j.owner_id, p.memory_id, true, false, 'llm'
from roi.work j join roi.probes p on p.id = j.probe_id
where j.kind = 'judge' and j.owner_id = tests.user_id('llm@runs.test') limit 1;
update roi.settings set run_timeout = interval '0 seconds';
select tests.authenticate_as('llm@runs.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'a run past its timeout no longer blocks a new one');
select results_eq($$select status, judged_count, skipped_count, exclusive_rate from public.roi_benchmark_runs order by started_at limit 1$$,
  $$values ('complete', 1, 3, 1.0000)$$, 'the timed-out run completed: three skipped, the judged one counted');
select tests.clear_authentication();
select is((select reason from roi.run_closures c join roi.runs r on r.id = c.run_id
  where r.owner_id = tests.user_id('llm@runs.test') order by r.started_at limit 1), 'timeout', 'closed for the timeout');
select is((select count(*)::int from roi.verdicts v join roi.runs r on r.id = v.run_id
  where r.owner_id = tests.user_id('llm@runs.test') and v.skip_reason = 'timeout'), 3, 'skipped verdicts say why');

-- The gate is the only thing between the owner and the text: with it open by hand, text shows.
select tests.authenticate_as('runner@runs.test');
select is_empty($$select question from roi.probes$$, '(before) the owner reads no question');
select roi.open_gate();
select isnt_empty($$select question from roi.probes$$, 'with the gate open, as only the benchmark does, questions show');
select tests.clear_authentication();

-- One writer of verdicts (docs/contributing.md): roi.write_verdicts inserts every verdict, the LLM
-- judge's, the deterministic ones and the skipped ones of a closing run; no other function in the
-- project's schemas does. Checked by structure, as the one home of ts_rank's weights is
-- (25-recall-postings.sql): a second writer, created here, is caught.
create temporary view verdict_writers as
select p.oid::regprocedure::text as writer
from pg_proc p join pg_namespace n on n.oid = p.pronamespace
where n.nspname in ('public', 'roi', 'auth') and p.prosrc ~* '\minsert\s+into\s+roi\s*\.\s*verdicts\M';
create function roi.offending_verdict_writer(run uuid) returns void
  language sql security invoker set search_path = ''
as $$
  insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
  select run, p.id, p.owner_id, p.memory_id, true, 'timeout', 'timeout' from roi.probes p limit 0
$$;
select set_eq($$select writer from verdict_writers$$,
  array['roi.write_verdicts(uuid,uuid,text,boolean,boolean,real,text)', 'roi.offending_verdict_writer(uuid)'],
  '(sensitivity) a second function that inserts verdicts is caught');
drop function roi.offending_verdict_writer(uuid);
select set_eq($$select writer from verdict_writers$$,
  array['roi.write_verdicts(uuid,uuid,text,boolean,boolean,real,text)'],
  'roi.write_verdicts is the one function that inserts verdicts');

select * from finish();
rollback;
