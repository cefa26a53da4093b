-- Judge checks on every LLM run (issue 20, items 2 and 3): two new kinds of work on roi.work.
--
-- judge_withheld (roi.settings.withheld_source_checks, 3 per run by default): the judge sees the same
--   question and ground truth once more, with the source memory (and any surfaced memory with the same
--   body) removed from the surfaced results. with_memory there means another memory truly answers it,
--   or the judge is lenient. Picked at random among the run's questions whose source surfaced: removing
--   a source that did not surface would change nothing.
-- judge_reversed (roi.settings.order_checks, 3 per run by default): the same judgment with the surfaced
--   results in reverse order, renumbered from 1. Picked among the questions with 2 or more results.
--
-- Both are recorded (roi.record_judge_check) in roi.judge_check_results, booleans and ids only, which
-- the owner reads as they read verdicts; both are metered as usage events of their own purpose; a check
-- that keeps failing is dropped (release_work's default branch); a run's closure never waits for them.
-- The runs view gains withheld_checked, withheld_answered_count, order_checked, order_agreement_count.

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table public.usage_events drop constraint usage_events_purpose_check;
alter table public.usage_events add constraint usage_events_purpose_check
  check (purpose in ('probe_generation', 'judgment', 'closed_book_answer', 'closed_book_grade', 'embedding',
                     'judge_check', 'judge_withheld', 'judge_reversed'));

alter table roi.settings
  add column withheld_source_checks integer not null default 3 check (withheld_source_checks between 0 and 200),
  add column order_checks integer not null default 3 check (order_checks between 0 and 200);

-- PostgreSQL 15 cannot alter a generated column's expression: drop it (with its check and
-- work_due_idx) and add it back with the new kinds. A run's checks share closed_book's urgency: after
-- its judgments, before questions to write.
alter table roi.work drop column urgency;
alter table roi.work
  add column urgency smallint generated always as (case kind when 'judge' then 0
    when 'closed_book' then 1 when 'judge_withheld' then 1 when 'judge_reversed' then 1
    when 'write_question' then 2 when 'embed_question' then 3 end) stored,
  add constraint work_kind_is_known check (urgency is not null);
alter table roi.work drop constraint work_run_belongs_to_its_kind;
alter table roi.work add constraint work_run_belongs_to_its_kind
  check ((run_id is not null) = (kind in ('judge', 'closed_book', 'judge_withheld', 'judge_reversed')));
create index work_due_idx on roi.work (urgency, run_after, id);

-- What the judge said when checked: source withheld, or results in reverse order. Booleans and ids
-- only, so the owner reads it, as they read verdicts. Append-only.
create table roi.judge_check_results (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  kind text not null check (kind in ('judge_withheld', 'judge_reversed')),
  with_memory boolean not null,
  without_memory boolean not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id, kind)
);
create index judge_check_results_owner_idx on roi.judge_check_results (owner_id);
create index judge_check_results_probe_idx on roi.judge_check_results (probe_id);

create trigger judge_check_results_are_append_only before update or delete on roi.judge_check_results
  for each row execute function roi.forbid_result_change();
create trigger judge_check_results_refuse_truncate before truncate on roi.judge_check_results
  for each statement execute function roi.forbid_result_truncate();

-- ============================================================================================
-- Functions
-- ============================================================================================

-- After recalls are recorded: keep the text-free outcome of each (source rank, kind, scope), and in
-- LLM mode queue the run's checks of the judge, each on probes picked at random: up to
-- roi.settings.closed_book_checks closed-book spot-checks, withheld_source_checks leniency checks (among
-- probes whose source surfaced) and order_checks order checks (among probes with 2 or more results).
-- Runs as whoever recorded the recalls (the owner, inside the benchmark).
create or replace function roi.note_recall_outcomes() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  config roi.settings;
  queued integer;
begin
  select * into config from roi.settings;
  insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank,
                                   question_origin)
  select n.run_id, n.probe_id, n.owner_id, p.source_kind, p.source_scope,
         array_position(n.surfaced_ids, p.memory_id), p.question_origin
  from recorded n join roi.probes p on p.id = n.probe_id
  on conflict (run_id, probe_id) do nothing;

  if config.closed_book_checks > 0 then
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
    where x.pick + x.already <= config.closed_book_checks
    on conflict do nothing;
    get diagnostics queued = row_count;
    if queued > 0 then
      perform pg_notify('roi_work', 'closed_book');
    end if;
  end if;

  if config.withheld_source_checks > 0 or config.order_checks > 0 then
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select x.kind, x.run_id, x.probe_id, x.owner_id
    from (
      select c.kind, c.wanted, n.run_id, n.probe_id, n.owner_id,
             row_number() over (partition by c.kind, n.run_id order by random()) as pick,
             (select count(*) from roi.work q where q.run_id = n.run_id and q.kind = c.kind)
               + (select count(*) from roi.judge_check_results j where j.run_id = n.run_id and j.kind = c.kind)
               as already
      from recorded n
      join roi.runs r on r.id = n.run_id
      join roi.probes p on p.id = n.probe_id
      cross join (values ('judge_withheld', config.withheld_source_checks),
                         ('judge_reversed', config.order_checks)) c (kind, wanted)
      where r.mode = 'llm' and c.wanted > 0
        and case c.kind when 'judge_withheld' then p.memory_id = any (n.surfaced_ids)
                        else cardinality(n.surfaced_ids) >= 2 end
    ) x
    where x.pick + x.already <= x.wanted
    on conflict do nothing;
    get diagnostics queued = row_count;
    if queued > 0 then
      perform pg_notify('roi_work', 'judge_check');
    end if;
  end if;
  return null;
end
$$;

-- A probe's work follows its state, in one place: a pending probe waits for its question
-- (write_question), an active one with no embedding for its embedding (embed_question), and work
-- that no longer applies leaves with the state change (a question written or taken over, a probe
-- rotated out; checks of a probe whose source the owner lost). Runs as whoever changed the probe
-- (the owner inside the benchmark, upkeep as the owner, or the worker) and wakes the worker.
create or replace function roi.queue_probe_work() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  wanted text;
begin
  if tg_op = 'UPDATE' then
    delete from roi.work w
    where w.probe_id = new.id
      and ((w.kind = 'write_question' and old.state = 'pending')
           or (w.kind = 'embed_question' and old.state = 'active')
           or (w.kind in ('closed_book', 'judge_withheld', 'judge_reversed')
               and new.retired_reason in ('source_invalidated', 'source_unreachable')));
  end if;
  wanted := case when new.state = 'pending' then 'write_question'
                 when new.state = 'active' and new.question_embedding is null then 'embed_question' end;
  if wanted is not null then
    insert into roi.work (kind, owner_id, probe_id) values (wanted, new.owner_id, new.id)
    on conflict do nothing;
    perform pg_notify('roi_work', wanted);
  end if;
  return null;
end
$$;

-- What the judge sees for a check of kind `check_kind`: the recall snapshot with the source withheld
-- (its id, and any result whose body equals the source's) or in reverse order, renumbered from 1 so no
-- rank gives the original order or the removal away. Any other kind sees the snapshot as recorded.
create function roi.judge_check_surfaced(check_kind text, surfaced jsonb, source_memory uuid, source_body text)
  returns jsonb
  language sql immutable security invoker set search_path = ''
as $$
  select case when check_kind not in ('judge_withheld', 'judge_reversed') then surfaced else
    (select coalesce(jsonb_agg(k.hit || jsonb_build_object('rank', k.shown) order by k.shown), '[]'::jsonb)
     from (select h.hit,
                  row_number() over (order by case when check_kind = 'judge_reversed' then -h.position
                                                   else h.position end) as shown
           from jsonb_array_elements(surfaced) with ordinality h (hit, position)
           where check_kind = 'judge_reversed'
              or ((h.hit ->> 'memory_id') is distinct from source_memory::text
                  and btrim(coalesce(h.hit ->> 'body', '')) is distinct from btrim(source_body))) k)
  end
$$;

-- Hands a worker the most urgent due row that is not leased (a waiting run's judgments first, then
-- the run's checks, questions to write, questions to embed; oldest first within a kind) under a fresh
-- lease, with what its kind needs and nothing more (a check of the judge gets the recall snapshot as
-- its check shows it, roi.judge_check_surfaced). A crashed worker's row comes back by itself once
-- the lease runs out; a row whose last allowed attempt died with its worker gives up first, as a
-- failing attempt would have. One round trip per poll, whatever the kind.
create or replace function roi.claim_work()
  returns table (work_id bigint, kind text, attempt integer, owner_id uuid, run_id uuid, probe_id uuid,
                 question text, source_kind text, source_title text, source_body text, surfaced jsonb)
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  abandoned record;
begin
  select * into config from roi.settings;
  for abandoned in
    select w.id, w.attempts from roi.work w
    where w.lease_until < now() and w.attempts >= config.max_attempts
    for update skip locked
  loop
    perform roi.release_work(abandoned.id, abandoned.attempts, 'the worker stopped during its last attempt');
  end loop;

  return query
  with next as (
    select w.id from roi.work w
    where w.run_after <= now() and (w.lease_until is null or w.lease_until < now())
    order by w.urgency, w.run_after, w.id
    limit 1
    for update skip locked
  ), claimed as (
    update roi.work w
    set attempts = w.attempts + 1, lease_until = now() + config.lease_duration
    from next
    where w.id = next.id
    returning w.id, w.kind, w.attempts, w.owner_id, w.run_id, w.probe_id
  )
  select c.id, c.kind, c.attempts, c.owner_id, c.run_id, c.probe_id, p.question,
         case when c.kind <> 'embed_question' then p.source_kind end,
         case when c.kind <> 'embed_question' then p.source_title end,
         case when c.kind <> 'embed_question' then p.source_body end,
         roi.judge_check_surfaced(c.kind, r.surfaced, p.memory_id, p.source_body)
  from claimed c
  join roi.probes p on p.id = c.probe_id
  left join roi.recalls r on c.kind in ('judge', 'judge_withheld', 'judge_reversed')
                         and r.run_id = c.run_id and r.probe_id = c.probe_id;
end
$$;

-- The judge's verdict on a claimed check (judge_withheld or judge_reversed): recorded once, the queue
-- row gone. False when the row is no longer queued (another worker recorded it first).
create function roi.record_judge_check(target_run uuid, target_probe uuid, check_kind text,
  judged_with_memory boolean, judged_without_memory boolean) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
  recorded integer;
begin
  if judged_with_memory is null or judged_without_memory is null then
    raise exception 'roi.record_judge_check: a verdict says yes or no to both questions' using errcode = '22023';
  end if;
  select w.id, w.owner_id into job from roi.work w
  where w.kind = check_kind and w.kind in ('judge_withheld', 'judge_reversed')
    and w.run_id = target_run and w.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  insert into roi.judge_check_results (run_id, probe_id, owner_id, kind, with_memory, without_memory)
  values (target_run, target_probe, job.owner_id, check_kind, judged_with_memory, judged_without_memory)
  on conflict (run_id, probe_id, kind) do nothing;
  get diagnostics recorded = row_count;
  delete from roi.work w where w.id = job.id;
  return recorded > 0;
end
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
-- the gate sent back to the model or to their template, who judged (judge_fingerprint, and
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
       coalesce(jc.reversed_agreed, 0)::integer as order_agreement_count
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

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.judge_check_results enable row level security;

create policy "Owners read their judge check results" on roi.judge_check_results
  for select to authenticated using (owner_id = (select auth.uid()));

drop policy "The worker reads the recall snapshots it judges" on roi.recalls;
create policy "The worker reads the recall snapshots it judges" on roi.recalls
  for select to roi_worker
  using (exists (select from roi.work w
                 where w.kind in ('judge', 'judge_withheld', 'judge_reversed')
                   and w.run_id = recalls.run_id and w.probe_id = recalls.probe_id));

create policy "The worker reads judge check results" on roi.judge_check_results
  for select to roi_worker using (true);
create policy "The worker records results for queued judge checks only" on roi.judge_check_results
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = judge_check_results.kind and w.run_id = judge_check_results.run_id
                        and w.probe_id = judge_check_results.probe_id));

-- ============================================================================================
-- Grants
-- ============================================================================================
grant select on roi.judge_check_results to authenticated;
grant select, insert on roi.judge_check_results to roi_worker;

revoke execute on function roi.judge_check_surfaced(text, jsonb, uuid, text),
  roi.record_judge_check(uuid, uuid, text, boolean, boolean) from public, anon, authenticated;
grant execute on function roi.judge_check_surfaced(text, jsonb, uuid, text),
  roi.record_judge_check(uuid, uuid, text, boolean, boolean) to roi_worker;
