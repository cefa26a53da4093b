-- roi.claim_work called roi.judge_check_surfaced for every claimed row, though only the two checks of
-- the judge reshape the recall snapshot: the call (a function with its own search_path, the snapshot
-- passed as jsonb) cost ~0.1 ms of a ~1.4 ms claim + record (pg_stat_user_functions, 1,000 judgments),
-- part of why the queue cost per row measured 23% over 46284ba in `make bench SIZE=1m BASE=46284ba`.

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
         -- Only a check reshapes the snapshot: the call costs ~0.1 ms a claim (measured), most claims judge.
         case when c.kind in ('judge_withheld', 'judge_reversed')
           then roi.judge_check_surfaced(c.kind, r.surfaced, p.memory_id, p.source_body) else r.surfaced end
  from claimed c
  join roi.probes p on p.id = c.probe_id
  left join roi.recalls r on c.kind in ('judge', 'judge_withheld', 'judge_reversed')
                         and r.run_id = c.run_id and r.probe_id = c.probe_id;
end
$$;
