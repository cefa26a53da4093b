-- Spending caps, a run they stop as a status of its own, and an optional schedule.
--
-- Caps: roi.settings gains max_run_cost_usd and max_owner_cost_usd_per_month (null: no cap; negatives
-- refused). The worker asks roi.budget_refusal before each model call; a run whose next call the caps
-- refuse closes as 'aborted_budget' (a new closure reason, append-only like the others: no result is
-- ever updated), its unjudged probes skipped for 'budget' and its queued rows gone. The run list reads
-- that status, the paired comparison skips such runs, and the tile shows them as their own state with
-- what was spent.
--
-- Schedule: an owner's wish (roi.benchmark_schedules, written as the owner by
-- public.benchmark_schedule()) that upkeep honours by starting one run per period at the owner's own
-- quiet minute, as the owner (roi.start_scheduled_run); roi.scheduled_runs records which runs it
-- started, and the run list appends `scheduled`.

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table roi.settings
  add column max_run_cost_usd numeric check (max_run_cost_usd >= 0),
  add column max_owner_cost_usd_per_month numeric check (max_owner_cost_usd_per_month >= 0),
  add column schedule_period_override interval check (schedule_period_override >= interval '1 minute');

alter table roi.run_closures drop constraint run_closures_reason_check,
  add constraint run_closures_reason_check check (reason in ('complete', 'timeout', 'aborted_budget'));
alter table roi.verdicts drop constraint verdicts_skip_reason_check,
  add constraint verdicts_skip_reason_check
    check (skip_reason in ('timeout', 'judge_failed', 'probe_retired', 'mode_changed', 'budget'));
alter table roi.verdicts drop constraint verdicts_judged_by_check,
  add constraint verdicts_judged_by_check check (judged_by in ('deterministic', 'llm', 'timeout', 'budget'));

-- An owner's wish for a routine run (`zm-roi schedule --daily|--weekly`; `--off` removes it). The
-- owner reads and writes their own row through public.benchmark_schedule(); upkeep (40_roi_upkeep.sql) honours it.
create table roi.benchmark_schedules (
  owner_id uuid primary key references auth.users (id) on delete cascade,
  frequency text not null check (frequency in ('daily', 'weekly')),
  updated_at timestamptz not null default now()
);

-- The runs a schedule started, one per owner and period at most (the key says so). Append-only, read
-- by the owner, so the run list can say which runs were scheduled.
create table roi.scheduled_runs (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  period_start timestamptz not null,
  unique (owner_id, period_start)
);

-- ============================================================================================
-- Functions
-- ============================================================================================

-- Whether the worker may start a model call estimated at `estimate` dollars (null: the model has no
-- price in litellm's local map) for `owner`'s work on `run` (null: work outside a run): null when it
-- may, else which cap it would cross, in one line. Calls on the deployment's key count against the
-- run's cap and the owner's month; calls on the owner's own key (byok) against the owner's month only.
-- Under a cap that applies, a call with no known price is refused: nothing could bound it.
create function roi.budget_refusal(owner uuid, run uuid, estimate numeric, byok boolean) returns text
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  config roi.settings;
  spent numeric;
begin
  select * into config from roi.settings;
  if run is not null and not coalesce(byok, false) and config.max_run_cost_usd is not null then
    if estimate is null then
      return format('the run''s spending cap of $%s cannot bound a model with no price in litellm''s cost map',
                    config.max_run_cost_usd);
    end if;
    select coalesce(sum(e.cost_usd), 0) into spent from public.usage_events e
    where e.run_id = run and e.owner_id = owner and not e.byok;
    if spent + estimate > config.max_run_cost_usd then
      return format('the run''s spending cap of $%s: $%s spent, the next call estimated at $%s',
                    config.max_run_cost_usd, round(spent, 6), round(estimate, 6));
    end if;
  end if;
  if config.max_owner_cost_usd_per_month is not null then
    if estimate is null then
      return format('the owner''s monthly spending cap of $%s cannot bound a model with no price in litellm''s cost map',
                    config.max_owner_cost_usd_per_month);
    end if;
    select coalesce(sum(e.cost_usd), 0) into spent from public.usage_events e
    where e.owner_id = owner and e.created_at >= date_trunc('month', now(), 'UTC');
    if spent + estimate > config.max_owner_cost_usd_per_month then
      return format('the owner''s monthly spending cap of $%s: $%s spent this month, the next call estimated at $%s',
                    config.max_owner_cost_usd_per_month, round(spent, 6), round(estimate, 6));
    end if;
  end if;
  return null;
end
$$;

-- A spending cap refused the next model call of a run: the run closes as 'aborted_budget' (its own
-- status, never scored and never compared), its probes still unjudged recorded as skipped ('budget'),
-- and every row of the run still queued leaves, so nothing keeps spending on it. The checks go first:
-- the worker may record a skipped verdict only where a judgment is still queued. True when this call
-- closed the run (false: another closer got there first; its queued rows are gone all the same).
create function roi.abort_run_for_budget(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  closed boolean;
begin
  delete from roi.work w where w.run_id = target_run and w.kind <> 'judge';
  closed := roi.record_run_closure(target_run, 'aborted_budget', 'budget', 'budget');
  delete from roi.work w where w.run_id = target_run;
  return closed;
end
$$;

-- A spending cap refused the model call of work outside a run (a question to write): the row waits
-- an hour (or until the month turns, if sooner), its attempt not counted and its lease let go, saying
-- why, instead of burning attempts until the probe retires. False when the row has moved on (`attempt`
-- fences a stale worker, as in release_work).
create function roi.defer_work(work_id bigint, attempt integer, why text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  update roi.work w
  set lease_until = null,
      attempts = greatest(w.attempts - 1, 0),
      run_after = least(now() + interval '1 hour', date_trunc('month', now(), 'UTC') + interval '1 month'),
      last_error = left(why, 1000)
  where w.id = work_id and w.attempts = attempt and w.lease_until is not null;
  return found;
end
$$;

-- How long a schedule's period is: a day or a week, or roi.settings.schedule_period_override (tests).
create function roi.schedule_period(frequency text) returns interval
  language sql stable security invoker set search_path = ''
as $$
  select coalesce((select s.schedule_period_override from roi.settings s),
                  case frequency when 'weekly' then interval '7 days' else interval '1 day' end)
$$;

-- When the owner's scheduled run of the current period is due: the period's start (UTC days; weeks
-- from Monday) plus the owner's own quiet minute, an offset derived from their id, so that owners'
-- runs spread over the period instead of all landing on midnight.
create function roi.schedule_due_at(owner uuid, frequency text) returns timestamptz
  language sql stable security invoker set search_path = ''
as $$
  select date_bin(p.period, now(), timestamptz '2001-01-01 00:00:00+00')
         + (abs(hashtextextended('roi.schedule:' || owner::text, 0))
            % greatest(1, (extract(epoch from p.period) / 60)::bigint)) * interval '1 minute'
  from (select roi.schedule_period(frequency) as period) p
$$;

-- `zm-roi schedule`: the caller's wish for a routine run, 'daily' or 'weekly', or 'off' to remove it.
-- SECURITY INVOKER: the row is written as the caller, under RLS. Refused for an unknown frequency and,
-- unless turning it off, for a caller with no live knowledge to probe (nothing a run could measure).
create function public.benchmark_schedule(frequency text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  caller uuid := auth.uid();
  wanted text := lower(btrim(coalesce(frequency, '')));
begin
  if caller is null or coalesce(auth.role(), '') <> 'authenticated' then
    raise exception 'benchmark_schedule() needs a signed-in user: call it with the user''s access token'
      using errcode = '28000';
  end if;
  if wanted not in ('daily', 'weekly', 'off') then
    raise exception 'unknown schedule %: daily, weekly or off', coalesce(frequency, 'null') using errcode = '22023';
  end if;
  if wanted = 'off' then
    delete from roi.benchmark_schedules s where s.owner_id = caller;
    return jsonb_build_object('frequency', 'off');
  end if;
  if not exists (select from public.memories m
                 where m.kind in ('decision', 'gotcha', 'convention') and m.invalidated_at is null) then
    raise exception 'no live decision, gotcha or convention memory is visible to this user: a scheduled run would have nothing to measure'
      using errcode = '22023';
  end if;
  insert into roi.benchmark_schedules (owner_id, frequency) values (caller, wanted)
  on conflict (owner_id) do update set frequency = excluded.frequency, updated_at = now();
  return jsonb_build_object('frequency', wanted,
                            'period', roi.schedule_period(wanted)::text,
                            'next_run_after', greatest(now(), roi.schedule_due_at(caller, wanted)));
end
$$;

-- Start the scheduled run of one owner, as that owner exactly as a Data API call of theirs would
-- (public.benchmark_memory() under role authenticated and their claims, recall under RLS), and record
-- it as this period's when one started. Any other answer (in_progress: a run is still open; generating;
-- empty) starts nothing, and a later upkeep cycle of the period tries again.
create function roi.start_scheduled_run(owner uuid, period_start timestamptz) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  result jsonb;
begin
  perform roi.impersonate(owner);
  result := public.benchmark_memory();
  perform set_config('role', 'none', true);
  perform set_config('request.jwt.claims', '', true);
  if result ->> 'status' = 'started' then
    insert into roi.scheduled_runs (run_id, owner_id, period_start)
    values ((result ->> 'run_id')::uuid, owner, period_start);
  end if;
  return result;
end
$$;

-- One upkeep cycle, idempotent: close runs past the timeout (and any whose last verdict landed
-- without closing it), then care for the owners whose pools could have changed: the owners of the
-- layers marked dirty since the last cycle, and owners with a closed run to rotate; last, start the
-- scheduled runs that are due (roi.start_scheduled_run, as each owner, one per period). The marks are
-- taken (deleted) in this transaction; an owner skipped as busy, or whose care failed, is marked
-- again so the next cycle retries them. A failure for one owner does not stop the others. JIT off:
-- at 1M memories an idle cycle spent ~10 ms compiling plans that ran in microseconds.
create or replace function roi.upkeep() returns jsonb
  language plpgsql volatile security invoker set search_path = '' set jit = off
as $$
declare
  overdue integer := 0;
  finished integer := 0;
  owners integer := 0;
  failures integer := 0;
  busy integer := 0;
  retired integer := 0;
  rotated integer := 0;
  added integer := 0;
  scheduled integer := 0;
  marks jsonb;
  target record;
  outcome jsonb;
begin
  for target in
    select pr.run_id from roi.pending_runs pr
    where not pr.closed and pr.started_at <= clock_timestamp() - (select s.run_timeout from roi.settings s)
  loop
    overdue := overdue + roi.close_overdue_run(target.run_id)::integer;
  end loop;
  for target in
    select pr.run_id from roi.pending_runs pr join roi.runs r on r.id = pr.run_id
    where not pr.closed
      and (select count(*) from roi.verdicts v where v.run_id = pr.run_id) >= r.probe_count
  loop
    finished := finished + roi.close_run_if_done(target.run_id)::integer;
  end loop;

  with taken as (delete from roi.dirty_layers d returning d.layer, d.layer_id, d.can_retire)
  select coalesce(jsonb_agg(jsonb_build_object('layer', t.layer, 'layer_id', t.layer_id,
                                               'can_retire', t.can_retire)), '[]'::jsonb)
  into marks from taken t;

  begin
  for target in
    select pr.owner_id from roi.pending_runs pr where pr.closed
    union
    select o.owner_id from roi.owners_of_layers(marks) o(owner_id)
  loop
    -- The owner's own lock, held only while we work on them: a benchmark call in flight is never
    -- raced (we skip the owner this cycle), and a call arriving now waits a moment, not a cycle.
    if not pg_try_advisory_lock(roi.owner_lock_key(target.owner_id)) then
      busy := busy + 1;
      insert into roi.dirty_layers values ('personal', target.owner_id, true) on conflict do nothing;
      continue;
    end if;
    begin
      outcome := roi.upkeep_owner(target.owner_id);
      owners := owners + 1;
      retired := retired + (outcome ->> 'retired')::integer;
      rotated := rotated + (outcome ->> 'rotated')::integer;
      added := added + (outcome ->> 'added')::integer;
    exception when others then
      failures := failures + 1;
      raise warning 'roi.upkeep: owner % skipped: %', target.owner_id, sqlerrm;
      insert into roi.dirty_layers values ('personal', target.owner_id, true) on conflict do nothing;
    end;
    perform pg_advisory_unlock(roi.owner_lock_key(target.owner_id));
  end loop;
  exception when others or query_canceled then
    -- Session-level locks outlive an aborted transaction: never leave an owner locked out.
    perform pg_advisory_unlock_all();
    raise;
  end;

  -- Scheduled runs: each owner whose run of this period is due and not yet started, under the owner's
  -- lock (a benchmark call in flight: skipped, tried again next cycle; an open run: in_progress).
  begin
  for target in
    select s.owner_id, date_bin(roi.schedule_period(s.frequency), now(), timestamptz '2001-01-01 00:00:00+00')
             as period_start
    from roi.benchmark_schedules s
    where now() >= roi.schedule_due_at(s.owner_id, s.frequency)
      and not exists (select from roi.scheduled_runs x
                      where x.owner_id = s.owner_id
                        and x.period_start = date_bin(roi.schedule_period(s.frequency), now(),
                                                      timestamptz '2001-01-01 00:00:00+00'))
  loop
    if not pg_try_advisory_lock(roi.owner_lock_key(target.owner_id)) then
      busy := busy + 1;
      continue;
    end if;
    begin
      outcome := roi.start_scheduled_run(target.owner_id, target.period_start);
      scheduled := scheduled + (outcome ->> 'status' = 'started')::integer;
    exception when others then
      failures := failures + 1;
      raise warning 'roi.upkeep: scheduled run of owner % not started: %', target.owner_id, sqlerrm;
    end;
    perform pg_advisory_unlock(roi.owner_lock_key(target.owner_id));
  end loop;
  exception when others or query_canceled then
    perform pg_advisory_unlock_all();
    raise;
  end;

  update roi.upkeep_state set last_run_at = now();
  return jsonb_build_object('overdue_closed', overdue, 'finished_closed', finished, 'owners', owners,
                            'retired', retired, 'rotated', rotated, 'added', added,
                            'busy', busy, 'failures', failures, 'scheduled', scheduled);
end
$$;

-- After a completed run: retire a few of the longest-serving probes, but only when never-probed
-- knowledge exists to replace them (so the benchmark follows what the owner has learned), and the
-- top-up that refills the rotated places, with one read of never-probed knowledge instead of two (each read is a statement per layer
-- the owner reads, under RLS). The newest n never-probed memories are the first n of the newest m for
-- any m >= n, and retiring a probe does not make its memory never-probed again, so the rows rotation
-- read to decide how many to retire are the rows the top-up adds. A run a spending cap stopped
-- rotates nothing: its probes were not all asked, and fresh probes would spend on their questions
-- while the cap holds. Returns probes retired.
create or replace function roi.rotate_and_top_up(completed_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  fresh public.memories[] := '{}';
  retired integer := 0;
begin
  if not exists (select from roi.rotations r where r.run_id = completed_run)
     and not exists (select from roi.run_closures c where c.run_id = completed_run and c.reason = 'aborted_budget')
  then
    fresh := array(select m from roi.never_probed_knowledge((select s.rotation_per_run from roi.settings s)) m);
    retired := roi.retire_longest_serving(completed_run, cardinality(fresh));
  end if;
  perform roi.refill_pool(fresh);
  return retired;
end
$$;

-- ============================================================================================
-- Views (the runs view's status, paired comparison and `scheduled`; the tile's new state)
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
-- judged verdict unchanged; last, whether the owner's schedule started the run (`scheduled`).
create or replace view public.roi_benchmark_runs with (security_invoker = true) as
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

-- The tile is the one home of its wording: its state, its hint and, in deterministic mode, the
-- sentence saying which figure the strict retrieval check bounds and in which direction. The
-- dashboard, the MCP server and the demo render these columns; none of them re-derives them.
-- States: invite (no run yet), judging (the latest run is still being judged), aborted_budget (a
-- spending cap stopped the latest run: the words say what it spent; an earlier score, if any, stays
-- with a note), no_score (the latest run finished with every question skipped: no rate, even after
-- an earlier score, which the trend keeps), ready (a score). `scored_run_id` is the one home of "the scored run": the newest complete
-- run with a judged question, unless the latest run is no_score. `headline`, `explanation` and
-- `note` are the tile's remaining words (the invite's explanation quotes roi.settings.pool_target).
-- It names the run list's columns it was defined with: `select *` in a view is expanded once, when
-- the view is created, and the run list has grown since.
create or replace view public.roi_benchmark_tile with (security_invoker = true) as
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

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger scheduled_runs_are_append_only before update or delete on roi.scheduled_runs
  for each row execute function roi.forbid_result_change();
create trigger scheduled_runs_refuse_truncate before truncate on roi.scheduled_runs
  for each statement execute function roi.forbid_result_truncate();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter policy "The worker closes completed runs" on roi.run_closures
  rename to "The worker closes runs that completed or that a spending cap stopped";
alter policy "The worker closes runs that completed or that a spending cap stopped" on roi.run_closures
  with check (reason in ('complete', 'aborted_budget'));

-- Counts, tokens and dollars, no text: what the spending caps are checked against (roi.budget_refusal),
-- for the owners it has work for, as it reads their keys.
create policy "The worker reads what owners it has work for spent, to hold the spending caps" on public.usage_events
  for select to roi_worker
  using (exists (select from roi.work w where w.owner_id = usage_events.owner_id));

alter table roi.benchmark_schedules enable row level security;
alter table roi.scheduled_runs enable row level security;

create policy "Owners keep their own benchmark schedule" on roi.benchmark_schedules
  for all to authenticated
  using (owner_id = (select auth.uid()))
  with check (owner_id = (select auth.uid()));
create policy "Owners read which of their runs a schedule started" on roi.scheduled_runs
  for select to authenticated using (owner_id = (select auth.uid()));

-- ============================================================================================
-- Grants
-- ============================================================================================
grant select on public.usage_events to roi_worker;
revoke execute on function roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid),
  roi.defer_work(bigint, integer, text) from public, anon, authenticated;
grant execute on function roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid),
  roi.defer_work(bigint, integer, text) to roi_worker;

revoke execute on function roi.start_scheduled_run(uuid, timestamptz) from public;
revoke all on roi.benchmark_schedules, roi.scheduled_runs from public, anon, authenticated;
grant select, insert, update, delete on roi.benchmark_schedules to authenticated;
grant select on roi.scheduled_runs to authenticated;
revoke execute on function roi.schedule_period(text), roi.schedule_due_at(uuid, text),
  public.benchmark_schedule(text) from public, anon;
grant execute on function roi.schedule_period(text), roi.schedule_due_at(uuid, text),
  public.benchmark_schedule(text) to authenticated;
