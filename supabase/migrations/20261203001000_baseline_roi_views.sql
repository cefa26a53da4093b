-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The ROI benchmark's views: the three views clients read (the caller's runs, the breakdown by kind
-- and scope, the tile) and the paired comparison the CI gate decides on. Aggregates only,
-- security_invoker, so each reads exactly what the caller's policies on the tables of
-- 30_roi_probes_runs_and_work.sql and 31_roi_results.sql allow. The statistics they report:
-- 60_roi_statistics.sql.

-- ============================================================================================
-- Views (security_invoker: they see exactly what the caller's policies allow)
-- ============================================================================================
-- The caller's runs, newest columns last (a view only grows: clients bind to the earlier ones).
-- Aggregates only. Per run: the headline (exclusive rate with its Wilson interval); the retrieval
-- figures that tell a search miss from a knowledge gap (source surfaced, MRR, median rank, and how
-- often the judge's with_memory agrees with the source surfacing); the paired comparison with the
-- owner's previous closed run that a spending cap did not stop (status aborted_budget: a run cut
-- short is compared with nothing; improved, regressed, exact sign test; no p-value when the judge
-- changed, since the two runs' verdicts were not made the same way); what it cost (tokens, dollars
-- by litellm's price map, calls on the owner's own key); the closed-book spot-check; what it
-- measured (recall function, embedding models of its questions: embedding_minilm_model, the last
-- column, is the third leg's); and the judge checks: questions the gate sent back to the model or to their template, who judged (judge_fingerprint, and
-- judge_changed against the previous run; null while either run has no judged verdict), how often the
-- judge still said answerable with the source withheld, and how often reversing the results left a
-- judged verdict unchanged; last, the judge's measured error (docs/judge-calibration.md): whether
-- the newest `zm-roi judge-check --record` of the run's judge exists, its sensitivity and specificity
-- on the exclusive label, the exclusive rate corrected for them with its 95% interval
-- (roi.judge_corrected_rate), why there is none when there is none, and the calibration's size;
-- then whether the owner's schedule started the run (`scheduled`).
create view public.roi_benchmark_runs with (security_invoker = true) as
select r.id as run_id,
       r.started_at,
       c.closed_at as finished_at,
       case when c.run_id is null then 'judging' when c.reason = 'aborted_budget' then 'aborted_budget'
            else 'complete' end as status,
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
       cal.case_count as judge_calibration_cases,
       exists (select from roi.scheduled_runs sr where sr.run_id = r.id) as scheduled
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
  where p.owner_id = r.owner_id and p.started_at < r.started_at and pc.reason <> 'aborted_budget'
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

-- The headline split by the source's kind and by its scope (the layer it lives in). Per dimension
-- the rows add up to the run's totals. Aggregates only.
create view public.roi_benchmark_breakdown with (security_invoker = true) as
select x.run_id,
       d.dimension,
       d.value,
       (count(*) filter (where not x.skipped))::integer as judged_count,
       (count(*) filter (where x.with_memory))::integer as with_memory_count,
       (count(*) filter (where x.without_memory))::integer as without_memory_count,
       (count(*) filter (where x.with_memory and not x.without_memory))::integer as exclusive_count,
       round((count(*) filter (where x.with_memory and not x.without_memory))::numeric
             / nullif(count(*) filter (where not x.skipped), 0), 4) as exclusive_rate
from roi.verdicts x
join roi.recall_outcomes o on o.run_id = x.run_id and o.probe_id = x.probe_id
cross join lateral (values ('kind', o.source_kind), ('scope', o.source_scope)) d (dimension, value)
where x.owner_id = (select auth.uid())
group by x.run_id, d.dimension, d.value;

-- How much of the caller's knowledge changed since `since` (the latest run's start), for the tile's
-- rerun hint: live decision/gotcha/convention memories created after it (gained), and those created
-- by then and invalidated after it (lost). As the caller, so RLS applies; one layer at a time, each a
-- range of one index on (layer, time), so the tile, read often, costs a few short index scans however
-- large the layers are.
create function roi.knowledge_growth_since(since timestamptz) returns table (gained bigint, lost bigint)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  projects uuid[] := array(select public.caller_project_ids());
  teams uuid[] := array(select public.caller_team_ids());
begin
  return query select
    (select count(*) from public.memories m
     where m.scope = 'personal' and m.invalidated_at is null and m.author_id = (select auth.uid())
       and m.created_at > since and m.kind in ('decision', 'gotcha', 'convention'))
    + (select count(*) from public.memories m
       where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
         and m.created_at > since and m.kind in ('decision', 'gotcha', 'convention'))
    + (select count(*) from public.memories m
       where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
         and m.created_at > since and m.kind in ('decision', 'gotcha', 'convention')),
    (select count(*) from public.memories m
     where m.scope = 'personal' and m.invalidated_at > since and m.author_id = (select auth.uid())
       and m.created_at <= since and m.kind in ('decision', 'gotcha', 'convention'))
    + (select count(*) from public.memories m
       where m.scope = 'project' and m.invalidated_at > since and m.project_id = any (projects)
         and m.created_at <= since and m.kind in ('decision', 'gotcha', 'convention'))
    + (select count(*) from public.memories m
       where m.scope = 'team' and m.invalidated_at > since and m.team_id = any (teams)
         and m.created_at <= since and m.kind in ('decision', 'gotcha', 'convention'));
end
$$;

-- The tile is the one home of its wording: its state, its hint and, in deterministic mode, the
-- sentence saying which figure the strict retrieval check bounds and in which direction. The
-- dashboard, the MCP server and the demo render these columns; none of them re-derives them.
-- States: invite (no run yet), judging (the latest run is still being judged), aborted_budget (a
-- spending cap stopped the latest run: the words say what it spent; an earlier score, if any, stays
-- with a note), no_score (the latest run finished with every question skipped: no rate, even after
-- an earlier score, which the trend keeps), ready (a score). `scored_run_id` is the one home of "the scored run": the newest complete
-- run with a judged question, unless the latest run is no_score. `headline`, `explanation` and
-- `note` are the tile's remaining words (the invite's explanation quotes roi.settings.pool_target);
-- `judge_note` says whether the scored run's judge is calibrated and, if so, the corrected rate
-- (null in deterministic mode, where `caveat` speaks).
-- It names the run list's columns it was defined with: `select *` in a view is expanded once, when
-- the view is created, and the run list has grown since.
-- Since the latest run started: knowledge memories learned (memories_gained_since_run) and
-- invalidated (memories_lost_since_run) that the caller can see, and once together they reach
-- roi.settings.rerun_hint_growth, `rerun_hint` says to run the benchmark again (never while a run is
-- being judged: that run is the new measurement). Null before the first run.
create view public.roi_benchmark_tile with (security_invoker = true) as
with me as (
  select auth.uid() as owner_id where auth.uid() is not null
), latest as (
  select run_id, started_at, finished_at, status, mode, probe_count, judged_count, skipped_count,
         with_memory_count, without_memory_count, exclusive_count, exclusive_rate, exclusive_rate_low,
         exclusive_rate_high, cost_usd
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
), growth as (
  select g.gained, g.lost, g.gained + g.lost >= (select s.rerun_hint_growth from roi.settings s) as past
  from latest cross join lateral roi.knowledge_growth_since(latest.started_at) g
)
select case when latest.run_id is null then 'invite'
            when latest.status = 'judging' then 'judging'
            when latest.status = 'aborted_budget' then 'aborted_budget'
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
         when scored.run_id is null and latest.status = 'aborted_budget' then
           format('The latest run stopped at the spending cap after $%s, with %s of %s questions judged.',
                  round(coalesce(latest.cost_usd, 0), 4), latest.judged_count, latest.probe_count)
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
         when scored.run_id is null and latest.status = 'aborted_budget' then 'Stopped at the spending cap'
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
         when scored.run_id is null and latest.status = 'aborted_budget' then
           'A run a spending cap cut short is never scored or compared. Raise the cap, or wait for the next '
           'month, and ask your agent to run benchmark_memory again.'
         when scored.run_id is null and trend.rates is not null then
           'Earlier scores stay in the trend and the run list; the tile shows only the latest run''s.'
         when scored.run_id is not null then
           'The share of questions from your own memory that memory answered and a bare agent could not.'
       end as explanation,
       case when scored.run_id is not null and latest.status = 'judging' then
         format('A newer run of %s questions is being judged.', latest.probe_count)
            when scored.run_id is not null and latest.status = 'aborted_budget' then
         format('The latest run stopped at the spending cap after $%s (%s of %s questions judged); this '
                'score is from the run before.',
                round(coalesce(latest.cost_usd, 0), 4), latest.judged_count, latest.probe_count)
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
       end as judge_note,
       growth.gained::integer as memories_gained_since_run,
       growth.lost::integer as memories_lost_since_run,
       case when growth.past and latest.status <> 'judging' then
         format('%s since your last run: run the benchmark again',
                concat_ws(' and ',
                          case when growth.gained > 0 then
                            format('%s %s learned', growth.gained,
                                   case when growth.gained = 1 then 'memory' else 'memories' end) end,
                          case when growth.lost > 0 and growth.gained > 0 then format('%s invalidated', growth.lost)
                               when growth.lost > 0 then
                                 format('%s %s invalidated', growth.lost,
                                        case when growth.lost = 1 then 'memory' else 'memories' end) end))
       end as rerun_hint
from me
left join latest on true
left join scored on true
left join trend on true
left join growth on true;

-- The paired comparison the CI gate decides on (`zm-roi gate --no-regression`): the caller's run
-- against its previous comparable run, the newest earlier one that completed with a judged question.
-- Unlike the run list's previous_run_id (the previous closed run), it passes over a run still being
-- judged, one whose every question was skipped, and one stopped by a spending cap (any status but
-- complete): none of them says what the recall did. judge_changed when the two runs' judges differ,
-- and then no p-value, as in the run list. Null for a run the caller cannot see.
create function public.roi_benchmark_comparison(target_run uuid) returns jsonb
  language sql stable security invoker set search_path = ''
as $$
  select jsonb_build_object(
           'run_id', r.run_id,
           'previous_run_id', p.run_id,
           'paired_count', coalesce(pair.paired, 0),
           'improved_count', coalesce(pair.improved, 0),
           'regressed_count', coalesce(pair.regressed, 0),
           'paired_p_value', case when p.judge_fingerprint = r.judge_fingerprint
                                  then roi.sign_test_p(pair.improved, pair.regressed) end,
           'judge_fingerprint', r.judge_fingerprint,
           'previous_judge_fingerprint', p.judge_fingerprint,
           'judge_changed', case when p.run_id is not null
                                 then p.judge_fingerprint is distinct from r.judge_fingerprint end)
  from public.roi_benchmark_runs r
  left join lateral (
    select q.run_id, q.judge_fingerprint from public.roi_benchmark_runs q
    where q.started_at < r.started_at and q.status = 'complete' and q.judged_count > 0
    order by q.started_at desc
    limit 1
  ) p on true
  left join lateral (
    select count(*) as paired,
           count(*) filter (where (a.with_memory and not a.without_memory)
                              and not (b.with_memory and not b.without_memory)) as improved,
           count(*) filter (where not (a.with_memory and not a.without_memory)
                              and (b.with_memory and not b.without_memory)) as regressed
    from roi.verdicts a
    join roi.verdicts b on b.run_id = p.run_id and b.probe_id = a.probe_id and not b.skipped
    where a.run_id = r.run_id and not a.skipped
  ) pair on p.run_id is not null
  where r.run_id = target_run
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.knowledge_growth_since(timestamptz) from public;
grant execute on function roi.knowledge_growth_since(timestamptz) to authenticated;
revoke execute on function public.roi_benchmark_comparison(uuid) from public, anon;
grant execute on function public.roi_benchmark_comparison(uuid) to authenticated;
revoke all on public.roi_benchmark_runs, public.roi_benchmark_breakdown, public.roi_benchmark_tile
  from anon, authenticated;
grant select on public.roi_benchmark_runs, public.roi_benchmark_breakdown, public.roi_benchmark_tile
  to authenticated;
