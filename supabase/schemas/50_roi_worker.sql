-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- sql/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (README, "Changing the schema"); tests/test_schema_files.py builds a
-- database from each and prints any difference.
--
-- The LLM worker: a least-privilege role that claims queued rows (pending probes, queued
-- judgments, queued closed-book spot-checks) with a lease, writes questions (with their embeddings),
-- verdicts and spot-check results through the verbs below, and meters every model call, with its
-- cost, in the same transaction as its result.
--
-- roi_worker sees only what queued rows carry: a pending probe's source snapshot, for a queued
-- judgment its question, ground truth and recall snapshot, and for a queued spot-check its question
-- and ground truth. It has no privilege on public.memories,
-- so it cannot top up pools: when its verdict closes a run (roi.close_run_if_done), the next upkeep
-- cycle (roi.upkeep(), pg_cron every minute, impersonating the owner) rotates and tops up that pool.
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

-- ============================================================================================
-- Indexes
-- ============================================================================================
create index verdict_notes_probe_idx on roi.verdict_notes (probe_id);
create index verdict_notes_owner_idx on roi.verdict_notes (owner_id);

-- ============================================================================================
-- Functions
-- ============================================================================================

-- A failed generation attempt goes back to the queue after a backoff that grows with each attempt
-- (graphile-worker's formula), or retires the probe as 'generation_failed' after max_attempts.
-- `attempt` fences a stale worker: once the probe was released or claimed again, a release of that
-- attempt changes nothing.
create function roi.release_generation(target_probe uuid, attempt integer, failure text) returns text
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  tries integer;
begin
  select p.attempts into tries from roi.probes p
  where p.id = target_probe and p.state = 'pending' and p.lease_until is not null
  for update;
  if not found or tries <> attempt then
    return 'stale';
  end if;
  if tries < (select s.max_attempts from roi.settings s) then
    update roi.probes p
    set lease_until = null,
        last_error = left(failure, 1000),
        run_after = greatest(now(), p.run_after) + exp(least(p.attempts, 10)) * interval '1 second'
    where p.id = target_probe;
    return 'retry';
  end if;
  update roi.probes p
  set state = 'retired', retired_reason = 'generation_failed', retired_at = now(),
      lease_until = null, last_error = left(failure, 1000)
  where p.id = target_probe;
  return 'retired';
end
$$;

-- Hands a worker the next pending probe that is due and not leased, under a fresh lease: a crashed
-- worker's probe comes back by itself once the lease runs out. A probe whose last allowed attempt
-- died with its worker is retired first, as a failing attempt would have retired it.
create function roi.claim_generation()
  returns table (probe_id uuid, owner_id uuid, attempt integer, source_kind text, source_title text,
                 source_body text)
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  abandoned record;
begin
  select * into config from roi.settings;
  for abandoned in
    select p.id, p.attempts from roi.probes p
    where p.state = 'pending' and p.attempts >= config.max_attempts and p.lease_until < now()
    for update skip locked
  loop
    perform roi.release_generation(abandoned.id, abandoned.attempts, 'the worker stopped during its last attempt');
  end loop;

  return query
  with next as (
    select p.id from roi.probes p
    where p.state = 'pending' and p.run_after <= now() and (p.lease_until is null or p.lease_until < now())
    order by p.run_after, p.id
    limit 1
    for update skip locked
  )
  update roi.probes p
  set attempts = p.attempts + 1, lease_until = now() + config.lease_duration
  from next
  where p.id = next.id
  returning p.id, p.owner_id, p.attempts, p.source_kind, p.source_title, p.source_body;
end
$$;

-- The question the worker wrote for a claimed probe: the probe joins the pool, marked with where its
-- question came from ('model'; 'retry' when the gate refused the first and the model's second passed;
-- 'template' when both failed: new_question is then ignored and the probe takes its template
-- question) and which generator wrote it. False when the probe is no longer pending (another worker
-- got there first, or upkeep retired it): the question is dropped.
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
  set question = btrim(written), state = 'active', activated_at = now(),
      lease_until = null, last_error = null, question_origin = new_origin, generator_fingerprint = new_generator
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
  select j.run_id, j.probe_id, j.owner_id, p.memory_id into job
  from roi.judgments j join roi.probes p on p.id = j.probe_id
  where j.id = job_id;
  if not found then
    return false;
  end if;
  insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, confidence,
                            skipped, skip_reason, judged_by)
  values (job.run_id, job.probe_id, job.owner_id, job.memory_id, judged_with_memory, judged_without_memory,
          judged_confidence, judged_with_memory is null,
          case when judged_with_memory is null then 'judge_failed' end, 'llm')
  on conflict (run_id, probe_id) do nothing;
  get diagnostics recorded = row_count;
  if recorded > 0 and nullif(btrim(coalesce(settled_note, '')), '') is not null then
    insert into roi.verdict_notes (run_id, probe_id, owner_id, note)
    values (job.run_id, job.probe_id, job.owner_id, left(settled_note, 2000));
  end if;
  delete from roi.judgments j where j.id = job_id;
  perform roi.close_run_if_done(job.run_id);
  return recorded > 0;
end
$$;

-- A failed judging attempt goes back to the queue after a growing backoff; after max_attempts the
-- probe is recorded as skipped ('judge_failed', the last error kept in the gated notes), so a
-- judgment failure never fails a run: it completes and counts what was judged. Fenced by `attempt`.
create function roi.release_judgment(target_run uuid, target_probe uuid, attempt integer, failure text)
  returns text
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
begin
  select j.id, j.attempts into job from roi.judgments j
  where j.run_id = target_run and j.probe_id = target_probe and j.lease_until is not null
  for update;
  if not found or job.attempts <> attempt then
    return 'stale';
  end if;
  if job.attempts < (select s.max_attempts from roi.settings s) then
    update roi.judgments j
    set lease_until = null,
        last_error = left(failure, 1000),
        run_after = greatest(now(), j.run_after) + exp(least(j.attempts, 10)) * interval '1 second'
    where j.id = job.id;
    return 'retry';
  end if;
  perform roi.settle_judgment(job.id, null, null, null, coalesce(nullif(failure, ''), 'judge failed'));
  return 'skipped';
end
$$;

-- Hands a worker the next queued judgment that is due and not leased, with everything the judge
-- needs: the question, the ground truth and what recall surfaced. Leased like claim_generation(); a
-- judgment whose last allowed attempt died with its worker is recorded as skipped first.
create function roi.claim_judgment()
  returns table (run_id uuid, probe_id uuid, owner_id uuid, attempt integer, question text,
                 source_kind text, source_title text, source_body text, surfaced jsonb)
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  abandoned record;
begin
  select * into config from roi.settings;
  for abandoned in
    select j.run_id, j.probe_id, j.attempts from roi.judgments j
    where j.attempts >= config.max_attempts and j.lease_until < now()
    for update skip locked
  loop
    perform roi.release_judgment(abandoned.run_id, abandoned.probe_id, abandoned.attempts,
                                 'the worker stopped during its last attempt');
  end loop;

  return query
  with next as (
    select j.id from roi.judgments j
    where j.run_after <= now() and (j.lease_until is null or j.lease_until < now())
    order by j.run_after, j.id
    limit 1
    for update skip locked
  ), claimed as (
    update roi.judgments j
    set attempts = j.attempts + 1, lease_until = now() + config.lease_duration
    from next
    where j.id = next.id
    returning j.run_id, j.probe_id, j.owner_id, j.attempts
  )
  select c.run_id, c.probe_id, c.owner_id, c.attempts, p.question, p.source_kind, p.source_title,
         p.source_body, r.surfaced
  from claimed c
  join roi.probes p on p.id = c.probe_id
  join roi.recalls r on r.run_id = c.run_id and r.probe_id = c.probe_id;
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
  select j.id, j.owner_id into job from roi.judgments j
  where j.run_id = target_run and j.probe_id = target_probe
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
-- it produced (question, verdict, spot-check or failure), attributed to the owner whose corpus was
-- measured, with what it cost (null when the model has no price in litellm's map).
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
create trigger verdict_notes_are_append_only before update or delete on roi.verdict_notes
  for each row execute function roi.forbid_result_change();
create trigger verdict_notes_refuse_truncate before truncate on roi.verdict_notes
  for each statement execute function roi.forbid_result_truncate();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.verdict_notes enable row level security;
alter table roi.provider_keys enable row level security;

create policy "The worker reads the settings" on roi.settings
  for select to roi_worker using (true);

-- PostgreSQL also checks an updated row against the select policy, so the probe the worker activates
-- or retires stays visible within that one transaction (now() is the transaction's start), and not after.
-- One select policy for the role (Supabase's advisor flags two permissive ones for one role and action).
create policy "The worker reads pending probes and the probes it judges or spot-checks" on roi.probes
  for select to roi_worker
  using (state = 'pending' or activated_at = now() or retired_at = now()
         or exists (select from roi.judgments j where j.probe_id = probes.id)
         or exists (select from roi.closed_book_queue q where q.probe_id = probes.id));
create policy "The worker writes questions into pending probes" on roi.probes
  for update to roi_worker
  using (state = 'pending')
  with check (state <> 'retired' or retired_reason = 'generation_failed');

create policy "The worker reads the judging queue" on roi.judgments
  for select to roi_worker using (true);
create policy "The worker leases queued judgments" on roi.judgments
  for update to roi_worker using (true) with check (true);
create policy "The worker removes judged rows from the queue" on roi.judgments
  for delete to roi_worker using (true);

create policy "The worker reads the recall snapshots it judges" on roi.recalls
  for select to roi_worker
  using (exists (select from roi.judgments j where j.run_id = recalls.run_id and j.probe_id = recalls.probe_id));

create policy "The worker reads open runs" on roi.runs
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = runs.id));

create policy "The worker reads the verdicts of open runs" on roi.verdicts
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = verdicts.run_id));
create policy "The worker records verdicts for queued judgments only" on roi.verdicts
  for insert to roi_worker
  with check (exists (select from roi.judgments j where j.run_id = verdicts.run_id and j.probe_id = verdicts.probe_id));

create policy "The worker reads the spot-check queue" on roi.closed_book_queue
  for select to roi_worker using (true);
create policy "The worker leases queued spot-checks" on roi.closed_book_queue
  for update to roi_worker using (true) with check (true);
create policy "The worker removes finished spot-checks from the queue" on roi.closed_book_queue
  for delete to roi_worker using (true);

create policy "The worker reads spot-check results" on roi.closed_book_results
  for select to roi_worker using (true);
create policy "The worker records results for queued spot-checks only" on roi.closed_book_results
  for insert to roi_worker
  with check (exists (select from roi.closed_book_queue q
                      where q.run_id = closed_book_results.run_id and q.probe_id = closed_book_results.probe_id));

create policy "The worker reads verdict notes" on roi.verdict_notes
  for select to roi_worker using (true);
create policy "The worker writes notes for queued judgments only" on roi.verdict_notes
  for insert to roi_worker
  with check (exists (select from roi.judgments j
                      where j.run_id = verdict_notes.run_id and j.probe_id = verdict_notes.probe_id));

create policy "The worker reads the judges of open runs" on roi.run_judges
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = run_judges.run_id));
create policy "The worker records the judge of queued judgments only" on roi.run_judges
  for insert to roi_worker
  with check (exists (select from roi.judgments j where j.run_id = run_judges.run_id));

create policy "The worker reads run closures" on roi.run_closures
  for select to roi_worker using (true);
create policy "The worker closes completed runs" on roi.run_closures
  for insert to roi_worker with check (reason = 'complete');

create policy "The worker reads pending runs" on roi.pending_runs
  for select to roi_worker using (true);
create policy "The worker marks pending runs closed" on roi.pending_runs
  for update to roi_worker using (true) with check (closed);

create policy "The worker reads the keys of owners it has work for" on roi.provider_keys
  for select to roi_worker
  using (owner_id in (select p.owner_id from roi.probes p));

create policy "The worker meters the calls it makes for queued rows" on public.usage_events
  for insert to roi_worker with check (probe_id is not null);

-- ============================================================================================
-- Grants
-- ============================================================================================
grant usage on schema public, roi to roi_worker;
grant usage on schema extensions to roi_worker;

grant select on roi.settings, roi.probes, roi.judgments, roi.recalls, roi.runs, roi.verdicts,
  roi.verdict_notes, roi.run_closures, roi.pending_runs, roi.provider_keys to roi_worker;
grant update (question, state, activated_at, retired_reason, retired_at, attempts, run_after, lease_until,
  last_error, question_embedding, question_embedding_model, question_origin, generator_fingerprint)
  on roi.probes to roi_worker;
grant select, insert on roi.run_judges to roi_worker;
grant update (attempts, run_after, lease_until, last_error), delete on roi.judgments to roi_worker;
grant insert on roi.verdicts, roi.verdict_notes, roi.run_closures to roi_worker;
grant update (closed) on roi.pending_runs to roi_worker;
grant select, delete on roi.closed_book_queue to roi_worker;
grant update (attempts, run_after, lease_until, last_error) on roi.closed_book_queue to roi_worker;
grant select, insert on roi.closed_book_results to roi_worker;
grant insert on public.usage_events to roi_worker;

revoke execute on function roi.claim_generation(), roi.record_question(uuid, text, text, text),
  roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.release_generation(uuid, integer, text), roi.claim_judgment(),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.release_judgment(uuid, uuid, integer, text), roi.settle_judgment(bigint, boolean, boolean, real, text),
  roi.claim_closed_book(), roi.record_closed_book(uuid, uuid, boolean),
  roi.release_closed_book(uuid, uuid, integer, text),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.store_provider_key(uuid, text, text, text), roi.owner_provider_key(uuid, text, text)
  from public, anon, authenticated;
grant execute on function roi.claim_generation(), roi.record_question(uuid, text, text, text),
  roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.release_generation(uuid, integer, text), roi.claim_judgment(),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.release_judgment(uuid, uuid, integer, text), roi.settle_judgment(bigint, boolean, boolean, real, text),
  roi.claim_closed_book(), roi.record_closed_book(uuid, uuid, boolean),
  roi.release_closed_book(uuid, uuid, integer, text),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.owner_provider_key(uuid, text, text), roi.close_run_if_done(uuid), roi.template_question(text, text, text)
  to roi_worker;

revoke all on roi.deployment_token_totals from public, anon, authenticated;
grant usage on schema roi to service_role;
grant select on roi.deployment_token_totals to service_role;
