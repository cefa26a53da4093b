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
       coalesce(v.surfaced, 0)::integer as source_surfaced_count,
       v.mrr as source_mrr,
       coalesce(v.agreement, 0)::integer as retrieval_agreement_count,
       prev.run_id as previous_run_id,
       coalesce(pair.paired, 0)::integer as paired_count,
       coalesce(pair.improved, 0)::integer as improved_count,
       coalesce(pair.regressed, 0)::integer as regressed_count,
       roi.sign_test_p(pair.improved, pair.regressed) as paired_p_value,
       coalesce(u.input_tokens, 0)::bigint as input_tokens,
       coalesce(u.output_tokens, 0)::bigint as output_tokens,
       u.cost_usd,
       coalesce(u.own_key_calls, 0)::integer as own_key_calls,
       v.median_rank as source_median_rank,
       coalesce(cb.checked, 0)::integer as closed_book_checked,
       coalesce(cb.correct, 0)::integer as closed_book_correct,
       coalesce(cb.agreement, 0)::integer as closed_book_agreement_count,
       r.recall_function,
       r.embedding_model
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
           filter (where not x.skipped and o.source_rank is not null) as median_rank
  from roi.verdicts x
  left join roi.recall_outcomes o on o.run_id = x.run_id and o.probe_id = x.probe_id
  where x.run_id = r.id
) v on true
left join lateral (
  select p.id as run_id from roi.runs p join roi.run_closures pc on pc.run_id = p.id
  where p.owner_id = r.owner_id and p.started_at < r.started_at
  order by p.started_at desc
  limit 1
) prev on true
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
where r.owner_id = (select auth.uid());
