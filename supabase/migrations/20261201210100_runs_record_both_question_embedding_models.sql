-- A run recorded the embedding model of its questions' first semantic leg only; since the MiniLM leg
-- (20261201180000) a question carries two embeddings, and the run records the model of each leg its
-- recall took (issue 22: every row records its models). Runs before this one keep null: which
-- MiniLM model their questions carried was not recorded. The view gains the column last, so every
-- client reading the columns it knew reads them unchanged.

alter table roi.runs add column embedding_minilm_model text;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced, and either record strict verdicts at once (deterministic) or queue one judgment per
-- probe (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged and closed before this returns, so it is never pending (no
-- pending_runs row is written only to be deleted); benchmark_memory() rotates after it at once.
create or replace function roi.start_run(mode text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  new_run uuid;
  run_started timestamptz;
  probe_total integer;
  question_model text;
  question_minilm_model text;
  judged integer;
begin
  select count(*), mode() within group (order by p.question_embedding_model),
         mode() within group (order by p.question_embedding_minilm_model)
  into probe_total, question_model, question_minilm_model
  from roi.probes p where p.owner_id = (select auth.uid()) and p.state = 'active';
  -- clock_timestamp(), not now(): runs started in one transaction still order by when they began.
  insert into roi.runs (owner_id, mode, probe_count, started_at, recall_function, embedding_model,
                        embedding_minilm_model)
  values ((select auth.uid()), mode, probe_total, clock_timestamp(),
          (select s.recall_function from roi.settings s),
          case when (select s.recall_embeddings > 0 from roi.settings s) then question_model end,
          case when (select s.recall_embeddings > 1 from roi.settings s) then question_minilm_model end)
  returning id, started_at into new_run, run_started;
  if mode <> 'deterministic' then
    insert into roi.pending_runs (run_id, owner_id, started_at) values (new_run, (select auth.uid()), run_started);
  end if;

  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select new_run, p.id, p.owner_id,
         coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}'),
         coalesce(jsonb_agg(jsonb_build_object(
           'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
           'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
           filter (where r.memory_id is not null), '[]')
  from roi.probes p
  left join lateral roi.configured_recall(p.question, p.pin_project_id, p.pin_team_id, 10,
                                          p.source_scope = 'personal', p.question_embedding,
                                          p.question_embedding_minilm) r on true
  where p.owner_id = (select auth.uid()) and p.state = 'active'
  group by p.id, p.owner_id;

  update roi.probes p set runs_served = p.runs_served + 1
  where p.owner_id = (select auth.uid()) and p.state = 'active';

  if mode = 'deterministic' then
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, p.memory_id = any (rc.surfaced_ids), false,
           'deterministic'
    from roi.recalls rc join roi.probes p on p.id = rc.probe_id
    where rc.run_id = new_run;
    get diagnostics judged = row_count;
    -- Every probe of the run has its verdict: the run is complete (roi.close_run_if_done's test,
    -- without its lock, its recount or a judging queue to clear, none of which a run nobody else
    -- can see yet needs).
    if judged >= probe_total then
      insert into roi.run_closures (run_id, owner_id, reason) values (new_run, (select auth.uid()), 'complete');
    else
      perform roi.close_run_if_done(new_run);
    end if;
  else
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select 'judge', rc.run_id, rc.probe_id, rc.owner_id from roi.recalls rc where rc.run_id = new_run;
    perform pg_notify('roi_work', 'judge');
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total);
end
$$;

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
-- judged verdict unchanged.
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
       r.embedding_minilm_model
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
where r.owner_id = (select auth.uid());
