-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The worker's queue: how work enters it, is handed out, given back and given up. Its tables (roi.work,
-- roi.work_kinds) and who may read them: 30_roi_probes_runs_and_work.sql; the record_… verbs that
-- finish each kind: 71_roi_worker_verbs.sql. Cut here because this is "how the queue hands out work".
--
-- The worker: a least-privilege role and ONE queue of work (roi.work, pgmq's shape). Each row is a
-- kind of work on one probe (of one run, for the kinds that belong to a run), with a lease, attempts,
-- a backoff and the last error. Every row enters through roi.enqueue(), which wakes the worker. The
-- worker's verbs: roi.claim_work() hands out the most urgent due row, roi.release_work() puts a failed
-- attempt back (one backoff formula) or gives up the way its kind gives up, and one record_… verb per
-- kind writes its result and removes the row. The kinds are the rows of roi.work_kinds (their urgency,
-- whether they belong to a run, whether the worker sees the run's recall snapshot, how they give up),
-- which roi.work's foreign key refers to; this table says who queues and records each:
--
--   kind            urgency  queued by                            recorded by                gives up
--   judge           0        start_run (LLM mode)                 record_verdict             skip_verdict
--   closed_book     1        queue_judge_checks (LLM mode)        record_closed_book         drop
--   judge_withheld  1        queue_judge_checks (LLM mode)        record_judge_check         drop
--   judge_reversed  1        queue_judge_checks (LLM mode)        record_judge_check         drop
--   write_question  2        a pending probe (queue_probe_work)   record_question            retire_probe
--   embed_question  3        an active probe with no embedding    record_question_embedding  drop
--
-- A new kind is a row of roi.work_kinds (in the migration that adds it), its record verb, and its
-- handler in zm_roi/worker.py (Worker._KINDS), which refuses to start while the two differ.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The one way into the queue: `work_kind` work on each of `probes` (of `owner`, and of `target_run`
-- for a kind that belongs to a run), carrying the kind's urgency and run rule from roi.work_kinds for
-- the claim's index and the foreign key (an unknown kind has none and is refused there). Work already
-- queued is left as it is. Wakes the worker (NOTIFY roi_work, the kind as payload; polling finds
-- what a lost notification did not announce). Runs as the caller, under roi.work's policies. Returns
-- how many rows it queued.
create function roi.enqueue(work_kind text, owner uuid, probes uuid[], target_run uuid default null)
  returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  queued integer;
begin
  insert into roi.work (kind, owner_id, probe_id, run_id, urgency, needs_run)
  select work_kind, owner, p, target_run, k.urgency, k.needs_run
  from unnest(probes) p
  left join roi.work_kinds k on k.kind = work_kind
  on conflict do nothing;
  get diagnostics queued = row_count;
  if queued > 0 then
    perform pg_notify('roi_work', work_kind);
  end if;
  return queued;
end
$$;

-- A probe's work follows its state, in one place: a pending probe waits for its question
-- (write_question), an active one with no embedding for its embedding (embed_question), and work
-- that no longer applies leaves with the state change (a question written or taken over, a probe
-- rotated out; checks of a probe whose source the owner lost). Runs as whoever changed the probe
-- (the owner inside the benchmark, upkeep as the owner, or the worker) and wakes the worker.
create function roi.queue_probe_work() returns trigger
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
           -- a run's samples (the kinds that belong to a run and are dropped when they fail)
           or (w.kind = any (array(select k.kind from roi.work_kinds k where k.needs_run and k.gives_up = 'drop'))
               and new.retired_reason in ('source_invalidated', 'source_unreachable')));
  end if;
  wanted := case when new.state = 'pending' then 'write_question'
                 when new.state = 'active' and new.question_embedding is null then 'embed_question' end;
  if wanted is not null then
    perform roi.enqueue(wanted, new.owner_id, array[new.id]);
  end if;
  return null;
end
$$;

-- How a judgment leaves the queue (its row locked by the caller), judged or skipped: its one verdict
-- (a second is a no-op), the note kept out of owners' sight, the row gone, the run closed if complete.
create function roi.settle_judgment(job_id bigint, judged_with_memory boolean, judged_without_memory boolean,
  judged_confidence real, settled_note text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
  recorded integer;
begin
  select w.run_id, w.probe_id, w.owner_id into job
  from roi.work w
  where w.id = job_id and w.kind = 'judge';
  if not found then
    return false;
  end if;
  recorded := roi.write_verdicts(job.run_id, job.probe_id, 'llm', judged_with_memory, judged_without_memory,
                                 judged_confidence, case when judged_with_memory is null then 'judge_failed' end);
  if recorded > 0 and nullif(btrim(coalesce(settled_note, '')), '') is not null then
    insert into roi.verdict_notes (run_id, probe_id, owner_id, note)
    values (job.run_id, job.probe_id, job.owner_id, left(settled_note, 2000));
  end if;
  delete from roi.work w where w.id = job_id;
  perform roi.close_run_if_done(job.run_id);
  return recorded > 0;
end
$$;

-- A failed attempt goes back to the queue after a backoff that grows with each attempt
-- (graphile-worker's formula, the one for every kind); after max_attempts the row gives up the way
-- its kind does (roi.work_kinds.gives_up): a judgment is recorded as skipped ('judge_failed', the last error in the gated
-- notes, so a partial run still completes and counts what was judged), a question that cannot be
-- written retires its probe ('generation_failed'), a spot-check, a check of the judge or an embedding
-- is dropped (a sample that cannot be made is left out; the question stays lexical-only). `attempt` fences a stale worker:
-- once the row was released or claimed again, a release of that attempt changes nothing.
create function roi.release_work(work_id bigint, attempt integer, failure text) returns text
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job roi.work;
begin
  select * into job from roi.work w where w.id = work_id and w.lease_until is not null for update;
  if not found or job.attempts <> attempt then
    return 'stale';
  end if;
  if job.attempts < (select s.max_attempts from roi.settings s) then
    update roi.work w
    set lease_until = null,
        last_error = left(failure, 1000),
        run_after = greatest(now(), w.run_after) + exp(least(w.attempts, 10)) * interval '1 second'
    where w.id = job.id;
    return 'retry';
  end if;
  case (select k.gives_up from roi.work_kinds k where k.kind = job.kind)
    when 'skip_verdict' then
      perform roi.settle_judgment(job.id, null, null, null, coalesce(nullif(failure, ''), 'judge failed'));
      return 'skipped';
    when 'retire_probe' then
      update roi.probes p
      set state = 'retired', retired_reason = 'generation_failed', retired_at = now(), last_error = left(failure, 1000)
      where p.id = job.probe_id and p.state = 'pending';
      delete from roi.work w where w.id = job.id;
      return 'retired';
    else
      delete from roi.work w where w.id = job.id;
      return 'dropped';
  end case;
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
-- the lease runs out; a row whose last allowed attempt died with its worker gives up when its turn
-- comes, as a failing attempt would have, and the next row is handed out instead. The lease is
-- written by a HOT update (no index covers attempts or lease_until), so a claim adds no index entries.
-- One round trip per poll, whatever the kind. lease_seconds is the lease handed out, by this
-- database's clock: the worker times its model calls from it (zm_roi/worker.py, call_timeout), so a
-- call never outlives the lease and a longer lease_duration gives a call longer.
create function roi.claim_work()
  returns table (work_id bigint, kind text, attempt integer, owner_id uuid, run_id uuid, probe_id uuid,
                 question text, source_kind text, source_title text, source_body text, surfaced jsonb,
                 lease_seconds double precision)
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  next_row record;
begin
  select * into config from roi.settings;
  loop
    select w.id, w.attempts, w.lease_until into next_row from roi.work w
    where w.run_after <= now() and (w.lease_until is null or w.lease_until < now())
    order by w.urgency, w.run_after, w.id
    limit 1
    for update skip locked;
    exit when not found or next_row.lease_until is null or next_row.attempts < config.max_attempts;
    -- Giving up removes the row (or, had max_attempts just been raised, puts it off): the loop ends.
    perform roi.release_work(next_row.id, next_row.attempts, 'the worker stopped during its last attempt');
  end loop;
  if not found then
    return;
  end if;

  return query
  with claimed as (
    update roi.work w
    set attempts = w.attempts + 1, lease_until = now() + config.lease_duration
    where w.id = next_row.id
    returning w.id, w.kind, w.attempts, w.owner_id, w.run_id, w.probe_id, w.lease_until
  )
  select c.id, c.kind, c.attempts, c.owner_id, c.run_id, c.probe_id, p.question,
         case when c.kind <> 'embed_question' then p.source_kind end,
         case when c.kind <> 'embed_question' then p.source_title end,
         case when c.kind <> 'embed_question' then p.source_body end,
         -- Only a check reshapes the snapshot: the call costs ~0.1 ms a claim (measured), most claims judge.
         case when c.kind in ('judge_withheld', 'judge_reversed')
           then roi.judge_check_surfaced(c.kind, r.surfaced, p.memory_id, p.source_body) else r.surfaced end,
         extract(epoch from c.lease_until - now())::double precision
  from claimed c
  join roi.probes p on p.id = c.probe_id
  left join roi.recalls r on c.kind = any (array(select k.kind from roi.work_kinds k where k.shows_snapshot))
                         and r.run_id = c.run_id and r.probe_id = c.probe_id;
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

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger probes_queue_work_on_insert after insert on roi.probes
  for each row when (new.state = 'pending' or (new.state = 'active' and new.question_embedding is null))
  execute function roi.queue_probe_work();
create trigger probes_queue_work_on_state_change after update of state on roi.probes
  for each row when (old.state is distinct from new.state) execute function roi.queue_probe_work();

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.enqueue(text, uuid, uuid[], uuid), roi.queue_probe_work(), roi.claim_work(), roi.release_work(bigint, integer, text),
  roi.settle_judgment(bigint, boolean, boolean, real, text), roi.judge_check_surfaced(text, jsonb, uuid, text),
  roi.defer_work(bigint, integer, text)
  from public, anon, authenticated;
grant execute on function roi.claim_work(), roi.release_work(bigint, integer, text),
  roi.settle_judgment(bigint, boolean, boolean, real, text), roi.judge_check_surfaced(text, jsonb, uuid, text),
  roi.defer_work(bigint, integer, text), roi.enqueue(text, uuid, uuid[], uuid)
  to roi_worker;
-- Owners queue work inside the benchmark (start_run, the checks of the judge, a probe's state change).
grant execute on function roi.enqueue(text, uuid, uuid[], uuid) to authenticated;
-- The embedder queues embed_question work (roi.queue_question_embeddings, 85_embeddings.sql).
grant execute on function roi.enqueue(text, uuid, uuid[], uuid) to roi_embedder;
