-- The CI gate and the growth hint (issue 34, items 1 and 2).
--
-- The gate (`zm-roi gate --no-regression`) compares a run with its previous comparable run: the
-- newest earlier run that completed with a judged question, which the run list's previous_run_id
-- (the previous closed run) is not always. public.roi_benchmark_comparison() gives that pairing.
--
-- The tile says how much knowledge was learned and invalidated since the latest run started, and
-- past roi.settings.rerun_hint_growth (default 20, the default pool target) asks for a new run. Three
-- partial indexes keep the count of invalidated memories a range scan per layer, as the live ones do
-- for the memories learned.

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table roi.settings add column rerun_hint_growth integer not null default 20
  check (rerun_hint_growth >= 1);

-- ============================================================================================
-- Indexes
-- ============================================================================================
create index memories_project_invalidated_idx on public.memories (project_id, invalidated_at)
  where invalidated_at is not null and scope = 'project';
create index memories_team_invalidated_idx on public.memories (team_id, invalidated_at)
  where invalidated_at is not null and scope = 'team';
create index memories_personal_invalidated_idx on public.memories (author_id, invalidated_at)
  where invalidated_at is not null and scope = 'personal';

-- ============================================================================================
-- Functions and views
-- ============================================================================================
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
-- States: invite (no run yet), judging (the latest run is still being judged), no_score (the latest
-- run finished with every question skipped: no rate, even after an earlier score, which the trend
-- keeps), ready (a score). `scored_run_id` is the one home of "the scored run": the newest complete
-- run with a judged question, unless the latest run is no_score. `headline`, `explanation` and
-- `note` are the tile's remaining words (the invite's explanation quotes roi.settings.pool_target).
-- It names the run list's columns it was defined with: `select *` in a view is expanded once, when
-- the view is created, and the run list has grown since.
-- Since the latest run started: knowledge memories learned (memories_gained_since_run) and
-- invalidated (memories_lost_since_run) that the caller can see, and once together they reach
-- roi.settings.rerun_hint_growth, `rerun_hint` says to run the benchmark again (never while a run is
-- being judged: that run is the new measurement). Null before the first run.
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
), growth as (
  select g.gained, g.lost, g.gained + g.lost >= (select s.rerun_hint_growth from roi.settings s) as past
  from latest cross join lateral roi.knowledge_growth_since(latest.started_at) g
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
