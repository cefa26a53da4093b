-- One rotation path: after a completed run the owner's next benchmark_memory() call rotates and tops
-- up the pool, as the caller, in both modes, without waiting for upkeep; upkeep, the backstop for an
-- owner who never calls again, then finds nothing left to rotate.
begin;
select plan(10);

update roi.settings set pool_target = 2, rotation_per_run = 1;

-- ---------------------------------------------------------------- LLM mode
update roi.settings set extractor = 'llm';
select tests.create_user('llm@rotation.test');
insert into public.memories (author_id, scope, kind, title, body, created_at)
select tests.user_id('llm@rotation.test'), 'personal', 'decision', 'LLM fact ' || i, 'body ' || i,
       now() - make_interval(days => i)
from generate_series(1, 4) i;
select tests.authenticate_as('llm@rotation.test');
select is(public.benchmark_memory() ->> 'status', 'generating', 'LLM mode: the first call queues two questions');
select tests.clear_authentication();
-- The worker's part, done with its verbs: the two questions, then (after the run starts) the verdicts.
select roi.record_question(p.id, 'What about ' || p.source_title || '?') from roi.probes p
where p.owner_id = tests.user_id('llm@rotation.test');
select tests.authenticate_as('llm@rotation.test');
create temporary table first_run on commit drop as select (public.benchmark_memory() ->> 'run_id')::uuid as id;
select tests.clear_authentication();
select roi.record_verdict(w.run_id, w.probe_id, true, false, 0.9, 'judged') from roi.work w
where w.kind = 'judge' and w.run_id = (select id from first_run);
select ok(exists (select from roi.run_closures where run_id = (select id from first_run)),
  'the worker''s last verdict closed the run');
select is_empty($$select from roi.rotations where run_id = (select id from first_run)$$,
  'and nothing rotated yet: the worker cannot select probe candidates');

select tests.authenticate_as('llm@rotation.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'the owner''s next call starts the next run');
select tests.clear_authentication();
select is((select retired_count from roi.rotations where run_id = (select id from first_run)), 1,
  'and, as the caller, rotated one probe out after the completed run');
select results_eq(
  $$select state, count(*)::int from roi.probes where owner_id = tests.user_id('llm@rotation.test')
    group by state order by state$$,
  $$values ('active', 1), ('pending', 1), ('retired', 1)$$,
  'its place is topped up with the newest never-probed memory, pending for the worker');
select is_empty($$select from roi.pending_runs where run_id = (select id from first_run)$$,
  'the completed run''s bookkeeping is gone');
select is((roi.upkeep() ->> 'rotated')::int, 0, 'upkeep, the backstop, has nothing left to rotate');

-- ---------------------------------------------------------------- deterministic mode
update roi.settings set extractor = 'deterministic';
select tests.create_user('det@rotation.test');
insert into public.memories (author_id, scope, kind, title, body, created_at)
select tests.user_id('det@rotation.test'), 'personal', 'decision', 'Det fact ' || i, 'body ' || i,
       now() - make_interval(days => i)
from generate_series(1, 4) i;
select tests.authenticate_as('det@rotation.test');
create temporary table det_run on commit drop as select (public.benchmark_memory() ->> 'run_id')::uuid as id;
select tests.clear_authentication();
select is((select retired_count from roi.rotations where run_id = (select id from det_run)), 1,
  'deterministic mode: the call that judged its run rotated after it');
select results_eq(
  $$select state, count(*)::int from roi.probes where owner_id = tests.user_id('det@rotation.test')
    group by state order by state$$,
  $$values ('active', 2), ('retired', 1)$$,
  'and topped the pool back up with a templated question, at once');

select * from finish();
rollback;
