-- Diagnosable runs: retrieval figures, the breakdown, the paired comparison with its exact sign test,
-- cost per run and the closed-book spot-check, each proved on constructed data.
begin;
select plan(44);

-- ---- Part A: a real deterministic run where look-alikes crowd sources out of the top ten --------
select tests.create_user('looks@diag.test');
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000d1a01', 'diag-team');
insert into public.team_members values ('00000000-0000-0000-0000-0000000d1a01', tests.user_id('looks@diag.test'));
insert into public.projects (id, name) values ('00000000-0000-0000-0000-0000000d1a02', 'diag-proj');
insert into public.project_members values ('00000000-0000-0000-0000-0000000d1a02', tests.user_id('looks@diag.test'));
insert into public.memories (author_id, scope, project_id, team_id, kind, title, body, created_at)
select tests.user_id('looks@diag.test'), l.scope, l.project_id, l.team_id, l.kind, l.title, l.body,
       now() - make_interval(mins => i)
from generate_series(1, 20) i
cross join lateral (
  select case when i <= 4 then 'personal' when i <= 8 then 'team' else 'project' end as scope,
         case when i > 8 then '00000000-0000-0000-0000-0000000d1a02'::uuid end as project_id,
         case when i between 5 and 8 then '00000000-0000-0000-0000-0000000d1a01'::uuid end as team_id,
         case when i <= 4 then 'decision' when i <= 8 then 'gotcha' else 'convention' end as kind,
         -- Twelve project conventions are look-alikes: one title, one body, twelve memories.
         case when i <= 8 then format('Distinct fact %s about gadget %s', i, md5(i::text))
              else 'Release checklist' end as title,
         case when i <= 8 then format('Gadget %s needs setting %s.', md5(i::text), i * 11)
              else 'Check the release list before shipping anything.' end as body
) l;
update roi.settings set extractor = 'deterministic', pool_target = 20, closed_book_checks = 0;

select tests.authenticate_as('looks@diag.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'a deterministic run over three layers starts');
select ok((select source_surfaced_count < judged_count from public.roi_benchmark_runs),
  'look-alikes pushed some sources out of the results: surfaced < judged');
select ok((select source_mrr > 0 and source_mrr < 1 from public.roi_benchmark_runs),
  'and the mean reciprocal rank is below 1');
select ok((select retrieval_agreement_count = judged_count and source_surfaced_count = with_memory_count
  from public.roi_benchmark_runs), 'deterministic: the judge is the retrieval check, so they agree on every probe');
select results_eq($$select value from public.roi_benchmark_breakdown where dimension = 'scope' order by value$$,
  array['personal', 'project', 'team'], 'the breakdown has a row per layer');
select results_eq(
  $$select sum(b.judged_count)::int, sum(b.with_memory_count)::int, sum(b.without_memory_count)::int,
           sum(b.exclusive_count)::int
    from public.roi_benchmark_breakdown b where b.dimension = 'scope'$$,
  $$select judged_count, with_memory_count, without_memory_count, exclusive_count from public.roi_benchmark_runs$$,
  'across the three layers the breakdown adds up to the run''s totals');
select results_eq(
  $$select sum(b.judged_count)::int, sum(b.exclusive_count)::int
    from public.roi_benchmark_breakdown b where b.dimension = 'kind'$$,
  $$select judged_count, exclusive_count from public.roi_benchmark_runs$$,
  'across the three kinds too');
select ok((select exclusive_rate < 1 from public.roi_benchmark_breakdown where dimension = 'scope' and value = 'project'),
  'the crowded project layer is where the misses are');
select tests.clear_authentication();

-- ---- Part B: runs written by hand, so every figure is known ------------------------------------
select tests.create_user('built@diag.test');
select tests.create_user('other@diag.test');
select tests.user_id('built@diag.test') as built, tests.user_id('other@diag.test') as other \gset

-- Six probes for the retrieval figures (b1..b6) and ten for the paired comparison (c01..c10).
insert into roi.probes (id, owner_id, memory_id, source_kind, source_scope, source_title, source_body, question,
                        state, activated_at)
select format('00000000-0000-0000-0000-0000000b00%s', lpad(i::text, 2, '0'))::uuid, :'built',
       format('00000000-0000-0000-0000-0000000a00%s', lpad(i::text, 2, '0'))::uuid,
       (array['decision', 'gotcha', 'convention'])[1 + (i - 1) % 3],
       (array['personal', 'project', 'team', 'project', 'team', 'personal'])[i],
       'Built title ' || i, 'Built body ' || i, 'What about built ' || i || '?', 'active', now()
from generate_series(1, 6) i;
insert into roi.probes (id, owner_id, memory_id, source_kind, source_scope, source_title, source_body, question,
                        state, activated_at)
select format('00000000-0000-0000-0000-0000000c00%s', lpad(i::text, 2, '0'))::uuid, :'built',
       format('00000000-0000-0000-0000-0000000e00%s', lpad(i::text, 2, '0'))::uuid,
       'decision', 'personal', 'Paired title ' || i, 'Paired body ' || i, 'What about paired ' || i || '?',
       'active', now()
from generate_series(1, 10) i;

insert into roi.runs (id, owner_id, mode, probe_count, started_at) values
  ('00000000-0000-0000-0000-0000000f0001', :'built', 'deterministic', 6, now() - interval '3 days'),
  ('00000000-0000-0000-0000-0000000f0002', :'built', 'llm', 10, now() - interval '2 days'),
  ('00000000-0000-0000-0000-0000000f0003', :'built', 'llm', 10, now() - interval '1 day'),
  ('00000000-0000-0000-0000-0000000f0009', :'other', 'deterministic', 1, now() - interval '36 hours');
insert into roi.run_closures (run_id, owner_id, reason) values
  ('00000000-0000-0000-0000-0000000f0001', :'built', 'complete'),
  ('00000000-0000-0000-0000-0000000f0002', :'built', 'complete'),
  ('00000000-0000-0000-0000-0000000f0003', :'built', 'complete'),
  ('00000000-0000-0000-0000-0000000f0009', :'other', 'complete');

-- Run 1: the source ranks 1, 2, 4, absent, absent, and 1 for a probe whose verdict was skipped.
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select '00000000-0000-0000-0000-0000000f0001',
       format('00000000-0000-0000-0000-0000000b00%s', lpad(s.n::text, 2, '0'))::uuid, :'built',
       s.ids::uuid[], '[]'
from (values
  (1, '{00000000-0000-0000-0000-0000000a0001,00000000-0000-0000-0000-000000000ff1}'),
  (2, '{00000000-0000-0000-0000-000000000ff1,00000000-0000-0000-0000-0000000a0002}'),
  (3, '{00000000-0000-0000-0000-000000000ff1,00000000-0000-0000-0000-000000000ff2,00000000-0000-0000-0000-000000000ff3,00000000-0000-0000-0000-0000000a0003}'),
  (4, '{}'),
  (5, '{00000000-0000-0000-0000-000000000ff1}'),
  (6, '{00000000-0000-0000-0000-0000000a0006}')
) s (n, ids);
-- As roi.start_run does after its recalls: their text-free outcomes, and an LLM run's checks of the judge.
select roi.note_recall_outcomes(r.id), roi.queue_judge_checks(r.id) from roi.runs r where r.id = '00000000-0000-0000-0000-0000000f0001';
-- The judge: b1 (with, not without), b2 (with, without), b3 (neither: it disagrees with search),
-- b4 (with, though nothing surfaced: it disagrees again), b5 (neither), b6 skipped.
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, skipped,
                          skip_reason, judged_by)
select '00000000-0000-0000-0000-0000000f0001', p.id, p.owner_id, p.memory_id, v.w, v.wo, v.w is null,
       case when v.w is null then 'timeout' end, case when v.w is null then 'timeout' else 'deterministic' end
from roi.probes p
join (values (1, true, false), (2, true, true), (3, false, false), (4, true, false), (5, false, false),
             (6, null, null)) v (n, w, wo)
  on p.id = format('00000000-0000-0000-0000-0000000b00%s', lpad(v.n::text, 2, '0'))::uuid;

-- Runs 2 and 3 ask c01..c10, every source at rank 1. Exclusive (E) or not (-) in run 2 → run 3:
-- c01 E→E, c02 -→-, c03..c07 -→E (improved), c08 E→- (regressed), c09 E→skipped, c10 -→-.
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select r.id, p.id, p.owner_id, array[p.memory_id], '[]'
from roi.probes p
cross join (values ('00000000-0000-0000-0000-0000000f0002'::uuid), ('00000000-0000-0000-0000-0000000f0003'::uuid)) r (id)
where p.id::text like '00000000-0000-0000-0000-0000000c00%';
select roi.note_recall_outcomes(r.id), roi.queue_judge_checks(r.id) from roi.runs r
where r.id in ('00000000-0000-0000-0000-0000000f0002', '00000000-0000-0000-0000-0000000f0003');
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, skipped,
                          skip_reason, judged_by)
select v.run_id, p.id, p.owner_id, p.memory_id, v.w, v.wo, v.w is null,
       case when v.w is null then 'judge_failed' end, 'llm'
from roi.probes p
join (values
  ('00000000-0000-0000-0000-0000000f0002'::uuid, 1, true, false), ('00000000-0000-0000-0000-0000000f0002'::uuid, 2, false, false),
  ('00000000-0000-0000-0000-0000000f0002'::uuid, 3, false, false), ('00000000-0000-0000-0000-0000000f0002'::uuid, 4, false, false),
  ('00000000-0000-0000-0000-0000000f0002'::uuid, 5, false, false), ('00000000-0000-0000-0000-0000000f0002'::uuid, 6, false, false),
  ('00000000-0000-0000-0000-0000000f0002'::uuid, 7, false, false), ('00000000-0000-0000-0000-0000000f0002'::uuid, 8, true, false),
  ('00000000-0000-0000-0000-0000000f0002'::uuid, 9, true, false), ('00000000-0000-0000-0000-0000000f0002'::uuid, 10, false, false),
  ('00000000-0000-0000-0000-0000000f0003'::uuid, 1, true, false), ('00000000-0000-0000-0000-0000000f0003'::uuid, 2, false, false),
  ('00000000-0000-0000-0000-0000000f0003'::uuid, 3, true, false), ('00000000-0000-0000-0000-0000000f0003'::uuid, 4, true, false),
  ('00000000-0000-0000-0000-0000000f0003'::uuid, 5, true, false), ('00000000-0000-0000-0000-0000000f0003'::uuid, 6, true, false),
  ('00000000-0000-0000-0000-0000000f0003'::uuid, 7, true, false), ('00000000-0000-0000-0000-0000000f0003'::uuid, 8, false, false),
  ('00000000-0000-0000-0000-0000000f0003'::uuid, 9, null, null), ('00000000-0000-0000-0000-0000000f0003'::uuid, 10, true, true)
) v (run_id, n, w, wo) on p.id = format('00000000-0000-0000-0000-0000000c00%s', lpad(v.n::text, 2, '0'))::uuid;

-- Cost: run 3 made two priced calls on the deployment's key and one on the owner's own key; run 2
-- one unpriced call; run 1 none. A generation call (no run) counts for no run.
insert into public.usage_events (owner_id, purpose, model, run_id, probe_id, input_tokens, output_tokens, byok,
                                 cost_usd) values
  (:'built', 'judgment', 'pgtap-diag-priced', '00000000-0000-0000-0000-0000000f0003',
   '00000000-0000-0000-0000-0000000c0001', 100, 20, false, 0.000027),
  (:'built', 'closed_book_grade', 'pgtap-diag-priced', '00000000-0000-0000-0000-0000000f0003',
   '00000000-0000-0000-0000-0000000c0002', 100, 20, false, 0.000027),
  (:'built', 'closed_book_answer', 'pgtap-diag-priced', '00000000-0000-0000-0000-0000000f0003',
   '00000000-0000-0000-0000-0000000c0003', 100, 20, true, 0.000027),
  (:'built', 'judgment', 'pgtap-diag-unpriced', '00000000-0000-0000-0000-0000000f0002',
   '00000000-0000-0000-0000-0000000c0001', 50, 5, false, null),
  (:'built', 'probe_generation', 'pgtap-diag-priced', null, '00000000-0000-0000-0000-0000000c0001', 999, 99, false,
   0.0002091);

-- The spot-check of run 3: the bare model missed c01 and c02 and got c03 right; the judge said
-- without_memory = false for all three, so it agrees on two of the three.
insert into roi.closed_book_results (run_id, probe_id, owner_id, bare_correct) values
  ('00000000-0000-0000-0000-0000000f0003', '00000000-0000-0000-0000-0000000c0001', :'built', false),
  ('00000000-0000-0000-0000-0000000f0003', '00000000-0000-0000-0000-0000000c0002', :'built', false),
  ('00000000-0000-0000-0000-0000000f0003', '00000000-0000-0000-0000-0000000c0003', :'built', true);

-- Run 4 is still being judged (no closure), in LLM mode with two spot-checks per run configured.
update roi.settings set closed_book_checks = 2;
insert into roi.runs (id, owner_id, mode, probe_count, started_at) values
  ('00000000-0000-0000-0000-0000000f0004', :'built', 'llm', 3, now());
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select '00000000-0000-0000-0000-0000000f0004', p.id, p.owner_id, '{}', '[]'
from roi.probes p where p.id::text similar to '00000000-0000-0000-0000-0000000c000(1|2|3)';
select roi.note_recall_outcomes(r.id), roi.queue_judge_checks(r.id) from roi.runs r where r.id = '00000000-0000-0000-0000-0000000f0004';

-- The exact sign test, against hand-computed values: p = 2 · Σ_{i≤min} C(n, i) / 2ⁿ, capped at 1.
select is(roi.sign_test_p(3, 1), 0.6250, 'sign test +3/−1: 2·(1+4)/16 = 0.625');
select is(roi.sign_test_p(5, 1), 0.2188, 'sign test +5/−1: 2·(1+6)/64 = 0.21875');
select is(roi.sign_test_p(0, 10), 0.0020, 'sign test 0/10: 2/1024 = 0.00195');
select is(roi.sign_test_p(2, 2), 1.0000, 'an even split is capped at 1');
select is(roi.sign_test_p(0, 0), null, 'no discordant pair: no p-value');

select tests.authenticate_as('built@diag.test');
-- Retrieval figures of run 1.
select results_eq(
  $$select judged_count, skipped_count, source_surfaced_count, source_mrr, retrieval_agreement_count,
           source_median_rank
    from public.roi_benchmark_runs where run_id = '00000000-0000-0000-0000-0000000f0001'$$,
  $$values (5, 1, 3, 0.3500, 3, 2)$$,
  'run 1: 3 of 5 judged sources surfaced, MRR (1 + 1/2 + 1/4 + 0 + 0) / 5 = 0.35, judge and search agree on 3, median rank 2');

-- The breakdown of run 1, by kind and by scope, and its sums.
select results_eq(
  $$select dimension, value, judged_count, with_memory_count, without_memory_count, exclusive_count, exclusive_rate
    from public.roi_benchmark_breakdown where run_id = '00000000-0000-0000-0000-0000000f0001'
    order by dimension, value$$,
  $$values ('kind', 'convention', 1, 0, 0, 0, 0.0000), ('kind', 'decision', 2, 2, 0, 2, 1.0000),
           ('kind', 'gotcha', 2, 1, 1, 0, 0.0000),
           ('scope', 'personal', 1, 1, 0, 1, 1.0000), ('scope', 'project', 2, 2, 1, 1, 0.5000),
           ('scope', 'team', 2, 0, 0, 0, 0.0000)$$,
  'run 1 broken down by kind and by scope (the skipped probe counts in neither)');
select results_eq(
  $$select b.dimension, sum(b.judged_count)::int, sum(b.exclusive_count)::int
    from public.roi_benchmark_breakdown b where b.run_id = '00000000-0000-0000-0000-0000000f0001'
    group by b.dimension order by b.dimension$$,
  $$values ('kind', 5, 2), ('scope', 5, 2)$$,
  'per dimension the rows add up to the run''s 5 judged and 2 exclusive');

-- The paired comparison.
select results_eq(
  $$select run_id, previous_run_id, paired_count, improved_count, regressed_count, paired_p_value
    from public.roi_benchmark_runs order by started_at$$,
  $$values ('00000000-0000-0000-0000-0000000f0001'::uuid, null::uuid, 0, 0, 0, null::numeric),
           ('00000000-0000-0000-0000-0000000f0002', '00000000-0000-0000-0000-0000000f0001', 0, 0, 0, null),
           ('00000000-0000-0000-0000-0000000f0003', '00000000-0000-0000-0000-0000000f0002', 9, 5, 1, 0.2188),
           ('00000000-0000-0000-0000-0000000f0004', '00000000-0000-0000-0000-0000000f0003', 0, 0, 0, null)$$,
  'each run is paired with the owner''s previous completed run: run 3 has +5/−1 on 9 shared questions, p = 14/64');

-- Cost per run.
select results_eq(
  $$select input_tokens::int, output_tokens::int, cost_usd, own_key_calls from public.roi_benchmark_runs
    order by started_at$$,
  $$values (0, 0, null::numeric, 0), (50, 5, null, 0), (300, 60, 0.000081, 1), (0, 0, null, 0)$$,
  'tokens and cost per run: null when no call was priced, own-key calls counted, generation calls in no run');
select tests.clear_authentication();
select results_eq(
  $$select purpose, calls::int, cost_usd from roi.deployment_token_totals where model = 'pgtap-diag-priced'
    order by purpose$$,
  $$values ('closed_book_grade', 1, 0.000027::numeric), ('judgment', 1, 0.000027), ('probe_generation', 1, 0.0002091)$$,
  'operators'' totals gain the cost, and still leave out the call on the owner''s own key');
select col_default_is('roi', 'settings', 'closed_book_checks', '0', 'the closed-book spot-check is off by default');
select tests.authenticate_as('built@diag.test');

-- The spot-check.
select results_eq(
  $$select closed_book_checked, closed_book_correct, closed_book_agreement_count from public.roi_benchmark_runs
    where run_id = '00000000-0000-0000-0000-0000000f0003'$$,
  $$values (3, 1, 2)$$, 'run 3: 3 spot-checked, the bare model right on 1, the judge''s without_memory agreeing on 2');
select is_empty($$select * from roi.work$$, 'the owner does not see the work queue');
select tests.clear_authentication();

select is((select count(*)::int from roi.work where kind = 'closed_book' and run_id = '00000000-0000-0000-0000-0000000f0004'), 2,
  'an LLM run queues as many spot-checks as the setting says (2 of its 3 probes)');
select is((select count(*)::int from roi.work where kind = 'closed_book' and run_id <> '00000000-0000-0000-0000-0000000f0004'), 0,
  'and only that run: none while the setting was 0, none for deterministic runs');
select is((select count(*)::int from roi.recall_outcomes where owner_id = :'built'), 29,
  'every recorded recall left its text-free outcome');

-- The worker's verbs, on the spot-checks alone (the run's judgments and the questions' embeddings
-- would be claimed first otherwise).
delete from roi.work where kind <> 'closed_book';
set local role roi_worker;
create temporary table claimed on commit drop as select * from roi.claim_work();
select results_eq($$select kind, run_id, attempt, question like 'What about paired %' from claimed$$,
  $$values ('closed_book', '00000000-0000-0000-0000-0000000f0004'::uuid, 1, true)$$,
  'the worker claims a spot-check with its question');
select is((select count(*)::int from roi.claim_work()), 1, 'the other one is still claimable');
select is((select count(*)::int from roi.claim_work()), 0, 'and a leased row is not claimed twice');
select is(roi.release_work((select work_id from claimed), 1, 'boom'), 'retry',
  'a failed attempt goes back to the queue');
select is(roi.record_closed_book((select run_id from claimed), (select probe_id from claimed), true), true,
  'the grade is recorded');
select is(roi.record_closed_book((select run_id from claimed), (select probe_id from claimed), false), false,
  'a second grade for the same probe is a no-op');
-- A spot-check that keeps failing is dropped, never guessed; a stale release changes nothing.
reset role;
update roi.settings set max_attempts = 2;
update roi.work set lease_until = now() - interval '1 second';  -- its worker died
set local role roi_worker;
create temporary table last_try on commit drop as select * from roi.claim_work();
select is(roi.release_work((select work_id from last_try), 7, 'late'), 'stale',
  'a release for another attempt is stale');
select is(roi.release_work((select work_id from last_try), 2, 'boom'), 'dropped',
  'a failure on the last allowed attempt drops the spot-check');
select is((select count(*)::int from roi.work where run_id = '00000000-0000-0000-0000-0000000f0004'), 0,
  'and the queue is empty');
select throws_ok(format($$insert into roi.closed_book_results (run_id, probe_id, owner_id, bare_correct)
    values ('00000000-0000-0000-0000-0000000f0001', '00000000-0000-0000-0000-0000000b0001', %L, true)$$, :'built'),
  '42501', null, 'the worker cannot write a result row directly');
select is(roi.record_closed_book('00000000-0000-0000-0000-0000000f0001', '00000000-0000-0000-0000-0000000b0001', true),
  false, 'nor record one through its verb for a probe it was not asked to check');
reset role;
select is((select count(*)::int from roi.closed_book_results where run_id = '00000000-0000-0000-0000-0000000f0001'
             and probe_id = '00000000-0000-0000-0000-0000000b0001'), 0, 'so no such result exists');
select throws_ok($$update roi.closed_book_results set bare_correct = not bare_correct$$, '42501', null,
  'spot-check results are append-only');
select throws_ok($$insert into public.usage_events (owner_id, purpose, model) values (tests.user_id('built@diag.test'), 'chat', 'm')$$,
  '23514', null, 'usage purposes stay a closed list');

-- Another user sees none of it; anon cannot read the new view at all.
select tests.authenticate_as('other@diag.test');
select results_eq($$select previous_run_id from public.roi_benchmark_runs$$, $$values (null::uuid)$$,
  'another owner''s run is never the previous run');
select is_empty($$select * from public.roi_benchmark_breakdown where run_id <> '00000000-0000-0000-0000-0000000f0009'$$,
  'another user reads no breakdown of the owner''s runs');
select is_empty($$select * from roi.recall_outcomes$$, 'nor their recall outcomes');
select is_empty($$select * from roi.closed_book_results$$, 'nor their spot-check results');
select tests.clear_authentication();
select tests.authenticate_as_anon();
select throws_ok($$select * from public.roi_benchmark_breakdown$$, '42501', null, 'anon cannot read the breakdown');
select tests.clear_authentication();

select * from finish();
rollback;
