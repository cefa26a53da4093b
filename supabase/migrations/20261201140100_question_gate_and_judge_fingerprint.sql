-- Judge checks that need no queue (issue 20, items 1 and 4).
--
-- The question gate: the worker checks each question it writes (python/zm_roi/prompts.py,
-- gate_refusal); a question that fails goes back to the model once with the reason, and failing again
-- the probe takes its template question. roi.probes records where its question came from and which
-- generator (model and prompt hash) wrote it; recall_outcomes copies the origin, text-free, per run, so
-- the owner's runs view can count rewritten and templated questions without reading a probe.
--
-- The judge fingerprint: the worker passes its judge model and the judge prompt's hash with each
-- verdict (roi.record_verdict's new defaulted argument); roi.run_judges keeps the distinct
-- fingerprints of each run. A deterministic run's fingerprint is 'deterministic:retrieval-check'.
-- The runs view gains questions_regenerated, template_questions, judge_fingerprint and judge_changed,
-- and gives no paired p-value when the judge changed: the verdicts were not made the same way.

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table roi.probes
  add column question_origin text check (question_origin in ('model', 'retry', 'template')),
  add column generator_fingerprint text;

alter table roi.recall_outcomes
  add column question_origin text;

-- The judges of a run: model and judge-prompt hash, one row per distinct fingerprint. No memory text,
-- so the owner reads it, as they read verdicts. Append-only.
create table roi.run_judges (
  run_id uuid not null references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  judge_fingerprint text not null check (length(judge_fingerprint) between 1 and 300),
  recorded_at timestamptz not null default now(),
  primary key (run_id, judge_fingerprint)
);
create index run_judges_owner_idx on roi.run_judges (owner_id);

create trigger run_judges_are_append_only before update or delete on roi.run_judges
  for each row execute function roi.forbid_result_change();
create trigger run_judges_refuse_truncate before truncate on roi.run_judges
  for each statement execute function roi.forbid_result_truncate();

-- ============================================================================================
-- Functions
-- ============================================================================================

-- After recalls are recorded: keep the text-free outcome of each (source rank, kind, scope), and in
-- LLM mode queue up to roi.settings.closed_book_checks of the run's probes for the closed-book
-- spot-check, picked at random. Runs as whoever recorded the recalls (the owner, inside the benchmark).
create or replace function roi.note_recall_outcomes() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  checks integer := (select s.closed_book_checks from roi.settings s);
  queued integer;
begin
  insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank,
                                   question_origin)
  select n.run_id, n.probe_id, n.owner_id, p.source_kind, p.source_scope,
         array_position(n.surfaced_ids, p.memory_id), p.question_origin
  from recorded n join roi.probes p on p.id = n.probe_id
  on conflict (run_id, probe_id) do nothing;

  if checks > 0 then
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select 'closed_book', x.run_id, x.probe_id, x.owner_id
    from (
      select n.run_id, n.probe_id, n.owner_id,
             row_number() over (partition by n.run_id order by random()) as pick,
             (select count(*) from roi.work q where q.run_id = n.run_id and q.kind = 'closed_book')
               + (select count(*) from roi.closed_book_results b where b.run_id = n.run_id) as already
      from recorded n join roi.runs r on r.id = n.run_id
      where r.mode = 'llm'
    ) x
    where x.pick + x.already <= checks
    on conflict do nothing;
    get diagnostics queued = row_count;
    if queued > 0 then
      perform pg_notify('roi_work', 'closed_book');
    end if;
  end if;
  return null;
end
$$;

drop function roi.record_question(uuid, text, extensions.vector, text);
drop function roi.record_question(uuid, text);

-- The question the worker wrote for a claimed probe: the probe joins the pool (and its
-- write_question row leaves the queue), marked with where its question came from ('model'; 'retry'
-- when the gate refused the first and the model's second passed; 'template' when both failed:
-- new_question is then ignored and the probe takes its template question) and which generator wrote
-- it. False when the probe is no longer pending (another worker got there first, or upkeep retired
-- it): the question is dropped.
create function roi.record_question(target_probe uuid, new_question text, new_origin text default 'model',
  new_generator text default null) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  written text := new_question;
begin
  if new_origin = 'template' then
    select roi.template_question(p.source_kind, p.source_title, p.source_body) into written
    from roi.probes p where p.id = target_probe and p.state = 'pending';
    if not found then
      return false;
    end if;
  end if;
  if length(btrim(coalesce(written, ''))) not between 10 and 300 then
    raise exception 'roi.record_question: a question has 10 to 300 characters' using errcode = '22023';
  end if;
  update roi.probes p
  set question = btrim(written), state = 'active', activated_at = now(), last_error = null,
      question_origin = new_origin, generator_fingerprint = new_generator
  where p.id = target_probe and p.state = 'pending';
  return found;
end
$$;

-- The question the model wrote, with its embedding (the worker embeds what it writes, so the
-- question joins the pool ready for both legs of recall). Same rules as the form above.
create function roi.record_question(target_probe uuid, new_question text, new_embedding extensions.vector,
  new_embedding_model text, new_origin text default 'model', new_generator text default null) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  -- Set while the probe is still pending: that is the row the worker may update.
  update roi.probes p
  set question_embedding = new_embedding, question_embedding_model = new_embedding_model
  where p.id = target_probe and p.state = 'pending';
  return roi.record_question(target_probe, new_question, new_origin, new_generator);
end
$$;

drop function roi.record_verdict(uuid, uuid, boolean, boolean, real, text);

-- The judge's verdict on a queued judgment, with its reason for the gated notes and the judge's
-- fingerprint (model and prompt hash) for the run. False when the judgment is no longer queued
-- (another worker recorded it, or the run timed out): never a second verdict.
create function roi.record_verdict(target_run uuid, target_probe uuid, judged_with_memory boolean,
  judged_without_memory boolean, judged_confidence real, judged_reason text, judge_fingerprint text default null)
  returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
begin
  if judged_with_memory is null or judged_without_memory is null then
    raise exception 'roi.record_verdict: a verdict says yes or no to both questions' using errcode = '22023';
  end if;
  select w.id, w.owner_id into job from roi.work w
  where w.kind = 'judge' and w.run_id = target_run and w.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  if judge_fingerprint is not null then
    insert into roi.run_judges (run_id, owner_id, judge_fingerprint)
    values (target_run, job.owner_id, left(judge_fingerprint, 300))
    on conflict do nothing;
  end if;
  return roi.settle_judgment(job.id, judged_with_memory, judged_without_memory, judged_confidence, judged_reason);
end
$$;

-- A run's judge fingerprint: who decided its verdicts. Deterministic runs are judged by the strict
-- retrieval check; an LLM run by the distinct fingerprints its verdicts were recorded with (two, joined
-- by ' + ', when the worker's judge changed mid-run); null while no verdict is in.
create function roi.run_judge_fingerprint(target_run uuid, run_mode text) returns text
  language sql stable security invoker set search_path = ''
as $$
  select case when run_mode = 'deterministic' then 'deterministic:retrieval-check'
              else (select string_agg(j.judge_fingerprint, ' + ' order by j.judge_fingerprint)
                    from roi.run_judges j where j.run_id = target_run) end
$$;

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
-- measured (recall function, embedding model of its questions); and the judge checks: questions
-- the gate sent back to the model or to their template, and who judged (judge_fingerprint, and
-- judge_changed against the previous run; null while either run has no judged verdict).
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
       judge.changed as judge_changed
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
where r.owner_id = (select auth.uid());

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.run_judges enable row level security;

create policy "Owners read the judges of their runs" on roi.run_judges
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "The worker reads the judges of open runs" on roi.run_judges
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = run_judges.run_id));
create policy "The worker records the judge of queued judgments only" on roi.run_judges
  for insert to roi_worker
  with check (exists (select from roi.work w where w.kind = 'judge' and w.run_id = run_judges.run_id));

-- ============================================================================================
-- Grants
-- ============================================================================================
grant select on roi.run_judges to authenticated;
grant select, insert on roi.run_judges to roi_worker;
grant update (question_origin, generator_fingerprint) on roi.probes to roi_worker;

revoke execute on function roi.record_question(uuid, text, text, text),
  roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text), roi.run_judge_fingerprint(uuid, text)
  from public, anon, authenticated;
grant execute on function roi.record_question(uuid, text, text, text),
  roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text), roi.template_question(text, text, text)
  to roi_worker;
grant execute on function roi.run_judge_fingerprint(uuid, text) to authenticated;
