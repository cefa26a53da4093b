-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- What model calls cost and whose key pays: the worker's metering (roi.record_usage) and what it may
-- read of usage events to hold the spending caps, the caps themselves, the owners' own provider keys,
-- and the deployment's token totals for operators. Cut here because it reads the queue (whose owners
-- the worker may meter) and the runs a cap closes, and nothing reads it but the worker and operators.
--
-- The worker meters every model call, with its cost, in the same transaction as its result, and
-- before each call asks roi.budget_refusal whether the spending caps allow it: a run the caps stop
-- closes as 'aborted_budget' (roi.abort_run_for_budget); a question waits (roi.defer_work).
--
-- Own provider keys. An owner's key is stored encrypted with pgcrypto under a passphrase that lives
-- only in the environment of `zm-roi set-key` and of the worker (ZM_KEY_ENCRYPTION_KEY), never in
-- the database. The same column works unchanged on Supabase (pgcrypto sits in `extensions`).
-- Supabase Vault would keep the secret inside the database instead; reading vault.decrypted_secrets
-- as SECURITY INVOKER would need `grant select on vault.decrypted_secrets to roi_worker`, which opens
-- every secret of the project to the worker, and definer-rights functions are ruled out. So Vault is
-- deliberately not wired in: an operator who prefers it stores the key with vault.create_secret(),
-- makes that grant knowingly, and swaps the body of roi.owner_provider_key() for a Vault read.

-- ============================================================================================
-- Tables
-- ============================================================================================
-- An owner's own provider key (one per provider, as litellm names providers: openai, anthropic, …).
create table roi.provider_keys (
  owner_id uuid not null references auth.users (id) on delete cascade,
  provider text not null check (provider ~ '^[a-z0-9_]+$'),
  encrypted_key bytea not null,
  updated_at timestamptz not null default now(),
  primary key (owner_id, provider)
);

-- ============================================================================================
-- Functions
-- ============================================================================================
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
-- Who reads and writes each table
-- ============================================================================================
alter table roi.provider_keys enable row level security;
create policy "The worker reads the keys of owners it has work for" on roi.provider_keys
  for select to roi_worker
  using (exists (select from roi.work w where w.owner_id = provider_keys.owner_id));
grant select on roi.provider_keys to roi_worker;

-- The worker's side of public.usage_events (10_memory_core.sql): it meters its calls and reads what
-- the owners it has work for spent.
create policy "The worker meters the calls it makes for queued rows" on public.usage_events
  for insert to roi_worker with check (probe_id is not null);
-- Counts, tokens and dollars, no text: what the spending caps are checked against (roi.budget_refusal),
-- for the owners it has work for, as it reads their keys.
create policy "The worker reads what owners it has work for spent, to hold the spending caps" on public.usage_events
  for select to roi_worker
  using (exists (select from roi.work w where w.owner_id = usage_events.owner_id));
grant select, insert on public.usage_events to roi_worker;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid), roi.owner_provider_key(uuid, text, text),
  roi.store_provider_key(uuid, text, text, text)
  from public, anon, authenticated;
grant execute on function roi.record_usage(uuid, text, text, uuid, uuid, integer, integer, boolean, numeric),
  roi.budget_refusal(uuid, uuid, numeric, boolean), roi.abort_run_for_budget(uuid), roi.owner_provider_key(uuid, text, text)
  to roi_worker;

revoke all on roi.deployment_token_totals from public, anon, authenticated;
grant select on roi.deployment_token_totals to service_role;
