-- The runs view says what each run measured: which recall function produced it and the embedding
-- model of its questions (null: the lexical leg alone). Appended at the end of the view, so every
-- client that binds to the earlier columns keeps working, and a trend point says what it measured.

-- ============================================================================================
-- Views
-- ============================================================================================
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
       r.recall_function,
       r.embedding_model
from roi.runs r
left join roi.run_closures c on c.run_id = r.id
left join lateral (
  select count(*) filter (where not x.skipped) as judged,
         count(*) filter (where x.skipped) as skipped,
         count(*) filter (where x.with_memory) as with_memory,
         count(*) filter (where x.without_memory) as without_memory,
         count(*) filter (where x.with_memory and not x.without_memory) as exclusive
  from roi.verdicts x where x.run_id = r.id
) v on true
where r.owner_id = (select auth.uid());
