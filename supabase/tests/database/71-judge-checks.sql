-- The checks of the judge on every LLM run: a run queues
-- withheld_source_checks leniency checks (among probes whose source surfaced) and order_checks order
-- checks (among probes with 2 or more results); they are claimed after the run's judgments and before
-- questions to write, each with the recall snapshot as its check shows it; the run closes without
-- waiting for them; one that keeps failing is dropped; a result is recorded once, text-free, for the
-- owner's runs view.
begin;
select plan(16);

select tests.create_user('owner@checks.test');
select tests.user_id('owner@checks.test') as owner_id \gset
insert into public.memories (author_id, scope, kind, title, body)
select :'owner_id', 'personal', 'decision', format('Checked fact %s', i), format('Settled %s for reason %s.', i, md5('c' || i))
from generate_series(1, 3) i;
update roi.settings set extractor = 'llm', pool_target = 3, closed_book_checks = 0,
                        withheld_source_checks = 2, order_checks = 1, max_attempts = 1;

select tests.authenticate_as('owner@checks.test');
select is(public.benchmark_memory() ->> 'status', 'generating', 'LLM mode: the first call queues pending probes');
select tests.clear_authentication();
-- The worker's job, done by hand: each pending probe gets a question (which lexical recall answers
-- with every fact, its source first), and a fourth memory waits for its question.
update roi.probes set question = 'What was checked fact ' || right(source_title, 1) || ' settled for?',
                      state = 'active', activated_at = now()
where owner_id = :'owner_id';
insert into public.memories (author_id, scope, kind, title, body)
values (:'owner_id', 'personal', 'gotcha', 'Checked fact four', 'Learned while checking.');
select tests.authenticate_as('owner@checks.test');
select b ->> 'run_id' as run_id from public.benchmark_memory() b \gset
select tests.clear_authentication();
update roi.settings set pool_target = 4;
select roi.upkeep();

select is((select count(*)::int from roi.work where run_id = :'run_id' and kind = 'judge_withheld'), 2,
  'the run queued withheld_source_checks (2) leniency checks');
select is((select count(*)::int from roi.work where run_id = :'run_id' and kind = 'judge_reversed'), 1,
  'and order_checks (1) order check');
select ok(exists (select from roi.work where owner_id = :'owner_id' and kind = 'write_question'),
  'a question waits to be written too');

-- Claim order: the run's judgments, then its checks, then the question to write.
set local role roi_worker;
create temporary table claims on commit drop as select 0 as n, c.* from roi.claim_work() c where false;
do $$
begin
  for i in 1..7 loop
    insert into claims select i, c.* from roi.claim_work() c;
  end loop;
end
$$;
select results_eq($$select kind from claims order by n$$,
  array['judge', 'judge', 'judge', 'judge_reversed', 'judge_withheld', 'judge_withheld', 'write_question'],
  'judgments first, then the checks, then the question to write');
reset role;

select is((select count(*)::int from claims c join roi.probes p on p.id = c.probe_id
           where c.kind = 'judge_withheld' and (c.surfaced @> jsonb_build_array(jsonb_build_object('memory_id', p.memory_id))
                                                or c.surfaced::text like '%' || p.source_body || '%')),
  0, 'a leniency check sees no result that is its source');
select is((select count(*)::int from claims c join roi.recalls r on r.run_id = c.run_id and r.probe_id = c.probe_id
           where c.kind = 'judge_withheld'
             and jsonb_array_length(c.surfaced) = jsonb_array_length(r.surfaced) - 1
             and c.surfaced -> 0 ->> 'rank' = '1'),
  2, 'every other result is still there, renumbered from 1');
select is((select array(select x ->> 'memory_id' from jsonb_array_elements(c.surfaced) x)
           = array(select x ->> 'memory_id' from jsonb_array_elements(r.surfaced) with ordinality x (x, o) order by o desc)
           and array(select x ->> 'rank' from jsonb_array_elements(c.surfaced) x)
               = array(select g::text from generate_series(1, jsonb_array_length(r.surfaced)) g)
          from claims c join roi.recalls r on r.run_id = c.run_id and r.probe_id = c.probe_id
          where c.kind = 'judge_reversed'),
  true, 'an order check sees the same results in reverse order, renumbered from 1');
select is((select count(*)::int from claims where kind in ('judge_withheld', 'judge_reversed')
           and (question is null or source_body is null)), 0, 'a check has its question and ground truth');

-- The run closes once its judgments are in, with its checks still queued.
set local role roi_worker;
select roi.record_verdict(c.run_id, c.probe_id, true, false, 0.9, 'it says so', 'pgtap#judge.j2@0')
from claims c where c.kind = 'judge';
reset role;
select ok(exists (select from roi.run_closures where run_id = :'run_id')
          and (select count(*) from roi.work where run_id = :'run_id') = 3,
  'the run is complete while its three checks are still queued');

-- A check recorded once; a second record and a check of another kind change nothing.
set local role roi_worker;
select is(roi.record_judge_check(c.run_id, c.probe_id, 'judge_reversed', true, true), true,
  'the order check is recorded') from claims c where c.kind = 'judge_reversed';
select is(roi.record_judge_check(c.run_id, c.probe_id, 'judge_reversed', false, false), false,
  'a second record of it is refused') from claims c where c.kind = 'judge_reversed';
select is(roi.record_judge_check(c.run_id, c.probe_id, 'judge_withheld', true, false), true,
  'one leniency check is recorded') from claims c where c.kind = 'judge_withheld' order by n limit 1;
-- max_attempts is 1: the other leniency check's failure is its last, and the check is dropped.
select is(roi.release_work(c.work_id, c.attempt, 'the judge kept failing'), 'dropped',
  'a check that keeps failing gives up by being dropped') from claims c where c.kind = 'judge_withheld' order by n desc limit 1;
reset role;
select is((select count(*)::int from roi.work where run_id = :'run_id'), 0, 'no check is left in the queue');

select tests.authenticate_as('owner@checks.test');
select results_eq(
  $$select withheld_checked, withheld_answered_count, order_checked, order_agreement_count
    from public.roi_benchmark_runs where run_id = $$ || quote_literal(:'run_id'),
  $$values (1, 1, 1, 0)$$,
  'the runs view counts the recorded checks: the order check''s verdict differs from the judgment''s');
select tests.clear_authentication();

select * from finish();
rollback;
