-- The tile view is the one home of the tile's wording: its state, its hint and, in deterministic
-- mode, the sentence saying which figure the strict retrieval check bounds and in which direction.
-- The dashboard, the MCP server and the demo render these columns; none of them re-derives them.
--
-- Fixes a finished run whose every question was skipped (the judge failed for all of them): it left
-- the tile in state `ready` with "Judging N questions…" forever. It is now `no_score`, with a hint
-- that says what happened and what to do.

-- ============================================================================================
-- Views (security_invoker: they see exactly what the caller's policies allow)
-- ============================================================================================
-- States: invite (no run yet), judging (the latest run is still being judged), no_score (the latest
-- run finished and no run has a judged question: every question was skipped), ready (a score).
-- `create or replace view` may only append columns: `caveat` goes last.
create or replace view public.roi_benchmark_tile with (security_invoker = true) as
with me as (
  select auth.uid() as owner_id where auth.uid() is not null
), latest as (
  select * from public.roi_benchmark_runs order by started_at desc limit 1
), scored as (
  select * from public.roi_benchmark_runs
  where status = 'complete' and judged_count > 0
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
           format('%s of %s questions a bare agent could not answer', scored.exclusive_count,
                  scored.judged_count)
       end as hint,
       latest.run_id as latest_run_id,
       latest.started_at as latest_run_at,
       coalesce(trend.rates, '{}') as trend,
       case when scored.mode = 'deterministic' then
         'In deterministic mode only the source memory counts as an answer, so search success is if '
         'anything under-counted, and no question is assumed answerable without memory, so this rate '
         'is an upper bound on what only memory knows.'
       end as caveat
from me
left join latest on true
left join scored on true
left join trend on true;

-- ============================================================================================
-- Grants (unchanged: replacing a view keeps them; restated so this file reads on its own)
-- ============================================================================================
revoke all on public.roi_benchmark_tile from anon, authenticated;
grant select on public.roi_benchmark_tile to authenticated;
