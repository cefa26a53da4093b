-- The tile view is the one home of the tile's words and of "the scored run". Changes:
-- - The hint states what its count is: "N of M questions only memory answered" (the exclusive count
--   of the judged questions). "a bare agent could not answer" read as a claim about the bare agent,
--   which was false whenever the judge said neither side answered.
-- - A finished run with every question skipped is `no_score` even after an earlier scored run: no
--   rate, count or caveat (an older rate would pose as the latest measurement), `latest_run_id` is
--   that run, `scored_run_id` null; the trend and the run list keep the earlier scores.
-- - New columns, appended (a replaced view may only grow): `scored_run_id` (clients pick the run the
--   diagnostics explain by it instead of re-deriving it), and the words the clients used to write
--   themselves: `headline` (the large line of a state without a rate), `explanation` (the sentence
--   under it; the invite's quotes roi.settings.pool_target) and `note` (a newer run is being judged).

-- ============================================================================================
-- Views (security_invoker: they see exactly what the caller's policies allow)
-- ============================================================================================
-- States: invite (no run yet), judging (the latest run is still being judged), no_score (the latest
-- run finished with every question skipped), ready (a score).
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
         exclusive_rate_high
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
       end as note
from me
left join latest on true
left join scored on true
left join trend on true;

-- ============================================================================================
-- Grants (unchanged: replacing a view keeps them; restated so this file reads on its own)
-- ============================================================================================
revoke all on public.roi_benchmark_tile from anon, authenticated;
grant select on public.roi_benchmark_tile to authenticated;
