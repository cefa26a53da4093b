-- The judge-corrected exclusive rate (roi.judge_corrected_rate, docs/judge-calibration.md) against
-- values worked by hand (tests/unit/test_judge_correction.py shows the working), its refusals, and the
-- runs view: a run shows the calibration of its own judge, not another judge's of the same owner.
begin;
select plan(14);

-- ---------------------------------------------------------------- values worked by hand
-- Sensitivity 0.85 (tp 85, fn 15), specificity 0.80 (tn 80, fp 20): q0 + q1 - 1 = 0.65.
select results_eq($$select estimate, low, high, note from roi.judge_corrected_rate(8, 20, 85, 15, 80, 20)$$,
  $$values (0.3077::numeric, 0.0000::numeric, 0.6570::numeric, null::text)$$,
  '8 of 20: Rogan–Gladen 0.2/0.65, the adjusted delta-method interval [0, 0.6570]');
select results_eq($$select estimate, low, high from roi.judge_corrected_rate(14, 20, 85, 15, 80, 20)$$,
  $$values (0.7692::numeric, 0.4134::numeric, 1.0000::numeric)$$,
  '14 of 20: 0.5/0.65, interval [0.4134, 1]');
select results_eq($$select estimate, low, high from roi.judge_corrected_rate(20, 20, 85, 15, 80, 20)$$,
  $$values (1.0000::numeric, 0.7522::numeric, 1.0000::numeric)$$,
  '20 of 20: clipped to 1, and the interval keeps the width of 20 questions'' sampling error (Wilson '
  '[0.8389, 1] through the correction, width 0.2478)');
-- Sensitivity 0.5, specificity 0.95: 18 of 20 runs far past what the judge's sensitivity allows.
select results_eq($$select estimate, low, high from roi.judge_corrected_rate(18, 20, 50, 50, 133, 7)$$,
  $$values (1.0000::numeric, 0.3931::numeric, 1.0000::numeric)$$,
  'a clamp at 1 is no point: Wilson for 18/20 [0.6990, 0.9721] through the correction spans 0.6069');
select results_eq($$select estimate, low, high from roi.judge_corrected_rate(0, 20, 85, 15, 80, 20)$$,
  $$values (0.0000::numeric, 0.0000::numeric, 0.2478::numeric)$$,
  'a clamp at 0 neither: Wilson for 0/20 [0, 0.1611] through the correction spans 0.2478');

-- ---------------------------------------------------------------- refusals
select ok((select estimate is null and low is null and high is null
                  and note like 'no corrected rate: the judge is too close to chance (sensitivity 100% + %'
           from roi.judge_corrected_rate(12, 20, 100, 0, 0, 140)),
  'an always-yes judge (q0 + q1 - 1 = 0) is refused, and the note says why');
select ok((select estimate is null from roi.judge_corrected_rate(12, 20, 50, 50, 79, 21))
          and (select estimate = 1.0000 from roi.judge_corrected_rate(12, 20, 50, 50, 80, 20)),
  'the line at q0 + q1 - 1 = 0.3: 0.29 refused, 0.30 corrected ((0.6 + 0.8 - 1)/0.3 = 1.33, clipped to 1)');
select is((select note from roi.judge_corrected_rate(12, 20, null, null, null, null)),
  'judge not calibrated: an operator runs zm-roi judge-check --record', 'no calibration, no figure');

-- ---------------------------------------------------------------- each run, its own judge
-- One owner, two LLM runs of four questions, each judged by another calibrated judge: run A by judge A
-- (sensitivity 40/50 = 0.8, specificity 45/50 = 0.9), 2 of 4 exclusive; run B by judge B (30/50 = 0.6,
-- 49/50 = 0.98), 3 of 4 exclusive.
select tests.create_user('judged@calibration.test');
select tests.user_id('judged@calibration.test') as judged \gset
insert into roi.probes (id, owner_id, memory_id, source_kind, source_scope, source_title, source_body, question,
                        state, activated_at)
select format('00000000-0000-0000-0000-00000000ca%s', lpad(i::text, 2, '0'))::uuid, :'judged', gen_random_uuid(),
       'decision', 'personal', 'Calibrated title ' || i, 'Calibrated body ' || i, 'What about ' || i || '?',
       'active', now()
from generate_series(1, 8) i;
insert into roi.runs (id, owner_id, mode, probe_count, started_at) values
  ('00000000-0000-0000-0000-00000000cb0a', :'judged', 'llm', 4, now() - interval '2 days'),
  ('00000000-0000-0000-0000-00000000cb0b', :'judged', 'llm', 4, now() - interval '1 day');
insert into roi.run_judges (run_id, owner_id, judge_fingerprint) values
  ('00000000-0000-0000-0000-00000000cb0a', :'judged', 'openai/judge-a#judge.j2@aaaaaaaaaaaa'),
  ('00000000-0000-0000-0000-00000000cb0b', :'judged', 'openai/judge-b#judge.j2@bbbbbbbbbbbb');
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select case when i <= 4 then '00000000-0000-0000-0000-00000000cb0a' else '00000000-0000-0000-0000-00000000cb0b' end::uuid,
       p.id, p.owner_id, array[p.memory_id], '[]'
from generate_series(1, 8) i
join roi.probes p on p.id = format('00000000-0000-0000-0000-00000000ca%s', lpad(i::text, 2, '0'))::uuid;
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
select case when i <= 4 then '00000000-0000-0000-0000-00000000cb0a' else '00000000-0000-0000-0000-00000000cb0b' end::uuid,
       p.id, p.owner_id, p.memory_id, i in (1, 2, 5, 6, 7), false, 'llm'
from generate_series(1, 8) i
join roi.probes p on p.id = format('00000000-0000-0000-0000-00000000ca%s', lpad(i::text, 2, '0'))::uuid;
insert into roi.judge_calibrations (check_id, judge_fingerprint, model, case_count,
  with_memory_tp, with_memory_fp, with_memory_tn, with_memory_fn,
  without_memory_tp, without_memory_fp, without_memory_tn, without_memory_fn,
  exclusive_tp, exclusive_fp, exclusive_tn, exclusive_fn)
values (gen_random_uuid(), 'openai/judge-a#judge.j2@aaaaaaaaaaaa', 'openai/judge-a', 100,
        40, 5, 45, 10, 40, 5, 45, 10, 40, 5, 45, 10),
       (gen_random_uuid(), 'openai/judge-b#judge.j2@bbbbbbbbbbbb', 'openai/judge-b', 100,
        30, 1, 49, 20, 30, 1, 49, 20, 30, 1, 49, 20);

select tests.authenticate_as('judged@calibration.test');
select results_eq(
  $$select judge_fingerprint, judge_calibrated, judge_sensitivity, judge_specificity, exclusive_rate
    from public.roi_benchmark_runs order by started_at$$,
  $$values ('openai/judge-a#judge.j2@aaaaaaaaaaaa', true, 0.8000::numeric, 0.9000::numeric, 0.5000::numeric),
           ('openai/judge-b#judge.j2@bbbbbbbbbbbb', true, 0.6000::numeric, 0.9800::numeric, 0.7500::numeric)$$,
  'each run shows the sensitivity and specificity of its own judge');
select results_eq(
  $$select exclusive_rate_corrected, exclusive_rate_corrected_low, exclusive_rate_corrected_high
    from public.roi_benchmark_runs where run_id = '00000000-0000-0000-0000-00000000cb0a'$$,
  $$select estimate, low, high from roi.judge_corrected_rate(2, 4, 40, 10, 45, 5)$$,
  'run A is corrected with judge A''s counts');
select results_eq(
  $$select exclusive_rate_corrected, exclusive_rate_corrected_low, exclusive_rate_corrected_high
    from public.roi_benchmark_runs where run_id = '00000000-0000-0000-0000-00000000cb0b'$$,
  $$select estimate, low, high from roi.judge_corrected_rate(3, 4, 30, 20, 49, 1)$$,
  'run B is corrected with judge B''s counts');
select is((select exclusive_rate_corrected from public.roi_benchmark_runs
           where run_id = '00000000-0000-0000-0000-00000000cb0a'), 0.5714,
  'run A by hand: (0.5 + 0.9 - 1)/(0.9 + 0.8 - 1) = 0.5714');
select is((select exclusive_rate_corrected from public.roi_benchmark_runs
           where run_id = '00000000-0000-0000-0000-00000000cb0b'), 1.0000,
  'run B by hand: (0.75 + 0.98 - 1)/(0.98 + 0.6 - 1) = 1.26, clipped to 1');
select tests.clear_authentication();
-- A newer calibration of judge B (sensitivity 0.9, specificity 0.9) supersedes its older one, for run B only.
insert into roi.judge_calibrations (check_id, judge_fingerprint, model, case_count,
  with_memory_tp, with_memory_fp, with_memory_tn, with_memory_fn,
  without_memory_tp, without_memory_fp, without_memory_tn, without_memory_fn,
  exclusive_tp, exclusive_fp, exclusive_tn, exclusive_fn)
values (gen_random_uuid(), 'openai/judge-b#judge.j2@bbbbbbbbbbbb', 'openai/judge-b', 100,
        45, 5, 45, 5, 45, 5, 45, 5, 45, 5, 45, 5);
select tests.authenticate_as('judged@calibration.test');
select results_eq(
  $$select judge_sensitivity, judge_specificity, exclusive_rate_corrected from public.roi_benchmark_runs
    order by started_at$$,
  $$values (0.8000::numeric, 0.9000::numeric, 0.5714::numeric), (0.9000, 0.9000, 0.8125)$$,
  'judge B''s newer calibration moves run B ((0.75 + 0.9 - 1)/0.8 = 0.8125) and leaves run A on judge A''s');
select tests.clear_authentication();

select * from finish();
rollback;
