-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- sql/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (README, "Changing the schema"); tests/test_schema_files.py builds a
-- database from each and prints any difference.
--
-- The ROI benchmark: a pool of probe questions per owner, runs that recall every probe as the
-- caller through the configured recall function, append-only verdicts with their text-free recall
-- outcomes (the retrieval figures) and closed-book spot-checks, and the three views clients read.
--
-- Privacy model. Everything lives in the private schema `roi`, which the Data API does not expose.
-- Rows that carry text derived from memories (probe questions and source snapshots, recall
-- snapshots, the judging queue) are readable by their owner only while the transaction-local gate
-- `roi.inside_benchmark` is on, which only benchmark_memory() (and upkeep, impersonating the owner)
-- turns on, and off again before it returns. Data API clients cannot set settings, so through the
-- API those rows are unreadable even to their owner. Runs, verdicts (booleans and ids) and closures
-- carry no text; their owner reads them, which is what lets the security_invoker views aggregate.
-- The retrieval figures need the source's rank among the surfaced results and the probe's kind and
-- scope, so a trigger on roi.recalls copies those text-free facts into roi.recall_outcomes, which the
-- owner reads as they read verdicts. The work queue (roi.work, 50_roi_worker.sql) carries ids only;
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
  recall_function text not null default 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector)',
  -- Whether that recall takes the query embedding (its sixth argument): recorded whenever
  -- recall_function is written (roi.note_recall_takes_embedding), read by every run.
  recall_takes_embedding boolean not null default true,
  -- Probes per LLM run the judge sees again with the source withheld (judge_withheld) and with the
  -- results in reverse order (judge_reversed): 3 each, so every run is checked, at 6 extra judge calls
  -- per run (+30% of a 20-question run's judge calls; README, "Judge checks").
  withheld_source_checks integer not null default 3 check (withheld_source_checks between 0 and 200),
  order_checks integer not null default 3 check (order_checks between 0 and 200)
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
  unique (owner_id, memory_id),
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
  -- What produced the run: the recall function and the embedding model of its questions (null when
  -- the questions carried no embedding, i.e. only the lexical leg could run).
  recall_function text,
  embedding_model text
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
-- Stored uncompressed: pglz on ~5.5 kB of jsonb cost every run ~1.7 ms (20261201080000).
alter table roi.recalls alter column surfaced set storage external;

-- One verdict per probe of a run. Booleans and ids only: no memory text, so owners may read it.
-- Skipped: the run timed out, the judge kept failing, the probe retired, or the database switched to
-- deterministic mode while the run waited for a judge ('mode_changed').
create table roi.verdicts (
  id bigint generated always as identity primary key,
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  memory_id uuid not null,
  with_memory boolean,
  without_memory boolean,
  skipped boolean not null default false,
  skip_reason text check (skip_reason in ('timeout', 'judge_failed', 'probe_retired', 'mode_changed')),
  confidence real check (confidence between 0 and 1),
  judged_by text not null check (judged_by in ('deterministic', 'llm', 'timeout')),
  recorded_at timestamptz not null default now(),
  unique (run_id, probe_id),
  check (skipped = (with_memory is null)),
  check (skipped = (without_memory is null)),
  check (skipped = (skip_reason is not null))
);

-- A run is complete once it has a closure: every probe judged or skipped, or the timeout passed.
create table roi.run_closures (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  reason text not null check (reason in ('complete', 'timeout')),
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

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The gate for rows that carry memory text: on only inside benchmark_memory() and upkeep.
create function roi.inside_benchmark() returns boolean
  language sql stable security invoker set search_path = ''
as $$
  select coalesce(current_setting('roi.inside_benchmark', true), '') = 'on'
$$;

create function roi.open_gate() returns void
  language sql volatile security invoker set search_path = ''
as $$
  select set_config('roi.inside_benchmark', 'on', true);
$$;

create function roi.close_gate() returns void
  language sql volatile security invoker set search_path = ''
as $$
  select set_config('roi.inside_benchmark', '', true);
$$;

-- Results are append-only. The one exception is erasing a user: the cascade from auth.users
-- removes their results with them (the owner no longer exists when this trigger runs).
create function roi.forbid_result_change() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  if tg_op = 'DELETE' and not exists (select from auth.users u where u.id = old.owner_id) then
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

-- A deterministic question per kind: reads naturally, quotes the title safely, stays short.
-- PL/pgSQL assignments, not a SQL query: a SQL function that cannot be inlined is parsed and
-- planned again in every statement that calls it (~0.5 ms of each top-up's insert).
create function roi.template_question(kind text, title text, body text) returns text
  language plpgsql immutable security invoker set search_path = ''
as $$
declare
  cleaned text;
  subject text;
begin
  cleaned := coalesce(
    nullif(btrim(regexp_replace(coalesce(title, ''), '[[:space:][:cntrl:]]+', ' ', 'g')), ''),
    btrim(regexp_replace(left(coalesce(body, ''), 1000), '[[:space:][:cntrl:]]+', ' ', 'g')));
  subject := case when length(cleaned) <= 120 then cleaned
                  else regexp_replace(left(cleaned, 120), '\s+\S*$', '') || '…' end;
  return case kind
    when 'decision' then format('What did we decide about "%s", and why?', subject)
    when 'gotcha' then format('What goes wrong with "%s", and how do we avoid it?', subject)
    when 'convention' then format('What is our convention for "%s"?', subject)
  end;
end
$$;

-- The owner's pool size right now (pending + active). PL/pgSQL so the count stays prepared for the
-- session (a SQL function here is planned again on each of its three calls per benchmark call).
create function roi.pool_counts(out active integer, out pending integer)
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  select count(*) filter (where p.state = 'active')::integer,
         count(*) filter (where p.state = 'pending')::integer
  into active, pending
  from roi.probes p
  where p.owner_id = (select auth.uid()) and p.state in ('active', 'pending');
end
$$;

-- Retire the caller's probes whose source is invalidated or no longer visible to them. Runs as the
-- owner (caller or impersonated), so "visible" means exactly what RLS lets the owner see.
create function roi.retire_unreachable_probes() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  retired integer;
begin
  with doomed as (
    select p.id,
           case when m.id is null then 'source_unreachable' else 'source_invalidated' end as reason
    from roi.probes p
    left join public.memories m on m.id = p.memory_id
    where p.owner_id = (select auth.uid())
      and p.state in ('pending', 'active')
      and (m.id is null or m.invalidated_at is not null)
  )
  update roi.probes p
  set state = 'retired', retired_reason = d.reason, retired_at = now()
  from doomed d
  where p.id = d.id;
  get diagnostics retired = row_count;
  return retired;
end
$$;

-- The caller's never-probed live knowledge, newest first, at most `wanted`: the newest few of each
-- layer the caller reads (personal, each member project, each member team), each read in created_at
-- order from that layer's partial index and stopped as soon as it has enough, then merged. The
-- newest `wanted` overall are among the newest `wanted` of some layer, so the choice is the same as
-- a scan through RLS would make; the cost grows with the caller's layers, not with the corpus.
-- Shared by top-up (what to add) and rotation (whether anything fresh exists). PL/pgSQL, not SQL:
-- a SQL function that cannot be inlined is parsed, rewritten (RLS) and planned on every call, which
-- cost ~1.3 ms of its ~2.4 ms per call; PL/pgSQL keeps the statement prepared for the session.
create function roi.never_probed_knowledge(wanted integer) returns setof public.memories
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query
    select m.* from (
      (select v.* from public.memories v
       where v.scope = 'personal' and v.invalidated_at is null and v.author_id = (select auth.uid())
         and v.kind in ('decision', 'gotcha', 'convention')
         and not exists (select from roi.probes p where p.owner_id = (select auth.uid()) and p.memory_id = v.id)
       order by v.created_at desc, v.id
       limit wanted)
      union all
      select v.* from unnest(array(select public.caller_project_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'project' and v.invalidated_at is null and v.project_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and not exists (select from roi.probes p where p.owner_id = (select auth.uid()) and p.memory_id = v.id)
        order by v.created_at desc, v.id
        limit wanted
      ) v
      union all
      select v.* from unnest(array(select public.caller_team_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'team' and v.invalidated_at is null and v.team_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and not exists (select from roi.probes p where p.owner_id = (select auth.uid()) and p.memory_id = v.id)
        order by v.created_at desc, v.id
        limit wanted
      ) v
    ) m
    order by m.created_at desc, m.id
    limit wanted;
end
$$;

-- Deterministic mode: the caller's pending probes (queued for a worker that is not coming, after a
-- switch from LLM mode) get their template question and join the pool (their write_question work
-- leaves the queue with the state change). A worker still holding one finds it no longer pending and
-- drops its question (roi.record_question returns false).
create function roi.take_over_pending_probes() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  taken integer;
begin
  update roi.probes p
  set question = roi.template_question(p.source_kind, p.source_title, p.source_body),
      state = 'active', activated_at = now()
  where p.owner_id = (select auth.uid()) and p.state = 'pending';
  get diagnostics taken = row_count;
  return taken;
end
$$;

-- LLM mode: the caller's active probes that still carry the template question deterministic mode
-- gave them become pending again (question and embedding cleared), so the worker writes a real one
-- (roi.queue_probe_work queues it). Template questions quote the title, and an LLM-judged run carries
-- no caveat. Called by benchmark_memory(), so only owners who run the benchmark pay for new questions;
-- a template the question gate fell back to (question_origin 'template') is kept.
create function roi.hand_template_questions_to_writer() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  handed integer;
begin
  update roi.probes p
  set state = 'pending', question = null, activated_at = null, question_embedding = null,
      question_embedding_model = null, last_error = null
  where p.owner_id = (select auth.uid()) and p.state = 'active' and p.question_origin is null
    and p.question = roi.template_question(p.source_kind, p.source_title, p.source_body);
  get diagnostics handed = row_count;
  return handed;
end
$$;

-- Retire up to `how_many` of the caller's longest-serving active probes after a completed run, and
-- record the rotation once per run. The first step of roi.rotate_and_top_up().
create function roi.retire_longest_serving(completed_run uuid, how_many integer) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  retired integer := 0;
begin
  if how_many > 0 then
    with longest_serving as (
      select p.id from roi.probes p
      where p.owner_id = (select auth.uid()) and p.state = 'active'
      order by p.runs_served desc, p.activated_at, p.id
      limit how_many
    )
    update roi.probes p
    set state = 'retired', retired_reason = 'rotated', retired_at = now()
    from longest_serving l
    where p.id = l.id;
    get diagnostics retired = row_count;
  end if;
  insert into roi.rotations (run_id, owner_id, retired_count)
  values (completed_run, (select auth.uid()), retired)
  on conflict (run_id) do nothing;
  return retired;
end
$$;

-- Fill the caller's pool up to the target, newest never-probed knowledge first: from `fresh` (the
-- newest never-probed memories a caller already read, newest first) when it holds enough, otherwise
-- read again. Deterministic mode writes the question at once (and first takes over the probes LLM
-- mode left pending); LLM mode leaves the probe pending for the worker (roi.queue_probe_work queues
-- and announces its question). The shared step
-- of roi.top_up_pool() and roi.rotate_and_top_up().
create function roi.refill_pool(fresh public.memories[]) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  counts record;
  wanted integer;
  added integer;
begin
  select * into config from roi.settings;
  if config.extractor = 'deterministic' then
    perform roi.take_over_pending_probes();
  end if;
  select * into counts from roi.pool_counts();
  wanted := config.pool_target - counts.active - counts.pending;
  if wanted <= 0 then
    return 0;
  end if;
  if wanted > coalesce(cardinality(fresh), 0) then
    fresh := array(select m from roi.never_probed_knowledge(wanted) m);
  end if;
  insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                          pin_project_id, pin_team_id, question, state, activated_at)
  select (select auth.uid()), m.id, m.kind, m.scope, m.title, m.body, m.project_id, m.team_id,
         q.question,
         case when q.question is null then 'pending' else 'active' end,
         case when q.question is null then null else now() end
  from unnest(fresh[1:wanted]) m
  cross join lateral (
    select case when config.extractor = 'deterministic'
      then roi.template_question(m.kind, m.title, m.body) end as question
  ) q
  on conflict (owner_id, memory_id) do nothing;
  get diagnostics added = row_count;
  return added;
end
$$;

-- Fill the caller's pool up to the target from never-probed live knowledge, newest first, selected
-- as the caller (upkeep and benchmark_memory() call it before a run).
create function roi.top_up_pool() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  return roi.refill_pool(null);
end
$$;

-- After a completed run: retire a few of the longest-serving probes, but only when never-probed
-- knowledge exists to replace them (so the benchmark follows what the owner has learned), and the
-- top-up that refills the rotated places, with one read of never-probed knowledge instead of two (each read is a statement per layer
-- the owner reads, under RLS). The newest n never-probed memories are the first n of the newest m for
-- any m >= n, and retiring a probe does not make its memory never-probed again, so the rows rotation
-- read to decide how many to retire are the rows the top-up adds. Returns probes retired.
create function roi.rotate_and_top_up(completed_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  fresh public.memories[] := '{}';
  retired integer := 0;
begin
  if not exists (select from roi.rotations r where r.run_id = completed_run) then
    fresh := array(select m from roi.never_probed_knowledge((select s.rotation_per_run from roi.settings s)) m);
    retired := roi.retire_longest_serving(completed_run, cardinality(fresh));
  end if;
  perform roi.refill_pool(fresh);
  return retired;
end
$$;

-- The one rotation path, as the caller, in both modes: after each of the caller's completed runs not
-- yet rotated (an LLM run the worker closed since, or `just_completed`, the deterministic run this
-- call just judged) rotate and top up, and let the run's bookkeeping go. benchmark_memory() calls it
-- on every call; upkeep (pg_cron, impersonating the owner) for owners who never call again.
create function roi.rotate_completed_runs(just_completed uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  done_run uuid;
  retired integer := 0;
begin
  for done_run in
    select pr.run_id from roi.pending_runs pr
    where pr.owner_id = (select auth.uid()) and pr.closed
    order by pr.started_at
  loop
    retired := retired + roi.rotate_and_top_up(done_run);
    delete from roi.pending_runs pr where pr.run_id = done_run;
  end loop;
  if exists (select from roi.run_closures c where c.run_id = just_completed) then
    retired := retired + roi.rotate_and_top_up(just_completed);
  end if;
  return retired;
end
$$;

-- Close a run whose every probe has a verdict. Serialised per run by an advisory lock, so the two
-- workers recording the last two verdicts cannot both miss the moment.
create function roi.close_run_if_done(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  run roi.runs;
begin
  perform pg_advisory_xact_lock(roi.run_lock_key(target_run));
  select * into run from roi.runs r where r.id = target_run;
  if run.id is null or exists (select from roi.run_closures c where c.run_id = target_run) then
    return false;
  end if;
  if (select count(*) from roi.verdicts v where v.run_id = target_run) < run.probe_count then
    return false;
  end if;
  insert into roi.run_closures (run_id, owner_id, reason) values (target_run, run.owner_id, 'complete')
  on conflict (run_id) do nothing;
  update roi.pending_runs pr set closed = true where pr.run_id = target_run;
  delete from roi.work w where w.run_id = target_run and w.kind = 'judge';
  return true;
end
$$;

-- Close a run past the timeout: the probes still unjudged are recorded as skipped, and the run
-- counts what was judged. Used by benchmark_memory() for the caller and by upkeep for everyone.
create function roi.close_overdue_run(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  run roi.runs;
begin
  perform pg_advisory_xact_lock(roi.run_lock_key(target_run));
  select * into run from roi.runs r where r.id = target_run;
  if run.id is null or exists (select from roi.run_closures c where c.run_id = target_run)
     or run.started_at > clock_timestamp() - (select s.run_timeout from roi.settings s) then
    return false;
  end if;
  insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
  select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, true, 'timeout', 'timeout'
  from roi.recalls rc
  join roi.probes p on p.id = rc.probe_id
  where rc.run_id = target_run
  on conflict (run_id, probe_id) do nothing;
  insert into roi.run_closures (run_id, owner_id, reason) values (target_run, run.owner_id, 'timeout')
  on conflict (run_id) do nothing;
  update roi.pending_runs pr set closed = true where pr.run_id = target_run;
  delete from roi.work w where w.run_id = target_run and w.kind = 'judge';
  return true;
end
$$;

-- Deterministic mode: an open LLM run of the caller has no judge coming. Its unjudged probes are
-- recorded as skipped ('mode_changed') and the run closes now, counting what the model did judge, so
-- the same benchmark call starts a deterministic run. False (nothing done) in LLM mode or for a
-- deterministic run.
create function roi.close_run_left_without_judge(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  if (select s.extractor from roi.settings s) <> 'deterministic'
     or not exists (select from roi.runs r where r.id = target_run and r.mode = 'llm') then
    return false;
  end if;
  perform pg_advisory_xact_lock(roi.run_lock_key(target_run));
  insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
  select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, true, 'mode_changed', 'deterministic'
  from roi.recalls rc
  join roi.probes p on p.id = rc.probe_id
  where rc.run_id = target_run
  on conflict (run_id, probe_id) do nothing;
  return roi.close_run_if_done(target_run);
end
$$;

-- Resolve SCHEMA.NAME to the recall function the benchmark may call, or raise why not, in one line.
-- The contract: SECURITY INVOKER; arguments (text, uuid, uuid, integer, boolean), optionally followed
-- by a query embedding (extensions.vector); a set whose columns include memory_id, title, body and
-- score, in rank order. When both forms exist, the one that takes an embedding is chosen. (A
-- deployment that already has a search function points the benchmark at it.)
create function roi.resolve_recall_function(name text) returns regprocedure
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  parts text[];
  chosen record;
  base constant text[] := array['text', 'uuid', 'uuid', 'integer', 'boolean'];
begin
  begin
    parts := parse_ident(coalesce(name, ''));
  exception when others then
    parts := null;
  end;
  if parts is null or cardinality(parts) <> 2 then
    raise exception 'give the recall function as SCHEMA.NAME (e.g. public.recall), not %', coalesce(name, 'nothing')
      using errcode = '22023';
  end if;
  if not exists (select from pg_catalog.pg_proc p join pg_catalog.pg_namespace s on s.oid = p.pronamespace
                 where s.nspname = parts[1] and p.proname = parts[2]) then
    raise exception 'no function %.% in this database', parts[1], parts[2] using errcode = '42883';
  end if;
  select c.* into chosen
  from (
    select p.oid, p.prosecdef, p.proretset, p.pronargs,
           array(select t::regtype::text from unnest(p.proargtypes::oid[]) with ordinality u (t, o) order by o)
             as args,
           array(select a.n from unnest(p.proargnames, p.proargmodes::text[]) as a (n, m) where a.m in ('t', 'o'))
             as outputs
    from pg_catalog.pg_proc p
    join pg_catalog.pg_namespace s on s.oid = p.pronamespace
    where s.nspname = parts[1] and p.proname = parts[2]
  ) c
  where c.args = base or c.args = base || 'extensions.vector'::text
  order by c.pronargs desc
  limit 1;
  if not found then
    raise exception '%.% must take (query text, project_id uuid, team_id uuid, match_count integer, personal_only boolean[, query_embedding extensions.vector])',
      parts[1], parts[2] using errcode = '42883';
  end if;
  if chosen.prosecdef then
    raise exception '%.% is SECURITY DEFINER: the benchmark only calls SECURITY INVOKER recall, so that every recall runs as the user under RLS',
      parts[1], parts[2] using errcode = '42501';
  end if;
  if not chosen.proretset or not chosen.outputs @> array['memory_id', 'title', 'body', 'score'] then
    raise exception '%.% must return a table with at least memory_id, title, body and score, best first',
      parts[1], parts[2] using errcode = '42804';
  end if;
  return chosen.oid::regprocedure;
end
$$;

-- `zm-roi configure --recall-function`: validate, then store. Operators only (no grant).
create function roi.configure_recall(name text) returns text
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  resolved regprocedure := roi.resolve_recall_function(name);
begin
  update roi.settings set recall_function = resolved::text;
  return resolved::text;
end
$$;

-- One recall through the configured function, as the caller, in its rank order. The function is
-- re-checked on every call (it may have been replaced by a SECURITY DEFINER one since configure) and
-- called dynamically; its rows go through jsonb so that kind and scope may be absent.
create function roi.configured_recall(question text, pin_project uuid, pin_team uuid, match_count integer,
  personal_only boolean, question_embedding extensions.vector)
  returns table (memory_id uuid, kind text, scope text, title text, body text, score real, rank bigint)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  configured text;
  takes_embedding boolean;
  fn regprocedure;
  target record;
begin
  select s.recall_function, s.recall_takes_embedding into configured, takes_embedding from roi.settings s;
  fn := to_regprocedure(configured);
  if fn is null then
    raise exception 'the configured recall function % no longer exists: zm-roi configure --recall-function public.recall',
      configured using errcode = '42883';
  end if;
  select s.nspname, p.proname, p.prosecdef into target
  from pg_catalog.pg_proc p join pg_catalog.pg_namespace s on s.oid = p.pronamespace
  where p.oid = fn;
  if target.prosecdef then
    raise exception 'the configured recall function % is SECURITY DEFINER: refusing to run it', configured
      using errcode = '42501';
  end if;
  if fn = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector)'::regprocedure then
    -- The bundled recall, statically: its plan is cached for the session (dynamic SQL plans every call).
    return query
      select r.memory_id, r.kind, r.scope, r.title, r.body, r.score, r.n
      from public.recall(question, pin_project, pin_team, match_count, personal_only, question_embedding)
        with ordinality as r (memory_id, kind, scope, title, body, score, n)
      order by r.n;
    return;
  end if;
  return query execute format(
    'select (f.j ->> ''memory_id'')::uuid, f.j ->> ''kind'', f.j ->> ''scope'', f.j ->> ''title'',
            f.j ->> ''body'', (f.j ->> ''score'')::real, f.n
     from (select to_jsonb(r) as j, r.ordinality as n from %I.%I($1, $2, $3, $4, $5%s) with ordinality r) f
     order by f.n',
    target.nspname, target.proname, case when takes_embedding then ', $6' else '' end)
  using question, pin_project, pin_team, match_count, personal_only, question_embedding;
end
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced, and either record strict verdicts at once (deterministic) or queue one judgment per
-- probe (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged and closed before this returns, so it is never pending (no
-- pending_runs row is written only to be deleted); benchmark_memory() rotates after it at once.
create function roi.start_run(mode text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  new_run uuid;
  run_started timestamptz;
  probe_total integer;
  question_model text;
  judged integer;
begin
  select count(*), mode() within group (order by p.question_embedding_model)
  into probe_total, question_model
  from roi.probes p where p.owner_id = (select auth.uid()) and p.state = 'active';
  -- clock_timestamp(), not now(): runs started in one transaction still order by when they began.
  insert into roi.runs (owner_id, mode, probe_count, started_at, recall_function, embedding_model)
  values ((select auth.uid()), mode, probe_total, clock_timestamp(),
          (select s.recall_function from roi.settings s),
          case when (select s.recall_takes_embedding from roi.settings s) then question_model end)
  returning id, started_at into new_run, run_started;
  if mode <> 'deterministic' then
    insert into roi.pending_runs (run_id, owner_id, started_at) values (new_run, (select auth.uid()), run_started);
  end if;

  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select new_run, p.id, p.owner_id,
         coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}'),
         coalesce(jsonb_agg(jsonb_build_object(
           'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
           'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
           filter (where r.memory_id is not null), '[]')
  from roi.probes p
  left join lateral roi.configured_recall(p.question, p.pin_project_id, p.pin_team_id, 10,
                                          p.source_scope = 'personal', p.question_embedding) r on true
  where p.owner_id = (select auth.uid()) and p.state = 'active'
  group by p.id, p.owner_id;

  update roi.probes p set runs_served = p.runs_served + 1
  where p.owner_id = (select auth.uid()) and p.state = 'active';

  if mode = 'deterministic' then
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, p.memory_id = any (rc.surfaced_ids), false,
           'deterministic'
    from roi.recalls rc join roi.probes p on p.id = rc.probe_id
    where rc.run_id = new_run;
    get diagnostics judged = row_count;
    -- Every probe of the run has its verdict: the run is complete (roi.close_run_if_done's test,
    -- without its lock, its recount or a judging queue to clear, none of which a run nobody else
    -- can see yet needs).
    if judged >= probe_total then
      insert into roi.run_closures (run_id, owner_id, reason) values (new_run, (select auth.uid()), 'complete');
    else
      perform roi.close_run_if_done(new_run);
    end if;
  else
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select 'judge', rc.run_id, rc.probe_id, rc.owner_id from roi.recalls rc where rc.run_id = new_run;
    perform pg_notify('roi_work', 'judge');
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total);
end
$$;

-- After recalls are recorded: keep the text-free outcome of each (source rank, kind, scope), and in
-- LLM mode queue the run's checks of the judge, each on probes picked at random: up to
-- roi.settings.closed_book_checks closed-book spot-checks, withheld_source_checks leniency checks (among
-- probes whose source surfaced) and order_checks order checks (among probes with 2 or more results).
-- Runs as whoever recorded the recalls (the owner, inside the benchmark).
create function roi.note_recall_outcomes() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  config roi.settings;
  queued integer;
begin
  select * into config from roi.settings;
  insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank,
                                   question_origin)
  select n.run_id, n.probe_id, n.owner_id, p.source_kind, p.source_scope,
         array_position(n.surfaced_ids, p.memory_id), p.question_origin
  from recorded n join roi.probes p on p.id = n.probe_id
  on conflict (run_id, probe_id) do nothing;

  if config.closed_book_checks > 0 then
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select 'closed_book', x.run_id, x.probe_id, x.owner_id
    from (
      select n.run_id, n.probe_id, n.owner_id,
             row_number() over (partition by n.run_id order by random()) as pick,
             (select count(*) from roi.work q where q.run_id = n.run_id and q.kind = 'closed_book')
               + (select count(*) from roi.closed_book_results b where b.run_id = n.run_id) as already
      from recorded n join roi.runs r on r.id = n.run_id
      where r.mode = 'llm'
    ) x
    where x.pick + x.already <= config.closed_book_checks
    on conflict do nothing;
    get diagnostics queued = row_count;
    if queued > 0 then
      perform pg_notify('roi_work', 'closed_book');
    end if;
  end if;

  if config.withheld_source_checks > 0 or config.order_checks > 0 then
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select x.kind, x.run_id, x.probe_id, x.owner_id
    from (
      select c.kind, c.wanted, n.run_id, n.probe_id, n.owner_id,
             row_number() over (partition by c.kind, n.run_id order by random()) as pick,
             (select count(*) from roi.work q where q.run_id = n.run_id and q.kind = c.kind)
               + (select count(*) from roi.judge_check_results j where j.run_id = n.run_id and j.kind = c.kind)
               as already
      from recorded n
      join roi.runs r on r.id = n.run_id
      join roi.probes p on p.id = n.probe_id
      cross join (values ('judge_withheld', config.withheld_source_checks),
                         ('judge_reversed', config.order_checks)) c (kind, wanted)
      where r.mode = 'llm' and c.wanted > 0
        and case c.kind when 'judge_withheld' then p.memory_id = any (n.surfaced_ids)
                        else cardinality(n.surfaced_ids) >= 2 end
    ) x
    where x.pick + x.already <= x.wanted
    on conflict do nothing;
    get diagnostics queued = row_count;
    if queued > 0 then
      perform pg_notify('roi_work', 'judge_check');
    end if;
  end if;
  return null;
end
$$;

-- The advisory lock key that serialises everything done to one owner's pool and runs.
create function roi.owner_lock_key(owner uuid) returns bigint
  language sql immutable security invoker set search_path = ''
as $$
  select hashtextextended('roi.benchmark:' || owner::text, 0)
$$;

-- The advisory lock key that serialises closing one run (its last verdicts, its timeout, a switch of
-- mode), so that two closers cannot both miss the moment or both close it.
create function roi.run_lock_key(run uuid) returns bigint
  language sql immutable security invoker set search_path = ''
as $$
  select hashtextextended('roi.run:' || run::text, 0)
$$;

-- Record whether the recall being configured takes the query embedding, once, where recall_function
-- is written (`zm-roi configure`, or an operator's update): every run reads the answer.
create function roi.note_recall_takes_embedding() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  new.recall_takes_embedding := coalesce(
    (select p.pronargs = 6 and p.proargtypes[5] = 'extensions.vector'::regtype
     from pg_catalog.pg_proc p where p.oid = to_regprocedure(new.recall_function)), false);
  return new;
end
$$;

-- Wait up to roi.settings.owner_lock_wait (default 30 seconds) for the owner's lock: a concurrent
-- call finishes well within that, and a caller should hear `in_progress` rather than hang behind
-- something stuck. A setting, so a deployment can tune it and tests need not wait half a minute.
create function roi.wait_for_owner_lock(lock_key bigint) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  previous text := current_setting('lock_timeout');
  wait_ms bigint;
begin
  select greatest(1, (extract(epoch from s.owner_lock_wait) * 1000)::bigint) into wait_ms from roi.settings s;
  perform set_config('lock_timeout', coalesce(wait_ms, 30000) || 'ms', true);
  perform pg_advisory_xact_lock(lock_key);
  perform set_config('lock_timeout', previous, true);
  return true;
exception when lock_not_available then
  return false;
end
$$;

-- The caller's open run (no closure yet), if any.
create function roi.open_run() returns roi.runs
  language sql stable security invoker set search_path = ''
as $$
  select r.* from roi.pending_runs pr join roi.runs r on r.id = pr.run_id
  where pr.owner_id = (select auth.uid()) and not pr.closed
  order by pr.started_at desc
  limit 1
$$;

-- Wilson score interval (95%) for k successes in n trials: honest error bars for 20 probes.
create function roi.wilson_bound(k bigint, n bigint, upper_bound boolean) returns numeric
  language sql immutable security invoker set search_path = ''
as $$
  select round(greatest(0, least(1,
           (p + z * z / (2 * t)
             + (case when upper_bound then 1 else -1 end) * z * sqrt(p * (1 - p) / t + z * z / (4 * t * t)))
           / (1 + z * z / t))), 4)
  from (select k::numeric / n as p, 1.96::numeric as z, n::numeric as t where n > 0) w
$$;

-- Two-sided exact sign test on the discordant pairs of a paired comparison (this run against the
-- owner's previous one): the chance, with no real change, of a split at least this lopsided. Null
-- when there is no discordant pair.
create function roi.sign_test_p(improved bigint, regressed bigint) returns numeric
  language plpgsql immutable security invoker set search_path = ''
as $$
declare
  n integer := improved + regressed;
  k integer := least(improved, regressed);
  term numeric := 1;
  tail numeric := 1;
begin
  if n is null or n = 0 then
    return null;
  end if;
  for i in 1..k loop
    term := term * (n - i + 1) / i;  -- C(n, i), exact: C(n, i-1) * (n-i+1) is divisible by i
    tail := tail + term;
  end loop;
  return round(least(1, 2 * tail / power(2::numeric, n)), 4);
end
$$;

-- A run's judge fingerprint: who decided its verdicts. Deterministic runs are judged by the strict
-- retrieval check; an LLM run by the distinct fingerprints its verdicts were recorded with (two, joined
-- by ' + ', when the worker's judge changed mid-run); null while no verdict is in.
create function roi.run_judge_fingerprint(target_run uuid, run_mode text) returns text
  language sql stable security invoker set search_path = ''
as $$
  select case when run_mode = 'deterministic' then 'deterministic:retrieval-check'
              else (select string_agg(j.judge_fingerprint, ' + ' order by j.judge_fingerprint)
                    from roi.run_judges j where j.run_id = target_run) end
$$;

-- The benchmark, called by the MCP tool through the Data API as the signed-in user. SECURITY
-- INVOKER: every recall runs as the caller with RLS applied. One run per owner at a time: a
-- transaction-scoped advisory lock serialises concurrent calls, and an open run is the durable
-- guard that makes a later call answer `in_progress` (unless it is overdue, or an LLM run left
-- without a judge in deterministic mode: either is closed and a new run starts). After a completed
-- run the pool rotates and tops up before the call returns, in both modes (roi.rotate_completed_runs):
-- the run it just judged (deterministic), an LLM run the worker closed since the last call. JIT off: its
-- statements are short, and their estimates grow with the tables, not with their work.
create function public.benchmark_memory() returns jsonb
  language plpgsql volatile security invoker set search_path = '' set jit = off
as $$
declare
  caller uuid := auth.uid();
  lock_key bigint;
  newest_before uuid;
  running roi.runs;
  config roi.settings;
  counts record;
  result jsonb;
begin
  if caller is null or coalesce(auth.role(), '') <> 'authenticated' then
    raise exception 'benchmark_memory() needs a signed-in user: call it with the user''s access token'
      using errcode = '28000';
  end if;
  lock_key := roi.owner_lock_key(caller);
  perform roi.open_gate();

  -- A concurrent call for the same owner: wait for it (briefly), then report the run it started.
  if not pg_try_advisory_xact_lock(lock_key) then
    select r.id into newest_before from roi.runs r
    where r.owner_id = caller order by r.started_at desc limit 1;
    if not roi.wait_for_owner_lock(lock_key) then
      perform roi.close_gate();
      return jsonb_build_object('status', 'in_progress', 'run_id', newest_before);
    end if;
    select r.* into running from roi.runs r
    where r.owner_id = caller order by r.started_at desc limit 1;
    if running.id is distinct from newest_before then
      perform roi.close_gate();
      return jsonb_build_object('status', 'in_progress', 'run_id', running.id);
    end if;
  end if;

  running := roi.open_run();
  if running.id is not null and not roi.close_overdue_run(running.id)
     and not roi.close_run_left_without_judge(running.id) then
    perform roi.close_gate();
    return jsonb_build_object('status', 'in_progress', 'run_id', running.id);
  end if;

  select * into config from roi.settings;
  perform roi.retire_unreachable_probes();
  if config.extractor = 'llm' then
    perform roi.hand_template_questions_to_writer();
  end if;
  perform roi.top_up_pool();
  select * into counts from roi.pool_counts();

  if counts.active = 0 and counts.pending = 0 then
    result := jsonb_build_object('status', 'empty', 'message',
      'No live decision, gotcha or convention memory is visible to you yet: store some knowledge first.');
  elsif counts.pending > 0 and counts.active < config.pool_target then
    result := jsonb_build_object('status', 'generating', 'ready', counts.active,
                                 'target', counts.active + counts.pending);
  else
    result := roi.start_run(config.extractor);
  end if;
  perform roi.rotate_completed_runs((result ->> 'run_id')::uuid);
  perform roi.close_gate();
  return result;
end
$$;

-- ============================================================================================
-- Views (security_invoker: they see exactly what the caller's policies allow)
-- ============================================================================================

-- The caller's runs, newest columns last (a view only grows: clients bind to the earlier ones).
-- Aggregates only. Per run: the headline (exclusive rate with its Wilson interval); the retrieval
-- figures that tell a search miss from a knowledge gap (source surfaced, MRR, median rank, and how
-- often the judge's with_memory agrees with the source surfacing); the paired comparison with the
-- owner's previous closed run (improved, regressed, exact sign test; no p-value when the judge
-- changed, since the two runs' verdicts were not made the same way); what it cost (tokens, dollars
-- by litellm's price map, calls on the owner's own key); the closed-book spot-check; what it
-- measured (recall function, embedding model of its questions); and the judge checks: questions
-- the gate sent back to the model or to their template, who judged (judge_fingerprint, and
-- judge_changed against the previous run; null while either run has no judged verdict), how often the
-- judge still said answerable with the source withheld, and how often reversing the results left a
-- judged verdict unchanged.
create view public.roi_benchmark_runs with (security_invoker = true) as
select r.id as run_id,
       r.started_at,
       c.closed_at as finished_at,
       case when c.run_id is null then 'judging' else 'complete' end as status,
       r.mode,
       r.probe_count,
       coalesce(v.judged, 0)::integer as judged_count,
       coalesce(v.skipped, 0)::integer as skipped_count,
       coalesce(v.with_memory, 0)::integer as with_memory_count,
       coalesce(v.without_memory, 0)::integer as without_memory_count,
       coalesce(v.exclusive, 0)::integer as exclusive_count,
       round(v.exclusive::numeric / nullif(v.judged, 0), 4) as exclusive_rate,
       roi.wilson_bound(v.exclusive, v.judged, false) as exclusive_rate_low,
       roi.wilson_bound(v.exclusive, v.judged, true) as exclusive_rate_high,
       coalesce(v.surfaced, 0)::integer as source_surfaced_count,
       v.mrr as source_mrr,
       coalesce(v.agreement, 0)::integer as retrieval_agreement_count,
       prev.run_id as previous_run_id,
       coalesce(pair.paired, 0)::integer as paired_count,
       coalesce(pair.improved, 0)::integer as improved_count,
       coalesce(pair.regressed, 0)::integer as regressed_count,
       case when judge.changed is not true then roi.sign_test_p(pair.improved, pair.regressed) end
         as paired_p_value,
       coalesce(u.input_tokens, 0)::bigint as input_tokens,
       coalesce(u.output_tokens, 0)::bigint as output_tokens,
       u.cost_usd,
       coalesce(u.own_key_calls, 0)::integer as own_key_calls,
       v.median_rank as source_median_rank,
       coalesce(cb.checked, 0)::integer as closed_book_checked,
       coalesce(cb.correct, 0)::integer as closed_book_correct,
       coalesce(cb.agreement, 0)::integer as closed_book_agreement_count,
       r.recall_function,
       r.embedding_model,
       coalesce(v.regenerated, 0)::integer as questions_regenerated,
       coalesce(v.templated, 0)::integer as template_questions,
       judge.fingerprint as judge_fingerprint,
       judge.changed as judge_changed,
       coalesce(jc.withheld, 0)::integer as withheld_checked,
       coalesce(jc.withheld_answered, 0)::integer as withheld_answered_count,
       coalesce(jc.reversed, 0)::integer as order_checked,
       coalesce(jc.reversed_agreed, 0)::integer as order_agreement_count
from roi.runs r
left join roi.run_closures c on c.run_id = r.id
left join lateral (
  select count(*) filter (where not x.skipped) as judged,
         count(*) filter (where x.skipped) as skipped,
         count(*) filter (where x.with_memory) as with_memory,
         count(*) filter (where x.without_memory) as without_memory,
         count(*) filter (where x.with_memory and not x.without_memory) as exclusive,
         count(*) filter (where not x.skipped and o.source_rank is not null) as surfaced,
         round(avg(coalesce(1.0 / o.source_rank, 0)) filter (where not x.skipped), 4) as mrr,
         count(*) filter (where x.with_memory = (o.source_rank is not null)) as agreement,
         percentile_disc(0.5) within group (order by o.source_rank)
           filter (where not x.skipped and o.source_rank is not null) as median_rank,
         count(*) filter (where o.question_origin = 'retry') as regenerated,
         count(*) filter (where o.question_origin = 'template') as templated
  from roi.verdicts x
  left join roi.recall_outcomes o on o.run_id = x.run_id and o.probe_id = x.probe_id
  where x.run_id = r.id
) v on true
left join lateral (
  select p.id as run_id, p.mode from roi.runs p join roi.run_closures pc on pc.run_id = p.id
  where p.owner_id = r.owner_id and p.started_at < r.started_at
  order by p.started_at desc
  limit 1
) prev on true
left join lateral (
  select f.fingerprint,
         case when prev.run_id is null then false else f.fingerprint <> pf.fingerprint end as changed
  from (select roi.run_judge_fingerprint(r.id, r.mode) as fingerprint) f
  cross join lateral (select roi.run_judge_fingerprint(prev.run_id, prev.mode) as fingerprint) pf
) judge on true
left join lateral (
  select count(*) as paired,
         count(*) filter (where (a.with_memory and not a.without_memory)
                            and not (b.with_memory and not b.without_memory)) as improved,
         count(*) filter (where not (a.with_memory and not a.without_memory)
                            and (b.with_memory and not b.without_memory)) as regressed
  from roi.verdicts a
  join roi.verdicts b on b.run_id = prev.run_id and b.probe_id = a.probe_id and not b.skipped
  where a.run_id = r.id and not a.skipped
) pair on prev.run_id is not null
left join lateral (
  select sum(e.input_tokens) as input_tokens,
         sum(e.output_tokens) as output_tokens,
         sum(e.cost_usd) as cost_usd,
         count(*) filter (where e.byok) as own_key_calls
  from public.usage_events e
  where e.run_id = r.id and e.owner_id = r.owner_id
) u on true
left join lateral (
  select count(*) as checked,
         count(*) filter (where b.bare_correct) as correct,
         count(*) filter (where b.bare_correct = x.without_memory) as agreement
  from roi.closed_book_results b
  left join roi.verdicts x on x.run_id = b.run_id and x.probe_id = b.probe_id and not x.skipped
  where b.run_id = r.id
) cb on true
left join lateral (
  select count(*) filter (where j.kind = 'judge_withheld') as withheld,
         count(*) filter (where j.kind = 'judge_withheld' and j.with_memory) as withheld_answered,
         count(*) filter (where j.kind = 'judge_reversed' and x.probe_id is not null) as reversed,
         count(*) filter (where j.kind = 'judge_reversed' and j.with_memory = x.with_memory
                            and j.without_memory = x.without_memory) as reversed_agreed
  from roi.judge_check_results j
  left join roi.verdicts x on x.run_id = j.run_id and x.probe_id = j.probe_id and not x.skipped
  where j.run_id = r.id
) jc on true
where r.owner_id = (select auth.uid());

-- The headline split by the source's kind and by its scope (the layer it lives in). Per dimension
-- the rows add up to the run's totals. Aggregates only.
create view public.roi_benchmark_breakdown with (security_invoker = true) as
select x.run_id,
       d.dimension,
       d.value,
       (count(*) filter (where not x.skipped))::integer as judged_count,
       (count(*) filter (where x.with_memory))::integer as with_memory_count,
       (count(*) filter (where x.without_memory))::integer as without_memory_count,
       (count(*) filter (where x.with_memory and not x.without_memory))::integer as exclusive_count,
       round((count(*) filter (where x.with_memory and not x.without_memory))::numeric
             / nullif(count(*) filter (where not x.skipped), 0), 4) as exclusive_rate
from roi.verdicts x
join roi.recall_outcomes o on o.run_id = x.run_id and o.probe_id = x.probe_id
cross join lateral (values ('kind', o.source_kind), ('scope', o.source_scope)) d (dimension, value)
where x.owner_id = (select auth.uid())
group by x.run_id, d.dimension, d.value;

-- The tile is the one home of its wording: its state, its hint and, in deterministic mode, the
-- sentence saying which figure the strict retrieval check bounds and in which direction. The
-- dashboard, the MCP server and the demo render these columns; none of them re-derives them.
-- States: invite (no run yet), judging (the latest run is still being judged), no_score (the latest
-- run finished with every question skipped: no rate, even after an earlier score, which the trend
-- keeps), ready (a score). `scored_run_id` is the one home of "the scored run": the newest complete
-- run with a judged question, unless the latest run is no_score. `headline`, `explanation` and
-- `note` are the tile's remaining words (the invite's explanation quotes roi.settings.pool_target).
-- It names the run list's columns it was defined with: `select *` in a view is expanded once, when
-- the view is created, and the run list has grown since.
create view public.roi_benchmark_tile with (security_invoker = true) as
with me as (
  select auth.uid() as owner_id where auth.uid() is not null
), latest as (
  select run_id, started_at, finished_at, status, mode, probe_count, judged_count, skipped_count,
         with_memory_count, without_memory_count, exclusive_count, exclusive_rate, exclusive_rate_low,
         exclusive_rate_high
  from public.roi_benchmark_runs order by started_at desc limit 1
), scored as (
  select run_id, started_at, finished_at, status, mode, probe_count, judged_count, skipped_count,
         with_memory_count, without_memory_count, exclusive_count, exclusive_rate, exclusive_rate_low,
         exclusive_rate_high
  from public.roi_benchmark_runs
  where status = 'complete' and judged_count > 0
    and not exists (select from latest l where l.status = 'complete' and l.judged_count = 0)
  order by started_at desc limit 1
), trend as (
  select array_agg(exclusive_rate order by started_at) as rates
  from public.roi_benchmark_runs where status = 'complete' and judged_count > 0
)
select case when latest.run_id is null then 'invite'
            when latest.status = 'judging' then 'judging'
            when scored.run_id is null then 'no_score'
            else 'ready' end as state,
       scored.exclusive_rate,
       scored.exclusive_rate_low,
       scored.exclusive_rate_high,
       scored.exclusive_count,
       scored.judged_count,
       case
         when latest.run_id is null then
           'Ask your agent to run benchmark_memory to see what only your memory knows.'
         when scored.run_id is null and latest.status = 'judging' then
           format('Judging %s questions from your memory…', latest.probe_count)
         when scored.run_id is null then
           format('None of the latest run''s %s questions could be judged: ask your agent to run '
                  'benchmark_memory again.', latest.probe_count)
         else
           format('%s of %s questions only memory answered', scored.exclusive_count, scored.judged_count)
       end as hint,
       latest.run_id as latest_run_id,
       latest.started_at as latest_run_at,
       coalesce(trend.rates, '{}') as trend,
       case when scored.mode = 'deterministic' then
         'In deterministic mode only the source memory counts as an answer, so search success is if '
         'anything under-counted, and no question is assumed answerable without memory, so this rate '
         'is an upper bound on what only memory knows.'
       end as caveat,
       scored.run_id as scored_run_id,
       case
         when latest.run_id is null then 'No benchmark yet'
         when scored.run_id is null and latest.status = 'judging' then 'Judging…'
         when scored.run_id is null and trend.rates is null then 'No score yet'
         when scored.run_id is null then 'No score for the latest run'
       end as headline,
       case
         when latest.run_id is null then
           format('It asks about %s questions drawn from your own decisions, gotchas and conventions, '
                  'and counts the ones your memory answers that a bare agent could not.',
                  (select s.pool_target from roi.settings s))
         when scored.run_id is null and latest.status = 'judging' then
           'Your first score appears here once the verdicts land, usually within a minute or two.'
         when scored.run_id is null and trend.rates is not null then
           'Earlier scores stay in the trend and the run list; the tile shows only the latest run''s.'
         when scored.run_id is not null then
           'The share of questions from your own memory that memory answered and a bare agent could not.'
       end as explanation,
       case when scored.run_id is not null and latest.status = 'judging' then
         format('A newer run of %s questions is being judged.', latest.probe_count)
       end as note
from me
left join latest on true
left join scored on true
left join trend on true;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger runs_are_append_only before update or delete on roi.runs
  for each row execute function roi.forbid_result_change();
create trigger recalls_are_append_only before update or delete on roi.recalls
  for each row execute function roi.forbid_result_change();
create trigger verdicts_are_append_only before update or delete on roi.verdicts
  for each row execute function roi.forbid_result_change();
create trigger run_closures_are_append_only before update or delete on roi.run_closures
  for each row execute function roi.forbid_result_change();
create trigger rotations_are_append_only before update or delete on roi.rotations
  for each row execute function roi.forbid_result_change();
create trigger recall_outcomes_are_append_only before update or delete on roi.recall_outcomes
  for each row execute function roi.forbid_result_change();
create trigger closed_book_results_are_append_only before update or delete on roi.closed_book_results
  for each row execute function roi.forbid_result_change();
create trigger run_judges_are_append_only before update or delete on roi.run_judges
  for each row execute function roi.forbid_result_change();
create trigger judge_check_results_are_append_only before update or delete on roi.judge_check_results
  for each row execute function roi.forbid_result_change();

create trigger runs_refuse_truncate before truncate on roi.runs
  for each statement execute function roi.forbid_result_truncate();
create trigger recalls_refuse_truncate before truncate on roi.recalls
  for each statement execute function roi.forbid_result_truncate();
create trigger verdicts_refuse_truncate before truncate on roi.verdicts
  for each statement execute function roi.forbid_result_truncate();
create trigger run_closures_refuse_truncate before truncate on roi.run_closures
  for each statement execute function roi.forbid_result_truncate();
create trigger rotations_refuse_truncate before truncate on roi.rotations
  for each statement execute function roi.forbid_result_truncate();
create trigger recall_outcomes_refuse_truncate before truncate on roi.recall_outcomes
  for each statement execute function roi.forbid_result_truncate();
create trigger closed_book_results_refuse_truncate before truncate on roi.closed_book_results
  for each statement execute function roi.forbid_result_truncate();
create trigger run_judges_refuse_truncate before truncate on roi.run_judges
  for each statement execute function roi.forbid_result_truncate();
create trigger judge_check_results_refuse_truncate before truncate on roi.judge_check_results
  for each statement execute function roi.forbid_result_truncate();

create trigger settings_note_recall_takes_embedding before insert or update of recall_function on roi.settings
  for each row execute function roi.note_recall_takes_embedding();

create trigger recalls_note_outcomes after insert on roi.recalls
  referencing new table as recorded
  for each statement execute function roi.note_recall_outcomes();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.settings enable row level security;
alter table roi.probes enable row level security;
alter table roi.runs enable row level security;
alter table roi.recalls enable row level security;
alter table roi.verdicts enable row level security;
alter table roi.run_closures enable row level security;
alter table roi.rotations enable row level security;
alter table roi.pending_runs enable row level security;
alter table roi.recall_outcomes enable row level security;
alter table roi.closed_book_results enable row level security;
alter table roi.run_judges enable row level security;
alter table roi.judge_check_results enable row level security;

create policy "The benchmark reads its settings" on roi.settings
  for select to authenticated using (true);

create policy "Owners work on their probes only inside the benchmark" on roi.probes
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their runs" on roi.runs
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners start runs only inside the benchmark" on roi.runs
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners handle recall snapshots only inside the benchmark" on roi.recalls
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their verdicts" on roi.verdicts
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners record verdicts only inside the benchmark" on roi.verdicts
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their run closures" on roi.run_closures
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners close runs only inside the benchmark" on roi.run_closures
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners track their pending runs only inside the benchmark" on roi.pending_runs
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their rotations" on roi.rotations
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners rotate only inside the benchmark" on roi.rotations
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their recall outcomes" on roi.recall_outcomes
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners record recall outcomes only inside the benchmark" on roi.recall_outcomes
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));

create policy "Owners read their spot-check results" on roi.closed_book_results
  for select to authenticated using (owner_id = (select auth.uid()));

create policy "Owners read the judges of their runs" on roi.run_judges
  for select to authenticated using (owner_id = (select auth.uid()));

create policy "Owners read their judge check results" on roi.judge_check_results
  for select to authenticated using (owner_id = (select auth.uid()));

-- ============================================================================================
-- Grants
-- ============================================================================================
grant select on roi.settings to authenticated;
grant select, insert, update on roi.probes to authenticated;
grant select, insert on roi.runs, roi.recalls, roi.verdicts, roi.run_closures, roi.rotations
  to authenticated;
grant select, insert, update, delete on roi.pending_runs to authenticated;
grant select, insert on roi.recall_outcomes to authenticated;
grant select on roi.closed_book_results, roi.run_judges, roi.judge_check_results to authenticated;

-- Per-schema default privileges cannot take back the global default (EXECUTE for PUBLIC), so
-- every roi function is revoked from PUBLIC outright; the grants below say who may call what.
-- (A function added to roi in a later file needs its own revoke from public, as upkeep's and the
-- worker's have.) roi.configure_recall and roi.resolve_recall_function are granted to no one:
-- `zm-roi configure` runs them as the database owner. A trigger function needs no grant to fire.
revoke execute on all functions in schema roi from public;

grant execute on function roi.inside_benchmark(), roi.open_gate(), roi.close_gate(),
  roi.template_question(text, text, text), roi.pool_counts(), roi.retire_unreachable_probes(),
  roi.never_probed_knowledge(integer), roi.take_over_pending_probes(), roi.top_up_pool(),
  roi.rotate_and_top_up(uuid), roi.rotate_completed_runs(uuid), roi.retire_longest_serving(uuid, integer),
  roi.refill_pool(public.memories[]), roi.close_run_if_done(uuid), roi.close_overdue_run(uuid),
  roi.close_run_left_without_judge(uuid),
  roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector), roi.start_run(text),
  roi.open_run(), roi.owner_lock_key(uuid), roi.run_lock_key(uuid), roi.wait_for_owner_lock(bigint),
  roi.wilson_bound(bigint, bigint, boolean), roi.sign_test_p(bigint, bigint),
  roi.run_judge_fingerprint(uuid, text), roi.hand_template_questions_to_writer()
  to authenticated;

revoke execute on function public.benchmark_memory() from public, anon;
grant execute on function public.benchmark_memory() to authenticated;

revoke all on public.roi_benchmark_runs, public.roi_benchmark_breakdown, public.roi_benchmark_tile
  from anon, authenticated;
grant select on public.roi_benchmark_runs, public.roi_benchmark_breakdown, public.roi_benchmark_tile
  to authenticated;
