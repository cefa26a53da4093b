-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- What the worker records and may touch: one record_… verb per kind of work (the queue they take it
-- from is 50_roi_queue.sql), metering and the spending caps, own provider keys, and every policy and
-- grant of the roi_worker role.
--
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
-- Own provider keys. An owner's key is stored encrypted with pgcrypto under a passphrase that lives
-- only in the environment of `zm-roi set-key` and of the worker (ZM_KEY_ENCRYPTION_KEY), never in
-- the database. The same column works unchanged on Supabase (pgcrypto sits in `extensions`).
-- Supabase Vault would keep the secret inside the database instead; reading vault.decrypted_secrets
-- as SECURITY INVOKER would need `grant select on vault.decrypted_secrets to roi_worker`, which opens
-- every secret of the project to the worker, and definer-rights functions are ruled out. So Vault is
-- deliberately not wired in: an operator who prefers it stores the key with vault.create_secret(),
-- makes that grant knowingly, and swaps the body of roi.owner_provider_key() for a Vault read.

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

grant select on roi.settings, roi.probes, roi.recalls, roi.runs, roi.verdicts,
  roi.verdict_notes, roi.run_closures, roi.pending_runs, roi.provider_keys to roi_worker;
grant update (question, state, activated_at, retired_reason, retired_at, last_error, question_embedding,
  question_embedding_model, question_embedding_minilm, question_embedding_minilm_model, question_origin,
  generator_fingerprint) on roi.probes to roi_worker;
grant select, insert on roi.run_judges to roi_worker;
grant insert on roi.verdicts, roi.verdict_notes, roi.run_closures to roi_worker;
grant update (closed) on roi.pending_runs to roi_worker;
grant select, insert on roi.closed_book_results to roi_worker;
grant select, insert on roi.judge_check_results to roi_worker;
grant select, insert on public.usage_events to roi_worker;

revoke execute on function roi.record_question(uuid, text, text, text), roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.record_question_embedding(uuid, extensions.vector, text),
  roi.record_question_embedding_minilm(uuid, extensions.vector, text), roi.queue_question_embeddings(text, text),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.record_closed_book(uuid, uuid, boolean), roi.record_judge_check(uuid, uuid, text, boolean, boolean),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.store_provider_key(uuid, text, text, text), roi.owner_provider_key(uuid, text, text),
  roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid),
  roi.question_length_bounds()
  from public, anon, authenticated;
grant execute on function roi.record_question(uuid, text, text, text), roi.record_question(uuid, text, extensions.vector, text, text, text),
  roi.record_question_embedding(uuid, extensions.vector, text),
  roi.record_question_embedding_minilm(uuid, extensions.vector, text),
  roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.record_closed_book(uuid, uuid, boolean), roi.record_judge_check(uuid, uuid, text, boolean, boolean),
  roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.owner_provider_key(uuid, text, text), roi.close_run_if_done(uuid),
  roi.record_run_closure(uuid, text, text, text), roi.run_lock_key(uuid), roi.template_question(text, text, text),
  roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid),
  roi.question_length_bounds(),
  roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text)
  to roi_worker;

revoke all on roi.deployment_token_totals from public, anon, authenticated;
grant usage on schema roi to service_role;
grant select on roi.deployment_token_totals to service_role;
