-- The judge's measured error, taken out of the headline (issue 32; docs/judge-calibration.md).
-- `zm-roi judge-check --record` stores one row per check in roi.judge_calibrations (counts only, no
-- case text; written by the operator, read by an owner only for the judges of their runs); the runs
-- view gains, last, the newest calibration of each run's judge and the exclusive rate corrected for
-- it (roi.judge_corrected_rate: Rogan–Gladen with an Agresti–Coull-adjusted delta-method interval);
-- the tile gains `judge_note`. roi.forbid_result_change reads the owner through jsonb, so the
-- append-only trigger also guards a result table that has no owner column.

-- ============================================================================================
-- Tables
-- ============================================================================================
-- A judge's measured error: one row per `zm-roi judge-check --record`, the judge (fingerprint as
-- runs record it, model) and per label the four counts of its verdicts against the calibration set's
-- gold labels (tp: gold true, judged true; fp: gold false, judged true; tn; fn). Counts only: no
-- case text reaches the database. Written by the operator (the database owner); an owner reads the
-- rows whose fingerprint judged one of their runs, and the runs view corrects a run's exclusive rate
-- with the newest row of its judge (a newer check supersedes an older one). Append-only.
create table roi.judge_calibrations (
  id bigint generated always as identity primary key,
  -- The check's usage events carry it as their run_id (purpose judge_check).
  check_id uuid not null unique,
  judge_fingerprint text not null check (length(judge_fingerprint) between 1 and 300),
  model text not null check (length(model) between 1 and 200),
  -- Cases put to the judge; the four counts of a label add up to those it judged (a case whose every
  -- reply failed to parse is left out of the counts, never guessed).
  case_count integer not null check (case_count > 0),
  recorded_at timestamptz not null default now(),
  with_memory_tp integer not null check (with_memory_tp >= 0),
  with_memory_fp integer not null check (with_memory_fp >= 0),
  with_memory_tn integer not null check (with_memory_tn >= 0),
  with_memory_fn integer not null check (with_memory_fn >= 0),
  without_memory_tp integer not null check (without_memory_tp >= 0),
  without_memory_fp integer not null check (without_memory_fp >= 0),
  without_memory_tn integer not null check (without_memory_tn >= 0),
  without_memory_fn integer not null check (without_memory_fn >= 0),
  exclusive_tp integer not null check (exclusive_tp >= 0),
  exclusive_fp integer not null check (exclusive_fp >= 0),
  exclusive_tn integer not null check (exclusive_tn >= 0),
  exclusive_fn integer not null check (exclusive_fn >= 0),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn
         = without_memory_tp + without_memory_fp + without_memory_tn + without_memory_fn),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn
         = exclusive_tp + exclusive_fp + exclusive_tn + exclusive_fn),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn between 1 and case_count)
);
create index judge_calibrations_fingerprint_idx on roi.judge_calibrations (judge_fingerprint, id desc);

-- ============================================================================================
-- Functions
-- ============================================================================================
-- Results are append-only. The one exception is erasing a user: the cascade from auth.users
-- removes their results with them (the owner no longer exists when this trigger runs). A result
-- table with no owner (roi.judge_calibrations: the operator's) takes no exception: the owner is
-- read through jsonb, since naming old.owner_id fails on a row that has no such field.
create or replace function roi.forbid_result_change() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  row_owner uuid := (to_jsonb(old) ->> 'owner_id')::uuid;
begin
  if tg_op = 'DELETE' and row_owner is not null
     and not exists (select from auth.users u where u.id = row_owner) then
    return old;
  end if;
  raise exception 'roi.%: recorded results are append-only (% refused)', tg_table_name, lower(tg_op)
    using errcode = 'insufficient_privilege';
end
$$;

-- The judge's measured error taken out of a run's exclusive rate (docs/judge-calibration.md): k of
-- n judged questions exclusive, and the judge's exclusive-label counts on its calibration set
-- (sensitivity q1 = tp/(tp+fn), specificity q0 = tn/(tn+fp)). The estimate is Rogan–Gladen,
-- (k/n + q0 − 1)/(q0 + q1 − 1) clipped to [0, 1]. The 95% interval is the delta-method one, carrying
-- the run's sampling error and the calibration's, computed on each proportion with two successes and
-- two failures added (Agresti–Coull): the plain one covers ~93% at n = 20, this one ≥ 95%
-- (tests/unit/test_judge_correction.py). Null figures and the reason in `note` when there is nothing
-- to correct, or when the judge is too close to chance (q0 + q1 − 1 < 0.3) for a correction to mean
-- anything. The one home of these figures: the runs view and everything after it read them here.
create function roi.judge_corrected_rate(
  k integer, n integer, tp integer, fn integer, tn integer, fp integer,
  out estimate numeric, out low numeric, out high numeric, out note text)
  language plpgsql immutable security invoker set search_path = ''
as $$
declare
  z constant numeric := 1.96;
  q1 numeric;
  q0 numeric;
  youden numeric;
  p_adj numeric;
  q1_adj numeric;
  q0_adj numeric;
  youden_adj numeric;
  centre numeric;
  share numeric;
  half numeric;
begin
  if tp is null or fn is null or tn is null or fp is null then
    note := 'judge not calibrated: an operator runs zm-roi judge-check --record';
    return;
  end if;
  if n is null or n <= 0 or k is null then
    note := 'no judged question to correct';
    return;
  end if;
  if tp + fn = 0 or tn + fp = 0 then
    note := 'no corrected rate: the judge''s calibration has no case whose exclusive label is '
            || case when tp + fn = 0 then 'true' else 'false' end || ', so it cannot measure the judge';
    return;
  end if;
  q1 := tp::numeric / (tp + fn);
  q0 := tn::numeric / (tn + fp);
  youden := q0 + q1 - 1;
  if youden < 0.3 then
    note := format('no corrected rate: the judge is too close to chance (sensitivity %s%% + specificity %s%% '
                   '- 100%% = %s points, below the 30 a correction needs)',
                   round(100 * q1), round(100 * q0), round(100 * youden));
    return;
  end if;
  p_adj := (k + 2)::numeric / (n + 4);
  q1_adj := (tp + 2)::numeric / (tp + fn + 4);
  q0_adj := (tn + 2)::numeric / (tn + fp + 4);
  youden_adj := q0_adj + q1_adj - 1;
  if youden_adj <= 0 then
    note := 'no corrected rate: the judge''s calibration is too small to bound the correction';
    return;
  end if;
  estimate := greatest(0, least(1, (k::numeric / n + q0 - 1) / youden));
  centre := (p_adj + q0_adj - 1) / youden_adj;
  share := greatest(0, least(1, centre));
  half := z * sqrt(p_adj * (1 - p_adj) / (n + 4)
                   + (1 - share) ^ 2 * q0_adj * (1 - q0_adj) / (tn + fp + 4)
                   + share ^ 2 * q1_adj * (1 - q1_adj) / (tp + fn + 4)) / youden_adj;
  -- The interval always holds the estimate it is printed beside.
  low := round(least(estimate, greatest(0, centre - half)), 4);
  high := round(greatest(estimate, least(1, centre + half)), 4);
  estimate := round(estimate, 4);
end
$$;
revoke execute on function roi.judge_corrected_rate(integer, integer, integer, integer, integer, integer)
  from public;

-- ============================================================================================
-- Views
-- ============================================================================================
-- The caller's runs, newest columns last (a view only grows: clients bind to the earlier ones).
-- Aggregates only. Per run: the headline (exclusive rate with its Wilson interval); the retrieval
-- figures that tell a search miss from a knowledge gap (source surfaced, MRR, median rank, and how
-- often the judge's with_memory agrees with the source surfacing); the paired comparison with the
-- owner's previous closed run (improved, regressed, exact sign test; no p-value when the judge
-- changed, since the two runs' verdicts were not made the same way); what it cost (tokens, dollars
-- by litellm's price map, calls on the owner's own key); the closed-book spot-check; what it
-- measured (recall function, embedding models of its questions: embedding_minilm_model, the last
-- column, is the third leg's); and the judge checks: questions the gate sent back to the model or to their template, who judged (judge_fingerprint, and
-- judge_changed against the previous run; null while either run has no judged verdict), how often the
-- judge still said answerable with the source withheld, and how often reversing the results left a
-- judged verdict unchanged; last, the judge's measured error (docs/judge-calibration.md): whether
-- the newest `zm-roi judge-check --record` of the run's judge exists, its sensitivity and specificity
-- on the exclusive label, the exclusive rate corrected for them with its 95% interval
-- (roi.judge_corrected_rate), why there is none when there is none, and the calibration's size.
create or replace view public.roi_benchmark_runs with (security_invoker = true) as
select r.id as run_id,
       r.started_at,
       c.closed_at as finished_at,
       case when c.run_id is null then 'judging' else 'complete' end as status,
       r.mode,
       r.probe_count,
       coalesce(v.judged, 0)::integer as judged_count,
       coalesce(v.skipped, 0)::integer as skipped_count,
       coalesce(v.with_memory, 0)::integer as with_memory_count,
       coalesce(v.without_memory, 0)::integer as without_memory_count,
       coalesce(v.exclusive, 0)::integer as exclusive_count,
       round(v.exclusive::numeric / nullif(v.judged, 0), 4) as exclusive_rate,
       roi.wilson_bound(v.exclusive, v.judged, false) as exclusive_rate_low,
       roi.wilson_bound(v.exclusive, v.judged, true) as exclusive_rate_high,
       coalesce(v.surfaced, 0)::integer as source_surfaced_count,
       v.mrr as source_mrr,
       coalesce(v.agreement, 0)::integer as retrieval_agreement_count,
       prev.run_id as previous_run_id,
       coalesce(pair.paired, 0)::integer as paired_count,
       coalesce(pair.improved, 0)::integer as improved_count,
       coalesce(pair.regressed, 0)::integer as regressed_count,
       case when judge.changed is not true then roi.sign_test_p(pair.improved, pair.regressed) end
         as paired_p_value,
       coalesce(u.input_tokens, 0)::bigint as input_tokens,
       coalesce(u.output_tokens, 0)::bigint as output_tokens,
       u.cost_usd,
       coalesce(u.own_key_calls, 0)::integer as own_key_calls,
       v.median_rank as source_median_rank,
       coalesce(cb.checked, 0)::integer as closed_book_checked,
       coalesce(cb.correct, 0)::integer as closed_book_correct,
       coalesce(cb.agreement, 0)::integer as closed_book_agreement_count,
       r.recall_function,
       r.embedding_model,
       coalesce(v.regenerated, 0)::integer as questions_regenerated,
       coalesce(v.templated, 0)::integer as template_questions,
       judge.fingerprint as judge_fingerprint,
       judge.changed as judge_changed,
       coalesce(jc.withheld, 0)::integer as withheld_checked,
       coalesce(jc.withheld_answered, 0)::integer as withheld_answered_count,
       coalesce(jc.reversed, 0)::integer as order_checked,
       coalesce(jc.reversed_agreed, 0)::integer as order_agreement_count,
       r.embedding_minilm_model,
       cal.run_id is not null as judge_calibrated,
       round(cal.exclusive_tp::numeric / nullif(cal.exclusive_tp + cal.exclusive_fn, 0), 4) as judge_sensitivity,
       round(cal.exclusive_tn::numeric / nullif(cal.exclusive_tn + cal.exclusive_fp, 0), 4) as judge_specificity,
       cr.estimate as exclusive_rate_corrected,
       cr.low as exclusive_rate_corrected_low,
       cr.high as exclusive_rate_corrected_high,
       case
         when r.mode = 'deterministic' then
           'no corrected rate in deterministic mode: the strict retrieval check is a stated bound (the '
           'caveat), not a judge''s estimate to correct'
         when position(' + ' in judge.fingerprint) > 0 then
           'no corrected rate: the run was judged by more than one judge, and a calibration measures one'
         when cal.run_id is null and coalesce(v.judged, 0) = 0 then 'no judged question to correct'
         else coalesce(cr.note, format('corrected for the judge''s measured error on its newest calibration '
                                       '(%s cases)', cal.case_count))
       end as correction_note,
       cal.case_count as judge_calibration_cases
from roi.runs r
left join roi.run_closures c on c.run_id = r.id
left join lateral (
  select count(*) filter (where not x.skipped) as judged,
         count(*) filter (where x.skipped) as skipped,
         count(*) filter (where x.with_memory) as with_memory,
         count(*) filter (where x.without_memory) as without_memory,
         count(*) filter (where x.with_memory and not x.without_memory) as exclusive,
         count(*) filter (where not x.skipped and o.source_rank is not null) as surfaced,
         round(avg(coalesce(1.0 / o.source_rank, 0)) filter (where not x.skipped), 4) as mrr,
         count(*) filter (where x.with_memory = (o.source_rank is not null)) as agreement,
         percentile_disc(0.5) within group (order by o.source_rank)
           filter (where not x.skipped and o.source_rank is not null) as median_rank,
         count(*) filter (where o.question_origin = 'retry') as regenerated,
         count(*) filter (where o.question_origin = 'template') as templated
  from roi.verdicts x
  left join roi.recall_outcomes o on o.run_id = x.run_id and o.probe_id = x.probe_id
  where x.run_id = r.id
) v on true
left join lateral (
  select p.id as run_id, p.mode from roi.runs p join roi.run_closures pc on pc.run_id = p.id
  where p.owner_id = r.owner_id and p.started_at < r.started_at
  order by p.started_at desc
  limit 1
) prev on true
left join lateral (
  select f.fingerprint,
         case when prev.run_id is null then false else f.fingerprint <> pf.fingerprint end as changed
  from (select roi.run_judge_fingerprint(r.id, r.mode) as fingerprint) f
  cross join lateral (select roi.run_judge_fingerprint(prev.run_id, prev.mode) as fingerprint) pf
) judge on true
left join lateral (
  select count(*) as paired,
         count(*) filter (where (a.with_memory and not a.without_memory)
                            and not (b.with_memory and not b.without_memory)) as improved,
         count(*) filter (where not (a.with_memory and not a.without_memory)
                            and (b.with_memory and not b.without_memory)) as regressed
  from roi.verdicts a
  join roi.verdicts b on b.run_id = prev.run_id and b.probe_id = a.probe_id and not b.skipped
  where a.run_id = r.id and not a.skipped
) pair on prev.run_id is not null
left join lateral (
  select sum(e.input_tokens) as input_tokens,
         sum(e.output_tokens) as output_tokens,
         sum(e.cost_usd) as cost_usd,
         count(*) filter (where e.byok) as own_key_calls
  from public.usage_events e
  where e.run_id = r.id and e.owner_id = r.owner_id
) u on true
left join lateral (
  select count(*) as checked,
         count(*) filter (where b.bare_correct) as correct,
         count(*) filter (where b.bare_correct = x.without_memory) as agreement
  from roi.closed_book_results b
  left join roi.verdicts x on x.run_id = b.run_id and x.probe_id = b.probe_id and not x.skipped
  where b.run_id = r.id
) cb on true
left join lateral (
  select count(*) filter (where j.kind = 'judge_withheld') as withheld,
         count(*) filter (where j.kind = 'judge_withheld' and j.with_memory) as withheld_answered,
         count(*) filter (where j.kind = 'judge_reversed' and x.probe_id is not null) as reversed,
         count(*) filter (where j.kind = 'judge_reversed' and j.with_memory = x.with_memory
                            and j.without_memory = x.without_memory) as reversed_agreed
  from roi.judge_check_results j
  left join roi.verdicts x on x.run_id = j.run_id and x.probe_id = j.probe_id and not x.skipped
  where j.run_id = r.id
) jc on true
left join lateral (
  select r.id as run_id, c.case_count, c.exclusive_tp, c.exclusive_fn, c.exclusive_tn, c.exclusive_fp
  from roi.judge_calibrations c
  where r.mode = 'llm' and c.judge_fingerprint = judge.fingerprint
  order by c.id desc
  limit 1
) cal on true
left join lateral roi.judge_corrected_rate(v.exclusive::integer, v.judged::integer, cal.exclusive_tp,
                                           cal.exclusive_fn, cal.exclusive_tn, cal.exclusive_fp) cr
  on r.mode = 'llm'
where r.owner_id = (select auth.uid());

-- The tile is the one home of its wording: its state, its hint and, in deterministic mode, the
-- sentence saying which figure the strict retrieval check bounds and in which direction. The
-- dashboard, the MCP server and the demo render these columns; none of them re-derives them.
-- States: invite (no run yet), judging (the latest run is still being judged), no_score (the latest
-- run finished with every question skipped: no rate, even after an earlier score, which the trend
-- keeps), ready (a score). `scored_run_id` is the one home of "the scored run": the newest complete
-- run with a judged question, unless the latest run is no_score. `headline`, `explanation` and
-- `note` are the tile's remaining words (the invite's explanation quotes roi.settings.pool_target);
-- `judge_note` says whether the scored run's judge is calibrated and, if so, the corrected rate
-- (null in deterministic mode, where `caveat` speaks).
-- It names the run list's columns it was defined with: `select *` in a view is expanded once, when
-- the view is created, and the run list has grown since.
create or replace view public.roi_benchmark_tile with (security_invoker = true) as
with me as (
  select auth.uid() as owner_id where auth.uid() is not null
), latest as (
  select run_id, started_at, finished_at, status, mode, probe_count, judged_count, skipped_count,
         with_memory_count, without_memory_count, exclusive_count, exclusive_rate, exclusive_rate_low,
         exclusive_rate_high
  from public.roi_benchmark_runs order by started_at desc limit 1
), scored as (
  select run_id, started_at, finished_at, status, mode, probe_count, judged_count, skipped_count,
         with_memory_count, without_memory_count, exclusive_count, exclusive_rate, exclusive_rate_low,
         exclusive_rate_high, judge_calibrated, judge_sensitivity, judge_specificity,
         exclusive_rate_corrected, exclusive_rate_corrected_low, exclusive_rate_corrected_high,
         correction_note, judge_calibration_cases
  from public.roi_benchmark_runs
  where status = 'complete' and judged_count > 0
    and not exists (select from latest l where l.status = 'complete' and l.judged_count = 0)
  order by started_at desc limit 1
), trend as (
  select array_agg(exclusive_rate order by started_at) as rates
  from public.roi_benchmark_runs where status = 'complete' and judged_count > 0
)
select case when latest.run_id is null then 'invite'
            when latest.status = 'judging' then 'judging'
            when scored.run_id is null then 'no_score'
            else 'ready' end as state,
       scored.exclusive_rate,
       scored.exclusive_rate_low,
       scored.exclusive_rate_high,
       scored.exclusive_count,
       scored.judged_count,
       case
         when latest.run_id is null then
           'Ask your agent to run benchmark_memory to see what only your memory knows.'
         when scored.run_id is null and latest.status = 'judging' then
           format('Judging %s questions from your memory…', latest.probe_count)
         when scored.run_id is null then
           format('None of the latest run''s %s questions could be judged: ask your agent to run '
                  'benchmark_memory again.', latest.probe_count)
         else
           format('%s of %s questions only memory answered', scored.exclusive_count, scored.judged_count)
       end as hint,
       latest.run_id as latest_run_id,
       latest.started_at as latest_run_at,
       coalesce(trend.rates, '{}') as trend,
       case when scored.mode = 'deterministic' then
         'In deterministic mode only the source memory counts as an answer, so search success is if '
         'anything under-counted, and no question is assumed answerable without memory, so this rate '
         'is an upper bound on what only memory knows.'
       end as caveat,
       scored.run_id as scored_run_id,
       case
         when latest.run_id is null then 'No benchmark yet'
         when scored.run_id is null and latest.status = 'judging' then 'Judging…'
         when scored.run_id is null and trend.rates is null then 'No score yet'
         when scored.run_id is null then 'No score for the latest run'
       end as headline,
       case
         when latest.run_id is null then
           format('It asks about %s questions drawn from your own decisions, gotchas and conventions, '
                  'and counts the ones your memory answers that a bare agent could not.',
                  (select s.pool_target from roi.settings s))
         when scored.run_id is null and latest.status = 'judging' then
           'Your first score appears here once the verdicts land, usually within a minute or two.'
         when scored.run_id is null and trend.rates is not null then
           'Earlier scores stay in the trend and the run list; the tile shows only the latest run''s.'
         when scored.run_id is not null then
           'The share of questions from your own memory that memory answered and a bare agent could not.'
       end as explanation,
       case when scored.run_id is not null and latest.status = 'judging' then
         format('A newer run of %s questions is being judged.', latest.probe_count)
       end as note,
       case
         when scored.run_id is null or scored.mode = 'deterministic' then null
         when scored.exclusive_rate_corrected is not null then
           format('judge calibrated on %s cases (sensitivity %s%%, specificity %s%%): corrected rate %s%% '
                  '(95%% %s–%s%%)', scored.judge_calibration_cases, round(100 * scored.judge_sensitivity),
                  round(100 * scored.judge_specificity), round(100 * scored.exclusive_rate_corrected),
                  round(100 * scored.exclusive_rate_corrected_low),
                  round(100 * scored.exclusive_rate_corrected_high))
         when scored.judge_calibrated and scored.judge_sensitivity + scored.judge_specificity - 1 < 0.3 then
           format('judge calibrated on %s cases (sensitivity %s%%, specificity %s%%): too close to chance '
                  'to correct, so the rate above is only what the judge said',
                  scored.judge_calibration_cases, round(100 * scored.judge_sensitivity),
                  round(100 * scored.judge_specificity))
         when scored.judge_calibrated then
           format('judge calibrated on %s cases: %s', scored.judge_calibration_cases, scored.correction_note)
         when position('more than one judge' in scored.correction_note) > 0 then scored.correction_note
         else 'judge not calibrated: an operator runs zm-roi judge-check --record'
       end as judge_note
from me
left join latest on true
left join scored on true
left join trend on true;

-- ============================================================================================
-- Triggers, policies and grants
-- ============================================================================================
create trigger judge_calibrations_are_append_only before update or delete on roi.judge_calibrations
  for each row execute function roi.forbid_result_change();
create trigger judge_calibrations_refuse_truncate before truncate on roi.judge_calibrations
  for each statement execute function roi.forbid_result_truncate();

alter table roi.judge_calibrations enable row level security;

-- A calibration is the operator's, not an owner's: an owner reads those of the judges that judged
-- their runs (counts only), so the runs view can correct their rates; no other. Nobody but the
-- database owner (the operator's `zm-roi judge-check --record`) writes one.
create policy "Owners read the calibrations of the judges of their runs" on roi.judge_calibrations
  for select to authenticated
  using (judge_fingerprint in (select j.judge_fingerprint from roi.run_judges j
                               where j.owner_id = (select auth.uid())));

grant select on roi.judge_calibrations to authenticated;
grant execute on function roi.judge_corrected_rate(integer, integer, integer, integer, integer, integer)
  to authenticated;
