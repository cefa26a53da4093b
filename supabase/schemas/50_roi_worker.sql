-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
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
-- The worker meters every model call, with its cost, in the same transaction as its result, and
-- before each call asks roi.budget_refusal whether the spending caps allow it: a run the caps stop
-- closes as 'aborted_budget' (roi.abort_run_for_budget); a question waits (roi.defer_work).
--
-- roi_worker sees only what its rows carry: a pending probe's source snapshot, for a judgment the
-- question, ground truth and recall snapshot (for a check of the judge, the snapshot as the check shows
-- it: source withheld or order reversed), for a spot-check the question and ground truth, for an
-- embedding the question. It has no privilege on public.memories, so it cannot top up pools: when its
-- verdict closes a run (roi.close_run_if_done), the owner's next benchmark_memory() call rotates and
-- tops up that pool, and upkeep (pg_cron, impersonating the owner) does it for an owner who never calls.
-- That is by design: only the owner's own identity ever selects probe candidates.
--
-- The role is created NOLOGIN. Locally `zm-roi db up` gives it a password; on Supabase give it one
-- yourself (`alter role roi_worker with login password '…'`) and point ZM_WORKER_DB_URL at it.
--
-- Own provider keys. An owner's key is stored encrypted with pgcrypto under a passphrase that lives
-- only in the environment of `zm-roi set-key` and of the worker (ZM_KEY_ENCRYPTION_KEY), never in
-- the database. The same column works unchanged on Supabase (pgcrypto sits in `extensions`).
-- Supabase Vault would keep the secret inside the database instead; reading vault.decrypted_secrets
-- as SECURITY INVOKER would need `grant select on vault.decrypted_secrets to roi_worker`, which opens
-- every secret of the project to the worker, and definer-rights functions are ruled out. So Vault is
-- deliberately not wired in: an operator who prefers it stores the key with vault.create_secret(),
-- makes that grant knowingly, and swaps the body of roi.owner_provider_key() for a Vault read.

do $role$
begin
  if not exists (select from pg_roles where rolname = 'roi_worker') then
    create role roi_worker nologin noinherit;
  end if;
end
$role$;

create extension if not exists pgcrypto with schema extensions;

-- ============================================================================================
-- Tables
-- ============================================================================================

-- The kinds of work, one row each: the one list of them (roi.work's foreign key refers to it; the
-- worker checks its handlers against it when it starts). `urgency` orders the claim (a waiting run's
-- judgments first); `needs_run`: a row of the kind belongs to a run; `shows_snapshot`: the worker is
-- shown the run's recall snapshot of the probe (roi.claim_work, and the worker's read policy on
-- roi.recalls); `gives_up`: what roi.release_work does after the last failed attempt (skip_verdict:
-- the probe's verdict is recorded as skipped, so a partial run still completes; retire_probe: the
-- probe retires as generation_failed; drop: the row leaves, a sample that cannot be made is left out).
create table roi.work_kinds (
  kind text primary key,
  urgency smallint not null,
  needs_run boolean not null,
  shows_snapshot boolean not null,
  gives_up text not null check (gives_up in ('skip_verdict', 'retire_probe', 'drop')),
  unique (kind, urgency, needs_run)
);

-- The queue of work (LLM mode, and question embeddings in both modes). Ids only: no text derived
-- from memories, except last_error, which never holds any. Rows enter through roi.enqueue().
create table roi.work (
  id bigint generated always as identity primary key,
  kind text not null,
  owner_id uuid not null references auth.users (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  run_id uuid references roi.runs (id) on delete cascade,
  attempts integer not null default 0,
  run_after timestamptz not null default now(),
  lease_until timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  -- The kind's urgency and whether it belongs to a run, copied by roi.enqueue: the claim's order is
  -- then read from work_due_idx alone (a join on roi.work_kinds could not be ordered by an index).
  -- The foreign key holds the copies equal to the kind's row (MATCH FULL: an unknown kind, or a row
  -- queued without its copies, is refused) and carries a change of a kind's urgency to its rows.
  urgency smallint,
  needs_run boolean,
  constraint work_kind_is_known foreign key (kind, urgency, needs_run)
    references roi.work_kinds (kind, urgency, needs_run) match full on update cascade,
  constraint work_run_belongs_to_its_kind check ((run_id is not null) = needs_run),
  unique nulls not distinct (kind, probe_id, run_id)
);

-- The judge's free-text reason (or, for a skipped verdict, the last error) is derived from memory
-- text, so it stays out of roi.verdicts, which owners read. Only the worker role reads it.
create table roi.verdict_notes (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  note text not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id)
);

-- An owner's own provider key (one per provider, as litellm names providers: openai, anthropic, …).
create table roi.provider_keys (
  owner_id uuid not null references auth.users (id) on delete cascade,
  provider text not null check (provider ~ '^[a-z0-9_]+$'),
  encrypted_key bytea not null,
  updated_at timestamptz not null default now(),
  primary key (owner_id, provider)
);

insert into roi.work_kinds (kind, urgency, needs_run, shows_snapshot, gives_up) values
  ('judge', 0, true, true, 'skip_verdict'),
  ('closed_book', 1, true, false, 'drop'),
  ('judge_withheld', 1, true, true, 'drop'),
  ('judge_reversed', 1, true, true, 'drop'),
  ('write_question', 2, false, false, 'retire_probe'),
  ('embed_question', 3, false, false, 'drop');

-- ============================================================================================
-- Indexes
-- ============================================================================================
-- None on attempts or lease_until: a claim's lease is then a HOT update, with no index entry to add.
create index work_due_idx on roi.work (urgency, run_after, id);
create index work_probe_idx on roi.work (probe_id);
create index work_run_idx on roi.work (run_id) where run_id is not null;
create index work_owner_idx on roi.work (owner_id);
create index verdict_notes_probe_idx on roi.verdict_notes (probe_id);
create index verdict_notes_owner_idx on roi.verdict_notes (owner_id);

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
create function roi.record_question(target_probe uuid, new_question text, new_origin text default 'model',
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

-- The embedding of an active probe's question (embed_question work): stored, the row gone. With no
-- embedding (embeddings are off for this worker) the row just leaves: the lexical leg serves the
-- question. False when nothing was stored (the row had left, or the probe is no longer active).
create function roi.record_question_embedding(target_probe uuid, new_embedding extensions.vector,
  new_embedding_model text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job bigint;
  stored boolean := false;
begin
  select w.id into job from roi.work w
  where w.kind = 'embed_question' and w.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  if new_embedding is not null then
    update roi.probes p
    set question_embedding = new_embedding, question_embedding_model = new_embedding_model
    where p.id = target_probe and p.state = 'active';
    stored := found;
  end if;
  delete from roi.work w where w.id = job;
  return stored;
end
$$;

-- The second offline model's (MiniLM) embedding of a question, stored beside the first in the same
-- transaction and before it: roi.record_question and roi.record_question_embedding hand the probe
-- on, and the worker may update a probe only while it is pending or has embed_question work (its
-- policy). False when the worker may no longer write the probe.
create function roi.record_question_embedding_minilm(target_probe uuid, new_embedding extensions.vector,
  new_embedding_model text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  update roi.probes p
  set question_embedding_minilm = new_embedding, question_embedding_minilm_model = new_embedding_model
  where p.id = target_probe and p.state in ('pending', 'active');
  return found;
end
$$;

-- `zm-roi embed` (as roi_embedder, which never reads a question): queue embed_question work for the
-- active questions not embedded by `model` (or, when given, by `minilm_model` in the second leg), for
-- the worker to embed. Returns how many were queued.
create function roi.queue_question_embeddings(model text, minilm_model text default null) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  queued integer;
begin
  select coalesce(sum(roi.enqueue('embed_question', o.owner_id, o.probes)), 0) into queued
  from (select p.owner_id, array_agg(p.id) as probes from roi.probes p
        where p.state = 'active'
          and (p.question_embedding_model is distinct from model
               or (minilm_model is not null and p.question_embedding_minilm_model is distinct from minilm_model))
        group by p.owner_id) o;
  return queued;
end
$$;

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

-- Every model call leaves a usage event, written by the worker in the same transaction as the result
-- it produced (question, verdict, spot-check, embedding or failure), attributed to the owner whose
-- corpus was measured, with what it cost (null when the model has no price in litellm's map).
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
  select w.id, w.owner_id into job from roi.work w
  where w.kind = 'closed_book' and w.run_id = target_run and w.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  insert into roi.closed_book_results (run_id, probe_id, owner_id, bare_correct)
  values (target_run, target_probe, job.owner_id, correct)
  on conflict (run_id, probe_id) do nothing;
  get diagnostics recorded = row_count;
  delete from roi.work w where w.id = job.id;
  return recorded > 0;
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

-- Keep an owner's own provider key, encrypted under the operator's passphrase (see the header).
-- For `zm-roi set-key`, run by the database owner; no API role may call it.
create function roi.store_provider_key(target_owner uuid, key_provider text, api_key text, passphrase text)
  returns void
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  if nullif(btrim(coalesce(api_key, '')), '') is null then
    raise exception 'an empty provider key cannot be stored' using errcode = '22023';
  end if;
  if nullif(passphrase, '') is null then
    raise exception 'a provider key is stored encrypted: set ZM_KEY_ENCRYPTION_KEY' using errcode = '22023';
  end if;
  insert into roi.provider_keys (owner_id, provider, encrypted_key)
  values (target_owner, key_provider,
          extensions.pgp_sym_encrypt(btrim(api_key), passphrase, 'cipher-algo=aes256'))
  on conflict (owner_id, provider) do update
  set encrypted_key = excluded.encrypted_key, updated_at = now();
end
$$;

-- The owner's own key for the call the worker is about to make, or null when they stored none (the
-- call then runs on the deployment's key). A stored key that cannot be decrypted is an error, never
-- a silent fallback to the deployment's key.
create function roi.owner_provider_key(target_owner uuid, key_provider text, passphrase text) returns text
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  sealed bytea;
begin
  select k.encrypted_key into sealed from roi.provider_keys k
  where k.owner_id = target_owner and k.provider = key_provider;
  if sealed is null then
    return null;
  end if;
  if nullif(passphrase, '') is null then
    raise exception 'owner % stored their own % key, but ZM_KEY_ENCRYPTION_KEY is not set for the worker',
      target_owner, key_provider using errcode = '22023';
  end if;
  return extensions.pgp_sym_decrypt(sealed, passphrase);
end
$$;

-- ============================================================================================
-- Views
-- ============================================================================================

-- What the deployment's own provider keys paid for (tokens and cost), per day, purpose and model,
-- for operators.
-- Calls on an owner's own key are left out. Not granted to anon or authenticated.
create view roi.deployment_token_totals with (security_invoker = true) as
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
create trigger probes_queue_work_on_insert after insert on roi.probes
  for each row when (new.state = 'pending' or (new.state = 'active' and new.question_embedding is null))
  execute function roi.queue_probe_work();
create trigger probes_queue_work_on_state_change after update of state on roi.probes
  for each row when (old.state is distinct from new.state) execute function roi.queue_probe_work();

create trigger verdict_notes_are_append_only before update or delete on roi.verdict_notes
  for each row execute function roi.forbid_result_change();
create trigger verdict_notes_refuse_truncate before truncate on roi.verdict_notes
  for each statement execute function roi.forbid_result_truncate();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.work_kinds enable row level security;
alter table roi.work enable row level security;
alter table roi.verdict_notes enable row level security;
alter table roi.provider_keys enable row level security;

create policy "The worker reads the settings" on roi.settings
  for select to roi_worker using (true);

-- The worker sees a probe while it has work on it: that row is what it may read. (PostgreSQL also
-- checks an updated row against the select policy; the work row leaves only after the statement, by
-- trigger, so the probe the worker activates or retires is still in sight then.)
-- One select policy for the role (Supabase's advisor flags two permissive ones for one role and action).
create policy "The worker reads the probes it has work on" on roi.probes
  for select to roi_worker
  using (exists (select from roi.work w where w.probe_id = probes.id));
create policy "The worker writes questions into pending probes and embeddings into probes it embeds" on roi.probes
  for update to roi_worker
  using (state = 'pending'
         or exists (select from roi.work w where w.probe_id = probes.id and w.kind = 'embed_question'))
  with check (state <> 'retired' or retired_reason = 'generation_failed');

-- No secret in it: everyone who queues or claims work reads what each kind is.
create policy "Those who queue or claim work read the kinds of work" on roi.work_kinds
  for select to authenticated, roi_worker using (true);

create policy "The worker reads the queue" on roi.work
  for select to roi_worker using (true);
create policy "The worker leases queued work" on roi.work
  for update to roi_worker using (true) with check (true);
create policy "The worker removes finished work from the queue" on roi.work
  for delete to roi_worker using (true);
create policy "The worker queues the embedding of a question it wrote without one" on roi.work
  for insert to roi_worker with check (kind = 'embed_question');

create policy "Owners queue work only inside the benchmark" on roi.work
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "The worker reads the recall snapshots it judges" on roi.recalls
  for select to roi_worker
  using (exists (select from roi.work w
                 where w.kind = any (array(select k.kind from roi.work_kinds k where k.shows_snapshot))
                   and w.run_id = recalls.run_id and w.probe_id = recalls.probe_id));


create policy "The worker reads open runs" on roi.runs
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = runs.id));

create policy "The worker reads the verdicts of open runs" on roi.verdicts
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = verdicts.run_id));
create policy "The worker records verdicts for queued judgments only" on roi.verdicts
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'judge' and w.run_id = verdicts.run_id and w.probe_id = verdicts.probe_id));

create policy "The worker reads spot-check results" on roi.closed_book_results
  for select to roi_worker using (true);
create policy "The worker records results for queued spot-checks only" on roi.closed_book_results
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'closed_book' and w.run_id = closed_book_results.run_id
                        and w.probe_id = closed_book_results.probe_id));

create policy "The worker reads judge check results" on roi.judge_check_results
  for select to roi_worker using (true);
create policy "The worker records results for queued judge checks only" on roi.judge_check_results
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = judge_check_results.kind and w.run_id = judge_check_results.run_id
                        and w.probe_id = judge_check_results.probe_id));

create policy "The worker reads verdict notes" on roi.verdict_notes
  for select to roi_worker using (true);
create policy "The worker writes notes for queued judgments only" on roi.verdict_notes
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'judge' and w.run_id = verdict_notes.run_id
                        and w.probe_id = verdict_notes.probe_id));

create policy "The worker reads the judges of open runs" on roi.run_judges
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = run_judges.run_id));
create policy "The worker records the judge of queued judgments only" on roi.run_judges
  for insert to roi_worker
  with check (exists (select from roi.work w where w.kind = 'judge' and w.run_id = run_judges.run_id));

create policy "The worker reads run closures" on roi.run_closures
  for select to roi_worker using (true);
create policy "The worker closes runs that completed or that a spending cap stopped" on roi.run_closures
  for insert to roi_worker with check (reason in ('complete', 'aborted_budget'));

create policy "The worker reads pending runs" on roi.pending_runs
  for select to roi_worker using (true);
create policy "The worker marks pending runs closed" on roi.pending_runs
  for update to roi_worker using (true) with check (closed);

create policy "The worker reads the keys of owners it has work for" on roi.provider_keys
  for select to roi_worker
  using (exists (select from roi.work w where w.owner_id = provider_keys.owner_id));

create policy "The worker meters the calls it makes for queued rows" on public.usage_events
  for insert to roi_worker with check (probe_id is not null);
-- Counts, tokens and dollars, no text: what the spending caps are checked against (roi.budget_refusal),
-- for the owners it has work for, as it reads their keys.
create policy "The worker reads what owners it has work for spent, to hold the spending caps" on public.usage_events
  for select to roi_worker
  using (exists (select from roi.work w where w.owner_id = usage_events.owner_id));

-- ============================================================================================
-- Grants
-- ============================================================================================
grant usage on schema public, roi to roi_worker;
grant usage on schema extensions to roi_worker;

grant select on roi.work_kinds to authenticated, roi_worker;
grant select on roi.settings, roi.probes, roi.recalls, roi.runs, roi.verdicts,
  roi.verdict_notes, roi.run_closures, roi.pending_runs, roi.provider_keys to roi_worker;
grant update (question, state, activated_at, retired_reason, retired_at, last_error, question_embedding,
  question_embedding_model, question_embedding_minilm, question_embedding_minilm_model, question_origin,
  generator_fingerprint) on roi.probes to roi_worker;
grant select, insert on roi.run_judges to roi_worker;
grant select, insert, delete on roi.work to roi_worker;
grant update (attempts, run_after, lease_until, last_error) on roi.work to roi_worker;
grant insert on roi.verdicts, roi.verdict_notes, roi.run_closures to roi_worker;
grant update (closed) on roi.pending_runs to roi_worker;
grant select, insert on roi.closed_book_results to roi_worker;
grant select, insert on roi.judge_check_results to roi_worker;
grant select, insert on public.usage_events to roi_worker;
-- Owners queue work inside the benchmark (runs, spot-checks, their probes' questions and embeddings).
grant select, insert, delete on roi.work to authenticated;

revoke execute on function roi.enqueue(text, uuid, uuid[], uuid), roi.queue_probe_work(), roi.claim_work(), roi.release_work(bigint, integer, text),
  roi.record_question(uuid, text, text, text), roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.record_question_embedding(uuid, extensions.vector, text),
  roi.record_question_embedding_minilm(uuid, extensions.vector, text), roi.queue_question_embeddings(text, text),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.settle_judgment(bigint, boolean, boolean, real, text), roi.record_closed_book(uuid, uuid, boolean),
  roi.judge_check_surfaced(text, jsonb, uuid, text), roi.record_judge_check(uuid, uuid, text, boolean, boolean),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.store_provider_key(uuid, text, text, text), roi.owner_provider_key(uuid, text, text),
  roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid),
  roi.defer_work(bigint, integer, text), roi.question_length_bounds()
  from public, anon, authenticated;
grant execute on function roi.claim_work(), roi.release_work(bigint, integer, text),
  roi.record_question(uuid, text, text, text), roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.record_question_embedding(uuid, extensions.vector, text),
  roi.record_question_embedding_minilm(uuid, extensions.vector, text),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.settle_judgment(bigint, boolean, boolean, real, text), roi.record_closed_book(uuid, uuid, boolean),
  roi.judge_check_surfaced(text, jsonb, uuid, text), roi.record_judge_check(uuid, uuid, text, boolean, boolean),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.owner_provider_key(uuid, text, text), roi.close_run_if_done(uuid),
  roi.record_run_closure(uuid, text, text, text), roi.run_lock_key(uuid), roi.template_question(text, text, text),
  roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid),
  roi.defer_work(bigint, integer, text), roi.question_length_bounds(), roi.enqueue(text, uuid, uuid[], uuid),
  roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text)
  to roi_worker;
-- Owners queue work inside the benchmark (start_run, the checks of the judge, a probe's state change).
grant execute on function roi.enqueue(text, uuid, uuid[], uuid) to authenticated;

revoke all on roi.deployment_token_totals from public, anon, authenticated;
grant usage on schema roi to service_role;
grant select on roi.deployment_token_totals to service_role;
