-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The ROI benchmark's tables, part 1 of 2: the gate and the guards every roi table relies on, the
-- settings, the probes (the questions), the runs and the runs still needing attention, and the one
-- queue of work with its kinds. Cut here because roi.work refers to probes and runs, and the worker's
-- and the embedder's policies on probes refer to roi.work: these tables stand together. Every policy
-- and grant on each table sits beside it, whoever it is for (owners through the API, the worker, the
-- embedder): this file answers "who can read a question's text". What runs record: 31_roi_results.sql.
--
-- Privacy model. Everything lives in the private schema `roi`, which the Data API does not expose.
-- Rows that carry text derived from memories (probe questions and source snapshots, recall
-- snapshots, the judging queue) are readable by their owner only while the transaction-local gate
-- `roi.inside_benchmark` is on, which only benchmark_memory() (and upkeep, impersonating the owner)
-- turns on, and off again before it returns. Data API clients cannot set settings, so through the
-- API those rows are unreadable even to their owner. Runs, verdicts (booleans and ids) and closures
-- carry no text; their owner reads them, which is what lets the security_invoker views aggregate.
-- The retrieval figures need the source's rank among the surfaced results and the probe's kind and
-- scope, so roi.start_run copies those text-free facts into roi.recall_outcomes, which the
-- owner reads as they read verdicts. The work queue (roi.work, below) carries ids only;
-- closed-book and judge-check results are booleans the owner reads. The bare model's answer is never
-- stored.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The gate for rows that carry memory text: on only inside benchmark_memory() and upkeep. Every
-- policy on a question-bearing table reads it, once a statement: ~30 times a benchmark call. PL/pgSQL,
-- not SQL: a SQL function with `set search_path` is never inlined, so each statement parsed and planned
-- its body again; PL/pgSQL keeps its expression prepared for the session (docs/decisions/0042).
create function roi.inside_benchmark() returns boolean
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return coalesce(current_setting('roi.inside_benchmark', true), '') = 'on';
end
$$;

-- Opening and closing the gate: once a benchmark call, once an owner in upkeep. PL/pgSQL for the
-- reason above.
create function roi.open_gate() returns void
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  perform set_config('roi.inside_benchmark', 'on', true);
end
$$;

create function roi.close_gate() returns void
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  perform set_config('roi.inside_benchmark', '', true);
end
$$;

-- Results are append-only. The one exception is erasing a user: the cascade from auth.users
-- removes their results with them (the owner no longer exists when this trigger runs). A result
-- table with no owner (roi.judge_calibrations: the operator's) takes no exception: the owner is
-- read through jsonb, since naming old.owner_id fails on a row that has no such field.
create function roi.forbid_result_change() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  row_owner uuid := (to_jsonb(old) ->> 'owner_id')::uuid;
begin
  if tg_op = 'DELETE' and row_owner is not null
     and not exists (select from auth.users u where u.id = row_owner) then
    return old;
  end if;
  raise exception 'roi.%: recorded results are append-only (% refused)', tg_table_name, lower(tg_op)
    using errcode = 'insufficient_privilege';
end
$$;

-- TRUNCATE fires no row trigger, so the table owner could otherwise empty a result table in one
-- statement: a statement-level trigger refuses it, for every role including the owner. (Erasing a
-- user still works: that is a DELETE cascade.)
create function roi.forbid_result_truncate() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  raise exception 'roi.%: recorded results are append-only (truncate refused)', tg_table_name
    using errcode = 'insufficient_privilege';
end
$$;

-- ============================================================================================
-- Tables
-- ============================================================================================
-- One row of knobs. `extractor` is written by `zm-roi db up` / `zm-roi configure` locally.
create table roi.settings (
  singleton boolean primary key default true check (singleton),
  pool_target integer not null default 20 check (pool_target between 1 and 200),
  rotation_per_run integer not null default 3 check (rotation_per_run >= 0),
  run_timeout interval not null default interval '15 minutes',
  lease_duration interval not null default interval '2 minutes',
  max_attempts integer not null default 5 check (max_attempts >= 1),
  extractor text not null default 'llm' check (extractor in ('llm', 'deterministic')),
  -- How long a concurrent benchmark call waits for the owner's lock before answering `in_progress`.
  owner_lock_wait interval not null default interval '30 seconds'
    check (owner_lock_wait between interval '0 seconds' and interval '5 minutes'),
  -- Probes per run whose question the worker also puts to the model with no memory at all (LLM mode).
  closed_book_checks integer not null default 0 check (closed_book_checks between 0 and 200),
  -- The recall the benchmark calls, as a regprocedure text (`public.recall(text,uuid,…)`); resolved
  -- on every run, so a dropped function fails the run with a clear message instead of calling another.
  recall_function text not null
    default 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)',
  -- Probes per LLM run the judge sees again with the source withheld (judge_withheld) and with the
  -- results in reverse order (judge_reversed): 3 each, so every run is checked, at 6 extra judge calls
  -- per run (+30% of a 20-question run's judge calls; docs/reading-a-run.md, "Judge checks").
  withheld_source_checks integer not null default 3 check (withheld_source_checks between 0 and 200),
  order_checks integer not null default 3 check (order_checks between 0 and 200),
  -- How many query embeddings that recall takes after its five arguments (0, 1: the first model's, 2:
  -- also MiniLM's): recorded whenever recall_function is written (roi.note_recall_embeddings), read by
  -- every run.
  recall_embeddings smallint not null default 2 check (recall_embeddings between 0 and 2),
  -- The tile's rerun_hint appears once this many knowledge memories were learned or invalidated
  -- since the latest run started. 20, the default pool target: by then the memories learned could
  -- make a whole pool of fresh questions, and the corpus the last score describes has changed by as
  -- much as the benchmark asks about; far fewer would move a 20-question rate by less than its
  -- interval (about 40 points wide) can show.
  rerun_hint_growth integer not null default 20 check (rerun_hint_growth >= 1),
  -- Spending caps in US dollars by litellm's local price map (null: no cap). The worker starts no model
  -- call whose estimated cost would take a run's deployment-key spend past max_run_cost_usd, or an
  -- owner's spend this calendar month (UTC, own key included) past max_owner_cost_usd_per_month
  -- (roi.budget_refusal; docs/spending-and-schedule.md).
  max_run_cost_usd numeric check (max_run_cost_usd >= 0),
  max_owner_cost_usd_per_month numeric check (max_owner_cost_usd_per_month >= 0),
  -- The length of every schedule's period when set (null: a day for daily, a week for weekly): for
  -- tests, which cannot wait a day for pg_cron (roi.schedule_period).
  schedule_period_override interval check (schedule_period_override >= interval '1 minute')
);
insert into roi.settings default values;

-- Record how many query embeddings the recall being configured takes (its vector arguments after the
-- five of the contract), once, where recall_function is written (`zm-roi configure`, or an operator's
-- update): every run reads the answer.
create function roi.note_recall_embeddings() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  new.recall_embeddings := coalesce(
    (select count(*) filter (where u.o > 5 and u.t = 'extensions.vector'::regtype)
     from pg_catalog.pg_proc p, unnest(p.proargtypes::oid[]) with ordinality u (t, o)
     where p.oid = to_regprocedure(new.recall_function) and p.pronargs <= 7), 0);
  return new;
end
$$;

create trigger settings_note_recall_embeddings before insert or update of recall_function on roi.settings
  for each row execute function roi.note_recall_embeddings();

-- A probe: one question about one source memory, for one owner, pinned where its truth lives.
-- A pending probe waits for the worker to write its question (a write_question row in roi.work).
create table roi.probes (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid not null references auth.users (id) on delete cascade,
  memory_id uuid not null,
  source_kind text not null check (source_kind in ('decision', 'gotcha', 'convention')),
  source_scope text not null check (source_scope in ('personal', 'project', 'team')),
  source_title text not null,
  source_body text not null,
  pin_project_id uuid,
  pin_team_id uuid,
  question text,
  state text not null default 'pending' check (state in ('pending', 'active', 'retired')),
  retired_reason text check (retired_reason in
    ('source_invalidated', 'source_unreachable', 'rotated', 'generation_failed')),
  -- Why the worker gave up writing its question (a probe retired as 'generation_failed').
  last_error text,
  created_at timestamptz not null default now(),
  activated_at timestamptz,
  retired_at timestamptz,
  -- The question's embedding and its model, for the semantic leg of recall: written by the worker,
  -- with the question it writes or as embed_question work for a templated one.
  question_embedding extensions.vector(384),
  question_embedding_model text,
  -- Where the question came from (LLM mode: 'model'; 'retry' when the question gate refused the first
  -- and the model's second passed; 'template' when both failed), and which generator wrote it (model
  -- and prompt hash, prompts.fingerprint). Null for questions written in deterministic mode.
  question_origin text check (question_origin in ('model', 'retry', 'template')),
  generator_fingerprint text,
  -- The second offline model's (MiniLM) embedding of the question, for recall's third leg: written
  -- by the worker in the same transaction as the first (roi.record_question_embedding_minilm).
  question_embedding_minilm extensions.vector(384),
  question_embedding_minilm_model text,
  unique (owner_id, memory_id),
  -- The one home of a question's length: roi.question_length_bounds() reads these two numbers from
  -- here for the SQL gate (roi.record_question) and the worker's (zm_roi/prompts.py), so changing
  -- them here changes what every gate accepts. Template questions stay well inside (30..~180).
  constraint probes_question_length check (length(question) between 10 and 300),
  check (state <> 'active' or question is not null),
  check (state <> 'pending' or question is null),
  check ((state = 'retired') = (retired_reason is not null))
);

create index probes_owner_state_idx on roi.probes (owner_id, state);

create table roi.runs (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid not null references auth.users (id) on delete cascade,
  mode text not null check (mode in ('llm', 'deterministic')),
  probe_count integer not null check (probe_count > 0),
  started_at timestamptz not null default now(),
  -- What produced the run: the recall function and the embedding models of its questions, one per
  -- semantic leg the recall took (null when the questions carried no such embedding, or the recall
  -- takes none, i.e. only the lexical leg could run).
  recall_function text,
  embedding_model text,
  embedding_minilm_model text
);

create index runs_owner_started_idx on roi.runs (owner_id, started_at desc);

create trigger runs_are_append_only before update or delete on roi.runs
  for each row execute function roi.forbid_result_change();
create trigger runs_refuse_truncate before truncate on roi.runs
  for each statement execute function roi.forbid_result_truncate();

-- Runs that still need attention: open, or closed but not yet rotated. Bookkeeping, not results:
-- a row leaves once its run is closed and rotated, so finding open runs never scans history.
create table roi.pending_runs (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  started_at timestamptz not null,
  closed boolean not null default false
);

create index pending_runs_owner_idx on roi.pending_runs (owner_id);

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

insert into roi.work_kinds (kind, urgency, needs_run, shows_snapshot, gives_up) values
  ('judge', 0, true, true, 'skip_verdict'),
  ('closed_book', 1, true, false, 'drop'),
  ('judge_withheld', 1, true, true, 'drop'),
  ('judge_reversed', 1, true, true, 'drop'),
  ('write_question', 2, false, false, 'retire_probe'),
  ('embed_question', 3, false, false, 'drop');

-- None on attempts or lease_until: a claim's lease is then a HOT update, with no index entry to add.
create index work_due_idx on roi.work (urgency, run_after, id);
create index work_probe_idx on roi.work (probe_id);
create index work_run_idx on roi.work (run_id) where run_id is not null;
create index work_owner_idx on roi.work (owner_id);

-- ============================================================================================
-- Who reads and writes each table
-- ============================================================================================
alter table roi.settings enable row level security;
create policy "The benchmark reads its settings" on roi.settings
  for select to authenticated using (true);
create policy "The worker reads the settings" on roi.settings
  for select to roi_worker using (true);
grant select on roi.settings to authenticated;
grant select on roi.settings to roi_worker;

-- Probes carry memory text (the source snapshot, the question): the owner reads them only inside
-- the benchmark; the worker only while it has work on them; the embedder never their text.
alter table roi.probes enable row level security;
create policy "Owners work on their probes only inside the benchmark" on roi.probes
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
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
create policy "The embedder sees which active probes lack an embedding" on roi.probes
  for select to roi_embedder using (state = 'active');
grant select, insert, update on roi.probes to authenticated;
grant select on roi.probes to roi_worker;
grant update (question, state, activated_at, retired_reason, retired_at, last_error, question_embedding,
  question_embedding_model, question_embedding_minilm, question_embedding_minilm_model, question_origin,
  generator_fingerprint) on roi.probes to roi_worker;
-- Of probes, no text: the columns that say which question needs the worker's embedding.
grant select (id, owner_id, state, question_embedding_model, question_embedding_minilm_model) on roi.probes
  to roi_embedder;

alter table roi.runs enable row level security;
create policy "Owners read their runs" on roi.runs
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners start runs only inside the benchmark" on roi.runs
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
create policy "The worker reads open runs" on roi.runs
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = runs.id));
grant select, insert on roi.runs to authenticated;
grant select on roi.runs to roi_worker;

alter table roi.pending_runs enable row level security;
create policy "Owners track their pending runs only inside the benchmark" on roi.pending_runs
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
create policy "The worker reads pending runs" on roi.pending_runs
  for select to roi_worker using (true);
create policy "The worker marks pending runs closed" on roi.pending_runs
  for update to roi_worker using (true) with check (closed);
grant select, insert, update, delete on roi.pending_runs to authenticated;
grant select on roi.pending_runs to roi_worker;
grant update (closed) on roi.pending_runs to roi_worker;

alter table roi.work_kinds enable row level security;
-- No secret in it: everyone who queues or claims work reads what each kind is.
create policy "Those who queue or claim work read the kinds of work" on roi.work_kinds
  for select to authenticated, roi_worker using (true);
create policy "The embedder reads the kinds of work it queues" on roi.work_kinds
  for select to roi_embedder using (true);
grant select on roi.work_kinds to authenticated, roi_worker;
grant select on roi.work_kinds to roi_embedder;

alter table roi.work enable row level security;
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
create policy "The embedder queues the embedding of active questions" on roi.work
  for insert to roi_embedder with check (kind = 'embed_question');

grant select, insert, delete on roi.work to roi_worker;
grant update (attempts, run_after, lease_until, last_error) on roi.work to roi_worker;
-- Owners queue work inside the benchmark (runs, spot-checks, their probes' questions and embeddings).
grant select, insert, delete on roi.work to authenticated;
grant insert on roi.work to roi_embedder;

-- ============================================================================================
-- Grants
-- ============================================================================================
-- Per-schema default privileges cannot take back the global default (EXECUTE for PUBLIC), so every
-- roi function is revoked from PUBLIC by the file that creates it, which then says who may call it.
-- A trigger function needs no grant to fire.
revoke execute on function roi.inside_benchmark(), roi.open_gate(), roi.close_gate(), roi.forbid_result_change(),
  roi.forbid_result_truncate(), roi.note_recall_embeddings() from public;
grant execute on function roi.inside_benchmark(), roi.open_gate(), roi.close_gate() to authenticated;
