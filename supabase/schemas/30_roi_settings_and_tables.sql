-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The ROI benchmark: a pool of probe questions per owner, runs that recall every probe as the
-- caller through the configured recall function, append-only verdicts with their text-free recall
-- outcomes (the retrieval figures) and closed-book spot-checks, and the three views clients read.
-- Five files, in the order a probe lives: this one (the schema, its settings, tables and indexes),
-- 31_roi_gate_and_pool.sql (the gate and the probe pool), 32_roi_runs.sql (starting, recording and
-- closing runs; benchmark_memory()), 33_roi_views.sql (what clients read) and
-- 34_roi_triggers_policies_grants.sql (what guards it all).
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
-- owner reads as they read verdicts. The work queue (roi.work, 50_roi_queue.sql) carries ids only;
-- closed-book and judge-check results are booleans the owner reads. The bare model's answer is never
-- stored.

create schema if not exists roi;
revoke all on schema roi from public;
grant usage on schema roi to authenticated;
alter default privileges in schema roi revoke execute on functions from public;

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
  runs_served integer not null default 0,
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

-- What surfaced for each probe of a run, and the text the judge will see.
create table roi.recalls (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  surfaced_ids uuid[] not null,
  surfaced jsonb not null,
  recalled_at timestamptz not null default now(),
  primary key (run_id, probe_id)
);
-- Stored uncompressed: pglz on ~5.5 kB of jsonb would cost every run ~1.7 ms.
alter table roi.recalls alter column surfaced set storage external;

-- One verdict per probe of a run. Booleans and ids only: no memory text, so owners may read it.
-- Skipped: the run timed out, the judge kept failing, the probe retired, the database switched to
-- deterministic mode while the run waited for a judge ('mode_changed'), or a spending cap stopped the
-- run ('budget').
create table roi.verdicts (
  id bigint generated always as identity primary key,
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  memory_id uuid not null,
  with_memory boolean,
  without_memory boolean,
  skipped boolean not null default false,
  skip_reason text check (skip_reason in ('timeout', 'judge_failed', 'probe_retired', 'mode_changed', 'budget')),
  confidence real check (confidence between 0 and 1),
  judged_by text not null check (judged_by in ('deterministic', 'llm', 'timeout', 'budget')),
  recorded_at timestamptz not null default now(),
  unique (run_id, probe_id),
  check (skipped = (with_memory is null)),
  check (skipped = (without_memory is null)),
  check (skipped = (skip_reason is not null))
);

-- A run is closed once it has a closure: every probe judged or skipped ('complete'), the timeout
-- passed ('timeout'), or a spending cap stopped it ('aborted_budget': its own status, never scored,
-- never compared).
create table roi.run_closures (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  reason text not null check (reason in ('complete', 'timeout', 'aborted_budget')),
  closed_at timestamptz not null default now()
);

-- After a completed run a few long-serving probes rotate out; one row per run makes it happen once.
create table roi.rotations (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  retired_count integer not null,
  rotated_at timestamptz not null default now()
);

-- Runs that still need attention: open, or closed but not yet rotated. Bookkeeping, not results:
-- a row leaves once its run is closed and rotated, so finding open runs never scans history.
create table roi.pending_runs (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  started_at timestamptz not null,
  closed boolean not null default false
);

-- Text-free facts of each recall: where the source ranked (null: it did not surface), and the
-- probe's kind and scope, for the retrieval figures and the breakdown. Written by a trigger.
create table roi.recall_outcomes (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  source_kind text not null,
  source_scope text not null,
  source_rank integer check (source_rank >= 1),
  -- The probe's question_origin when the run recalled it (text-free: the runs view counts it).
  question_origin text,
  primary key (run_id, probe_id)
);

-- Whether the bare model (question only, no memory) answered as the ground truth does. Append-only.
create table roi.closed_book_results (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  bare_correct boolean not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id)
);

-- The judges of a run: model and judge-prompt hash (prompts.fingerprint), one row per distinct
-- fingerprint, written with each LLM verdict (roi.record_verdict). No memory text, so the owner reads
-- it, as they read verdicts. Append-only.
create table roi.run_judges (
  run_id uuid not null references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  judge_fingerprint text not null check (length(judge_fingerprint) between 1 and 300),
  recorded_at timestamptz not null default now(),
  primary key (run_id, judge_fingerprint)
);

-- What the judge said when checked: source withheld, or results in reverse order. Booleans and ids
-- only, so the owner reads it, as they read verdicts. Append-only.
create table roi.judge_check_results (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  kind text not null check (kind in ('judge_withheld', 'judge_reversed')),
  with_memory boolean not null,
  without_memory boolean not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id, kind)
);
-- A judge's measured error: one row per `zm-roi judge-check --record`, the judge (fingerprint as
-- runs record it, model) and per label the four counts of its verdicts against the calibration set's
-- gold labels (tp: gold true, judged true; fp: gold false, judged true; tn; fn). Counts only: no
-- case text reaches the database. Written by the operator (the database owner); an owner reads the
-- rows whose fingerprint judged one of their runs, and the runs view corrects a run's exclusive rate
-- with the newest row of its judge (a newer check supersedes an older one). Append-only.
create table roi.judge_calibrations (
  id bigint generated always as identity primary key,
  -- The check's usage events carry it as their run_id (purpose judge_check).
  check_id uuid not null unique,
  judge_fingerprint text not null check (length(judge_fingerprint) between 1 and 300),
  model text not null check (length(model) between 1 and 200),
  -- Cases put to the judge; the four counts of a label add up to those it judged (a case whose every
  -- reply failed to parse is left out of the counts, never guessed).
  case_count integer not null check (case_count > 0),
  recorded_at timestamptz not null default now(),
  with_memory_tp integer not null check (with_memory_tp >= 0),
  with_memory_fp integer not null check (with_memory_fp >= 0),
  with_memory_tn integer not null check (with_memory_tn >= 0),
  with_memory_fn integer not null check (with_memory_fn >= 0),
  without_memory_tp integer not null check (without_memory_tp >= 0),
  without_memory_fp integer not null check (without_memory_fp >= 0),
  without_memory_tn integer not null check (without_memory_tn >= 0),
  without_memory_fn integer not null check (without_memory_fn >= 0),
  exclusive_tp integer not null check (exclusive_tp >= 0),
  exclusive_fp integer not null check (exclusive_fp >= 0),
  exclusive_tn integer not null check (exclusive_tn >= 0),
  exclusive_fn integer not null check (exclusive_fn >= 0),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn
         = without_memory_tp + without_memory_fp + without_memory_tn + without_memory_fn),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn
         = exclusive_tp + exclusive_fp + exclusive_tn + exclusive_fn),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn between 1 and case_count)
);
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
-- Indexes
-- ============================================================================================
create index probes_owner_state_idx on roi.probes (owner_id, state);
create index runs_owner_started_idx on roi.runs (owner_id, started_at desc);
create index recalls_probe_idx on roi.recalls (probe_id);
create index recalls_owner_idx on roi.recalls (owner_id);
create index verdicts_owner_run_idx on roi.verdicts (owner_id, run_id);
create index verdicts_probe_idx on roi.verdicts (probe_id);
create index run_closures_owner_idx on roi.run_closures (owner_id);
create index rotations_owner_idx on roi.rotations (owner_id);
create index pending_runs_owner_idx on roi.pending_runs (owner_id);
create index recall_outcomes_owner_idx on roi.recall_outcomes (owner_id);
create index recall_outcomes_probe_idx on roi.recall_outcomes (probe_id);
create index closed_book_results_owner_idx on roi.closed_book_results (owner_id);
create index closed_book_results_probe_idx on roi.closed_book_results (probe_id);
create index run_judges_owner_idx on roi.run_judges (owner_id);
create index judge_check_results_owner_idx on roi.judge_check_results (owner_id);
create index judge_check_results_probe_idx on roi.judge_check_results (probe_id);
create index judge_calibrations_fingerprint_idx on roi.judge_calibrations (judge_fingerprint, id desc);
