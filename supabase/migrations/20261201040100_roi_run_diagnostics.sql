-- Diagnosable runs: tell a search miss from a knowledge gap (retrieval figures and a breakdown by
-- kind and scope), compare each run with the owner's previous one (paired, with an exact sign test),
-- show what a run cost (litellm's local price map, stored on each usage event), and spot-check the
-- judge's `without_memory` with a closed-book call (optional, off by default).
--
-- Privacy. The figures need the source's rank among the surfaced results and the probe's kind and
-- scope, but roi.recalls and roi.probes are gated (they carry text). So a trigger on roi.recalls
-- copies the text-free facts (rank, kind, scope) into roi.recall_outcomes, which the owner reads, as
-- they read verdicts. The closed-book queue carries ids only and is the worker's; its results are
-- booleans the owner reads. The bare model's answer is never stored.

-- ============================================================================================
-- Tables
-- ============================================================================================

-- Probes per run whose question the worker also puts to the model with no memory at all (LLM mode).
alter table roi.settings
  add column closed_book_checks integer not null default 0 check (closed_book_checks between 0 and 200);

-- What a call cost in US dollars by litellm's local price map; null when the model has no price.
alter table public.usage_events add column cost_usd numeric(18, 10) check (cost_usd >= 0);
alter table public.usage_events drop constraint usage_events_purpose_check;
alter table public.usage_events add constraint usage_events_purpose_check
  check (purpose in ('probe_generation', 'judgment', 'closed_book_answer', 'closed_book_grade'));

-- Text-free facts of each recall: where the source ranked (null: it did not surface), and the
-- probe's kind and scope, for the retrieval figures and the breakdown. Written by a trigger.
create table roi.recall_outcomes (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  source_kind text not null,
  source_scope text not null,
  source_rank integer check (source_rank >= 1),
  primary key (run_id, probe_id)
);

-- The spot-check queue (LLM mode): probes of a run to ask closed-book, claimed with a lease.
create table roi.closed_book_queue (
  id bigint generated always as identity primary key,
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  attempts integer not null default 0,
  run_after timestamptz not null default now(),
  lease_until timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  unique (run_id, probe_id)
);

-- Whether the bare model (question only, no memory) answered as the ground truth does. Append-only.
create table roi.closed_book_results (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  bare_correct boolean not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id)
);

-- ============================================================================================
-- Indexes
-- ============================================================================================
create index recall_outcomes_owner_idx on roi.recall_outcomes (owner_id);
create index recall_outcomes_probe_idx on roi.recall_outcomes (probe_id);
create index closed_book_queue_ready_idx on roi.closed_book_queue (run_after);
create index closed_book_queue_probe_idx on roi.closed_book_queue (probe_id);
create index closed_book_queue_owner_idx on roi.closed_book_queue (owner_id);
create index closed_book_results_owner_idx on roi.closed_book_results (owner_id);
create index closed_book_results_probe_idx on roi.closed_book_results (probe_id);
create index usage_events_run_idx on public.usage_events (run_id) where run_id is not null;

-- Recalls recorded before this migration get their outcomes too.
insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank)
select rc.run_id, rc.probe_id, rc.owner_id, p.source_kind, p.source_scope,
       array_position(rc.surfaced_ids, p.memory_id)
from roi.recalls rc join roi.probes p on p.id = rc.probe_id
on conflict do nothing;

-- ============================================================================================
-- Functions
-- ============================================================================================

-- Two-sided exact sign test on the discordant pairs of a paired comparison: the chance, with no real
-- change, of a split at least this lopsided. Null when there is no discordant pair.
create function roi.sign_test_p(improved bigint, regressed bigint) returns numeric
  language plpgsql immutable security invoker set search_path = ''
as $$
declare
  n integer := improved + regressed;
  k integer := least(improved, regressed);
  term numeric := 1;
  tail numeric := 1;
begin
  if n is null or n = 0 then
    return null;
  end if;
  for i in 1..k loop
    term := term * (n - i + 1) / i;  -- C(n, i), exact: C(n, i-1) * (n-i+1) is divisible by i
    tail := tail + term;
  end loop;
  return round(least(1, 2 * tail / power(2::numeric, n)), 4);
end
$$;

-- After recalls are recorded: keep the text-free outcome of each (source rank, kind, scope), and in
-- LLM mode queue up to roi.settings.closed_book_checks of the run's probes for the closed-book
-- spot-check, picked at random. Runs as whoever recorded the recalls (the owner, inside the benchmark).
create function roi.note_recall_outcomes() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  checks integer := (select s.closed_book_checks from roi.settings s);
  queued integer;
begin
  insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank)
  select n.run_id, n.probe_id, n.owner_id, p.source_kind, p.source_scope,
         array_position(n.surfaced_ids, p.memory_id)
  from recorded n join roi.probes p on p.id = n.probe_id
  on conflict (run_id, probe_id) do nothing;

  if checks > 0 then
    insert into roi.closed_book_queue (run_id, probe_id, owner_id)
    select x.run_id, x.probe_id, x.owner_id
    from (
      select n.run_id, n.probe_id, n.owner_id,
             row_number() over (partition by n.run_id order by random()) as pick,
             (select count(*) from roi.closed_book_queue q where q.run_id = n.run_id)
               + (select count(*) from roi.closed_book_results b where b.run_id = n.run_id) as already
      from recorded n join roi.runs r on r.id = n.run_id
      where r.mode = 'llm'
    ) x
    where x.pick + x.already <= checks
    on conflict (run_id, probe_id) do nothing;
    get diagnostics queued = row_count;
    if queued > 0 then
      perform pg_notify('roi_work', 'closed_book');
    end if;
  end if;
  return null;
end
$$;

-- Hands a worker the next due spot-check under a fresh lease, with the question and the ground truth
-- (the grading call needs it; the answering call gets the question only). Dropped first: a row whose
-- attempts are used up and whose lease ran out (a spot-check that keeps failing is not counted), and a
-- row whose source the owner can no longer see (nothing is asked about a memory they lost).
create function roi.claim_closed_book()
  returns table (run_id uuid, probe_id uuid, owner_id uuid, attempt integer, question text,
                 source_kind text, source_title text, source_body text)
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
begin
  select * into config from roi.settings;
  delete from roi.closed_book_queue q
  where (q.attempts >= config.max_attempts and q.lease_until < now())
     or exists (select from roi.probes p where p.id = q.probe_id
                and p.retired_reason in ('source_invalidated', 'source_unreachable'));

  return query
  with next as (
    select q.id from roi.closed_book_queue q
    where q.run_after <= now() and (q.lease_until is null or q.lease_until < now())
      and q.attempts < config.max_attempts
    order by q.run_after, q.id
    limit 1
    for update skip locked
  ), claimed as (
    update roi.closed_book_queue q
    set attempts = q.attempts + 1, lease_until = now() + config.lease_duration
    from next
    where q.id = next.id
    returning q.run_id, q.probe_id, q.owner_id, q.attempts
  )
  select c.run_id, c.probe_id, c.owner_id, c.attempts, p.question, p.source_kind, p.source_title,
         p.source_body
  from claimed c
  join roi.probes p on p.id = c.probe_id;
end
$$;

-- The grading call's decision on a claimed spot-check: recorded once, the queue row gone. False when
-- the row is no longer queued (another worker recorded it first).
create function roi.record_closed_book(target_run uuid, target_probe uuid, correct boolean) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
  recorded integer;
begin
  if correct is null then
    raise exception 'roi.record_closed_book: the grade says yes or no' using errcode = '22023';
  end if;
  select q.id, q.owner_id into job from roi.closed_book_queue q
  where q.run_id = target_run and q.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  insert into roi.closed_book_results (run_id, probe_id, owner_id, bare_correct)
  values (target_run, target_probe, job.owner_id, correct)
  on conflict (run_id, probe_id) do nothing;
  get diagnostics recorded = row_count;
  delete from roi.closed_book_queue q where q.id = job.id;
  return recorded > 0;
end
$$;

-- A failed spot-check attempt goes back to the queue after a growing backoff; after max_attempts it
-- is dropped (a spot-check is a sample: one that cannot be made is left out, never guessed). Fenced
-- by `attempt`, like the other release verbs.
create function roi.release_closed_book(target_run uuid, target_probe uuid, attempt integer, failure text)
  returns text
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
begin
  select q.id, q.attempts into job from roi.closed_book_queue q
  where q.run_id = target_run and q.probe_id = target_probe and q.lease_until is not null
  for update;
  if not found or job.attempts <> attempt then
    return 'stale';
  end if;
  if job.attempts < (select s.max_attempts from roi.settings s) then
    update roi.closed_book_queue q
    set lease_until = null,
        last_error = left(failure, 1000),
        run_after = greatest(now(), q.run_after) + exp(least(q.attempts, 10)) * interval '1 second'
    where q.id = job.id;
    return 'retry';
  end if;
  delete from roi.closed_book_queue q where q.id = job.id;
  return 'dropped';
end
$$;

-- Every model call leaves a usage event, now with what it cost (null when the model has no price).
-- Replaces the 8-argument form; the cost defaults to null, so callers of that form still work.
drop function roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean);
create function roi.record_usage(event_owner uuid, event_purpose text, event_model text, event_run uuid,
  event_probe uuid, event_input_tokens integer, event_output_tokens integer, event_byok boolean,
  event_cost_usd numeric default null)
  returns void
  language sql volatile security invoker set search_path = ''
as $$
  insert into public.usage_events (owner_id, purpose, model, run_id, probe_id, input_tokens,
                                   output_tokens, byok, cost_usd)
  values (event_owner, event_purpose, event_model, event_run, event_probe,
          coalesce(event_input_tokens, 0), coalesce(event_output_tokens, 0), coalesce(event_byok, false),
          event_cost_usd)
$$;

-- ============================================================================================
-- Views
-- ============================================================================================

-- The run list gains its diagnostics (appended: a view only grows). Aggregates only.
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
       coalesce(cb.agreement, 0)::integer as closed_book_agreement_count
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

-- What the deployment's own provider keys paid for, now with the cost (appended). Own-key calls
-- are still left out.
create or replace view roi.deployment_token_totals with (security_invoker = true) as
select (e.created_at at time zone 'utc')::date as day,
       e.purpose,
       e.model,
       count(*) as calls,
       sum(e.input_tokens) as input_tokens,
       sum(e.output_tokens) as output_tokens,
       sum(e.cost_usd) as cost_usd
from public.usage_events e
where not e.byok
group by 1, 2, 3;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger recalls_note_outcomes after insert on roi.recalls
  referencing new table as recorded
  for each statement execute function roi.note_recall_outcomes();
create trigger recall_outcomes_are_append_only before update or delete on roi.recall_outcomes
  for each row execute function roi.forbid_result_change();
create trigger closed_book_results_are_append_only before update or delete on roi.closed_book_results
  for each row execute function roi.forbid_result_change();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.recall_outcomes enable row level security;
alter table roi.closed_book_queue enable row level security;
alter table roi.closed_book_results enable row level security;

create policy "Owners read their recall outcomes" on roi.recall_outcomes
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners record recall outcomes only inside the benchmark" on roi.recall_outcomes
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners queue spot-checks only inside the benchmark" on roi.closed_book_queue
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their spot-check results" on roi.closed_book_results
  for select to authenticated using (owner_id = (select auth.uid()));

create policy "The worker reads the spot-check queue" on roi.closed_book_queue
  for select to roi_worker using (true);
create policy "The worker leases queued spot-checks" on roi.closed_book_queue
  for update to roi_worker using (true) with check (true);
create policy "The worker removes finished spot-checks from the queue" on roi.closed_book_queue
  for delete to roi_worker using (true);

-- One select policy per role and action (Supabase's advisor flags two permissive ones): the worker's
-- existing one, widened to the probes it spot-checks.
drop policy "The worker reads pending probes and the probes it judges" on roi.probes;
create policy "The worker reads pending probes and the probes it judges or spot-checks" on roi.probes
  for select to roi_worker
  using (state = 'pending' or activated_at = now() or retired_at = now()
         or exists (select from roi.judgments j where j.probe_id = probes.id)
         or exists (select from roi.closed_book_queue q where q.probe_id = probes.id));

create policy "The worker reads spot-check results" on roi.closed_book_results
  for select to roi_worker using (true);
create policy "The worker records results for queued spot-checks only" on roi.closed_book_results
  for insert to roi_worker
  with check (exists (select from roi.closed_book_queue q
                      where q.run_id = closed_book_results.run_id and q.probe_id = closed_book_results.probe_id));

-- ============================================================================================
-- Grants
-- ============================================================================================
grant select, insert on roi.recall_outcomes to authenticated;
grant select, insert on roi.closed_book_queue to authenticated;
grant select on roi.closed_book_results to authenticated;

grant select, delete on roi.closed_book_queue to roi_worker;
grant update (attempts, run_after, lease_until, last_error) on roi.closed_book_queue to roi_worker;
grant select, insert on roi.closed_book_results to roi_worker;

revoke execute on function roi.sign_test_p(bigint, bigint), roi.note_recall_outcomes(),
  roi.claim_closed_book(), roi.record_closed_book(uuid, uuid, boolean),
  roi.release_closed_book(uuid, uuid, integer, text),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric)
  from public, anon, authenticated;
grant execute on function roi.sign_test_p(bigint, bigint) to authenticated;
grant execute on function roi.claim_closed_book(), roi.record_closed_book(uuid, uuid, boolean),
  roi.release_closed_book(uuid, uuid, integer, text),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric)
  to roi_worker;

revoke all on public.roi_benchmark_breakdown from anon, authenticated;
grant select on public.roi_benchmark_breakdown to authenticated;
revoke all on roi.deployment_token_totals from public, anon, authenticated;
grant select on roi.deployment_token_totals to service_role;
