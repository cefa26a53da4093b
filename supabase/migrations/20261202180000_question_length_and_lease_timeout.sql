-- Issue 31, one home per rule: a question's length (10..300) was written in three places (this
-- gate, the worker's pydantic model and its gate); it is now one check constraint on roi.probes,
-- which roi.question_length_bounds() reads for record_question and for the worker. And the worker's
-- model-call timeout was tied to the lease only by a comment: roi.claim_work() now hands out the
-- lease's length (lease_seconds, appended), and the worker times each call from it.

-- ============================================================================================
-- The one home of a question's length
-- ============================================================================================
-- Every question already stored came through record_question's 10..300 or a template (30..~180).
alter table roi.probes
  add constraint probes_question_length check (length(question) between 10 and 300);

-- A question's shortest and longest length, read from the one place they are written: the check
-- constraint probes_question_length on roi.probes. record_question's gate and the worker's
-- (zm_roi/prompts.py, through the named query question_length_bounds) read them here, so no other
-- copy of the two numbers exists to drift from the table's.
create function roi.question_length_bounds(out min_chars integer, out max_chars integer)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  bounds text[];
begin
  select regexp_match(pg_catalog.pg_get_constraintdef(c.oid),
                      'length\(question\) >= (\d+)\) AND \(length\(question\) <= (\d+)\)')
  into bounds
  from pg_catalog.pg_constraint c
  where c.conrelid = 'roi.probes'::regclass and c.conname = 'probes_question_length';
  if bounds is null then
    raise exception 'roi.question_length_bounds: roi.probes has no check probes_question_length '
      'of the form length(question) between N and M' using errcode = 'undefined_object';
  end if;
  min_chars := bounds[1]::integer;
  max_chars := bounds[2]::integer;
end
$$;

-- The question the worker wrote for a claimed probe: the probe joins the pool (and its
-- write_question row leaves the queue), marked with where its question came from ('model'; 'retry'
-- when the gate refused the first and the model's second passed; 'template' when both failed:
-- new_question is then ignored and the probe takes its template question) and which generator wrote
-- it. False when the probe is no longer pending (another worker got there first, or upkeep retired
-- it): the question is dropped.
create or replace function roi.record_question(target_probe uuid, new_question text, new_origin text default 'model',
  new_generator text default null) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  written text := new_question;
  bounds record;
begin
  if new_origin = 'template' then
    select roi.template_question(p.source_kind, p.source_title, p.source_body) into written
    from roi.probes p where p.id = target_probe and p.state = 'pending';
    if not found then
      return false;
    end if;
  end if;
  select * into bounds from roi.question_length_bounds();
  if length(btrim(coalesce(written, ''))) not between bounds.min_chars and bounds.max_chars then
    raise exception 'roi.record_question: a question has % to % characters', bounds.min_chars, bounds.max_chars
      using errcode = '22023';
  end if;
  update roi.probes p
  set question = btrim(written), state = 'active', activated_at = now(), last_error = null,
      question_origin = new_origin, generator_fingerprint = new_generator
  where p.id = target_probe and p.state = 'pending';
  return found;
end
$$;

-- ============================================================================================
-- claim_work hands out the lease's length (a new result column: drop and create)
-- ============================================================================================
drop function roi.claim_work();

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
  left join roi.recalls r on c.kind in ('judge', 'judge_withheld', 'judge_reversed')
                         and r.run_id = c.run_id and r.probe_id = c.probe_id;
end
$$;

revoke execute on function roi.claim_work(), roi.question_length_bounds() from public, anon, authenticated;
grant execute on function roi.claim_work(), roi.question_length_bounds() to roi_worker;
