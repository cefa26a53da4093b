-- The worker's queue cost per row (claim + record, no model) measured over 46284ba in `make bench
-- BASE=46284ba`. pg_stat_user_tables showed why the claim cost more: roi.judgments took 794 of 800
-- leases as HOT updates, roi.work none, because work_leased_idx covers lease_until, so every claim
-- added an entry to each of roi.work's seven indexes. The index served only the claim's search for
-- rows whose last attempt died with their worker; the claim now meets such a row in its own order
-- (it is due like any other) and gives it up then. And the two SQL functions on every verdict's path,
-- roi.close_run_if_done and roi.run_lock_key, were parsed and planned again in each transaction (a
-- SQL function with its own search_path is never inlined); as PL/pgSQL they keep their plans.
-- pg_stat_user_functions over 1,200 judgments: claim_work 0.237 -> 0.155 ms, close_run_if_done's
-- own time 0.019 -> 0.003 ms, run_lock_key 0.014 -> 0.003 ms a row.

drop index roi.work_leased_idx;

-- Hands a worker the most urgent due row that is not leased (a waiting run's judgments first, then
-- the run's checks, questions to write, questions to embed; oldest first within a kind) under a fresh
-- lease, with what its kind needs and nothing more (a check of the judge gets the recall snapshot as
-- its check shows it, roi.judge_check_surfaced). A crashed worker's row comes back by itself once
-- the lease runs out; a row whose last allowed attempt died with its worker gives up when its turn
-- comes, as a failing attempt would have, and the next row is handed out instead. The lease is
-- written by a HOT update (no index covers attempts or lease_until), so a claim adds no index entries.
-- One round trip per poll, whatever the kind.
create or replace function roi.claim_work()
  returns table (work_id bigint, kind text, attempt integer, owner_id uuid, run_id uuid, probe_id uuid,
                 question text, source_kind text, source_title text, source_body text, surfaced jsonb)
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
    returning w.id, w.kind, w.attempts, w.owner_id, w.run_id, w.probe_id
  )
  select c.id, c.kind, c.attempts, c.owner_id, c.run_id, c.probe_id, p.question,
         case when c.kind <> 'embed_question' then p.source_kind end,
         case when c.kind <> 'embed_question' then p.source_title end,
         case when c.kind <> 'embed_question' then p.source_body end,
         -- Only a check reshapes the snapshot: the call costs ~0.1 ms a claim (measured), most claims judge.
         case when c.kind in ('judge_withheld', 'judge_reversed')
           then roi.judge_check_surfaced(c.kind, r.surfaced, p.memory_id, p.source_body) else r.surfaced end
  from claimed c
  join roi.probes p on p.id = c.probe_id
  left join roi.recalls r on c.kind in ('judge', 'judge_withheld', 'judge_reversed')
                         and r.run_id = c.run_id and r.probe_id = c.probe_id;
end
$$;

-- Close a run whose every probe has a verdict (the worker, after each verdict; upkeep, as a backstop).
-- PL/pgSQL, not SQL: a SQL function with its own search_path is never inlined, and its body is parsed
-- and planned again in every transaction that calls it, once per verdict; PL/pgSQL keeps its plan.
create or replace function roi.close_run_if_done(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  return roi.record_run_closure(target_run, 'complete', null, null);
end
$$;

-- The advisory lock key that serialises closing one run (its last verdicts, its timeout, a switch of
-- mode), so that two closers cannot both miss the moment or both close it. PL/pgSQL for the reason
-- given at roi.close_run_if_done: it is taken once per verdict.
create or replace function roi.run_lock_key(run uuid) returns bigint
  language plpgsql immutable security invoker set search_path = ''
as $$
begin
  return hashtextextended('roi.run:' || run::text, 0);
end
$$;
