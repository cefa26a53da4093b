-- One queue of work (issue 19): roi.work replaces the three hand-built queues (pending probes'
-- lease columns, roi.judgments, roi.closed_book_queue) with one table, one claim verb, one release
-- verb with one backoff formula and a per-kind give-up, the record_… verbs kept per kind. Question
-- embeddings become work for roi_worker (kind embed_question); roi_embedder no longer reads any
-- question text. Queued rows of a deployed database move into the new queue (nothing is lost:
-- tests/test_schema_files.py builds a database at the previous migration, queues work of every
-- kind, applies this one and counts). supabase/schemas/50_roi_worker.sql has the design.

-- ============================================================================================
-- Tables
-- ============================================================================================
create table roi.work (
  id bigint generated always as identity primary key,
  kind text not null,
  urgency smallint generated always as (case kind when 'judge' then 0 when 'closed_book' then 1
    when 'write_question' then 2 when 'embed_question' then 3 end) stored,
  owner_id uuid not null references auth.users (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  run_id uuid references roi.runs (id) on delete cascade,
  attempts integer not null default 0,
  run_after timestamptz not null default now(),
  lease_until timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  constraint work_kind_is_known check (urgency is not null),
  constraint work_run_belongs_to_its_kind check ((run_id is not null) = (kind in ('judge', 'closed_book'))),
  unique nulls not distinct (kind, probe_id, run_id)
);

create index work_due_idx on roi.work (urgency, run_after, id);
create index work_leased_idx on roi.work (lease_until) where lease_until is not null;
create index work_probe_idx on roi.work (probe_id);
create index work_run_idx on roi.work (run_id) where run_id is not null;
create index work_owner_idx on roi.work (owner_id);

-- ============================================================================================
-- The queued rows move, with their attempts, backoff, leases and last errors
-- ============================================================================================
insert into roi.work (kind, owner_id, probe_id, attempts, run_after, lease_until, last_error, created_at)
select 'write_question', p.owner_id, p.id, p.attempts, p.run_after, p.lease_until, p.last_error, p.created_at
from roi.probes p where p.state = 'pending';
update roi.probes p set last_error = null where p.state = 'pending';
insert into roi.work (kind, owner_id, probe_id, run_id, attempts, run_after, lease_until, last_error, created_at)
select 'judge', j.owner_id, j.probe_id, j.run_id, j.attempts, j.run_after, j.lease_until, j.last_error, j.created_at
from roi.judgments j;
insert into roi.work (kind, owner_id, probe_id, run_id, attempts, run_after, lease_until, last_error, created_at)
select 'closed_book', q.owner_id, q.probe_id, q.run_id, q.attempts, q.run_after, q.lease_until, q.last_error,
       q.created_at
from roi.closed_book_queue q;
-- Active questions `zm-roi embed` would have embedded (templated ones, or the worker's whose
-- embedding failed) are now the worker's to embed.
insert into roi.work (kind, owner_id, probe_id)
select 'embed_question', p.owner_id, p.id from roi.probes p
where p.state = 'active' and p.question_embedding is null;

-- ============================================================================================
-- What the three queues were: their verbs, the policies that named them, the tables, the columns
-- ============================================================================================
drop function roi.claim_generation(), roi.release_generation(uuid, integer, text), roi.claim_judgment(),
  roi.release_judgment(uuid, uuid, integer, text), roi.claim_closed_book(),
  roi.release_closed_book(uuid, uuid, integer, text);

drop policy "The worker reads pending probes and the probes it judges or spot-checks" on roi.probes;
drop policy "The worker writes questions into pending probes" on roi.probes;
drop policy "The worker reads the recall snapshots it judges" on roi.recalls;
drop policy "The worker records verdicts for queued judgments only" on roi.verdicts;
drop policy "The worker records results for queued spot-checks only" on roi.closed_book_results;
drop policy "The worker writes notes for queued judgments only" on roi.verdict_notes;
drop policy "The worker reads the keys of owners it has work for" on roi.provider_keys;
drop policy "The embedder reads active questions to embed them" on roi.probes;
drop policy "The embedder writes embeddings of active questions" on roi.probes;

drop table roi.judgments, roi.closed_book_queue;
alter table roi.probes drop column attempts, drop column run_after, drop column lease_until;

-- ============================================================================================
-- Functions
-- ============================================================================================

-- A probe's work follows its state, in one place: a pending probe waits for its question
-- (write_question), an active one with no embedding for its embedding (embed_question), and work
-- that no longer applies leaves with the state change (a question written or taken over, a probe
-- rotated out; spot-checks of a probe whose source the owner lost). Runs as whoever changed the probe
-- (the owner inside the benchmark, upkeep as the owner, or the worker) and wakes the worker.
create or replace function roi.queue_probe_work() returns trigger
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
           or (w.kind = 'closed_book' and new.retired_reason in ('source_invalidated', 'source_unreachable')));
  end if;
  wanted := case when new.state = 'pending' then 'write_question'
                 when new.state = 'active' and new.question_embedding is null then 'embed_question' end;
  if wanted is not null then
    insert into roi.work (kind, owner_id, probe_id) values (wanted, new.owner_id, new.id)
    on conflict do nothing;
    perform pg_notify('roi_work', wanted);
  end if;
  return null;
end
$$;

-- Retire the caller's probes whose source is invalidated or no longer visible to them. Runs as the
-- owner (caller or impersonated), so "visible" means exactly what RLS lets the owner see.
create or replace function roi.retire_unreachable_probes() returns integer
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

-- Deterministic mode: the caller's pending probes (queued for a worker that is not coming, after a
-- switch from LLM mode) get their template question and join the pool (their write_question work
-- leaves the queue with the state change). A worker still holding one finds it no longer pending and
-- drops its question (roi.record_question returns false).
create or replace function roi.take_over_pending_probes() returns integer
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

-- Fill the caller's pool up to the target, newest never-probed knowledge first: from `fresh` (the
-- newest never-probed memories a caller already read, newest first) when it holds enough, otherwise
-- read again. Deterministic mode writes the question at once (and first takes over the probes LLM
-- mode left pending); LLM mode leaves the probe pending for the worker (roi.queue_probe_work queues
-- and announces its question). The shared step
-- of roi.top_up_pool() and roi.rotate_and_top_up().
create or replace function roi.refill_pool(fresh public.memories[]) returns integer
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

-- Close a run whose every probe has a verdict. Serialised per run by an advisory lock, so the two
-- workers recording the last two verdicts cannot both miss the moment.
create or replace function roi.close_run_if_done(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  run roi.runs;
begin
  perform pg_advisory_xact_lock(hashtextextended('roi.run:' || target_run::text, 0));
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
create or replace function roi.close_overdue_run(target_run uuid) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  run roi.runs;
begin
  perform pg_advisory_xact_lock(hashtextextended('roi.run:' || target_run::text, 0));
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

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced, and either record strict verdicts at once (deterministic) or queue one judgment per
-- probe (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged, closed, rotated and refilled before this returns, so it is never
-- pending: upkeep has nothing to attend to, and no pending_runs row is written only to be deleted.
create or replace function roi.start_run(mode text) returns jsonb
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
          case when (select s.recall_function from roi.settings s) like '%extensions.vector)' then question_model end)
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
    perform roi.rotate_and_top_up(new_run);
  else
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select 'judge', rc.run_id, rc.probe_id, rc.owner_id from roi.recalls rc where rc.run_id = new_run;
    perform pg_notify('roi_work', 'judge');
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total);
end
$$;

-- After recalls are recorded: keep the text-free outcome of each (source rank, kind, scope), and in
-- LLM mode queue up to roi.settings.closed_book_checks of the run's probes for the closed-book
-- spot-check, picked at random. Runs as whoever recorded the recalls (the owner, inside the benchmark).
create or replace function roi.note_recall_outcomes() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  checks integer := (select s.closed_book_checks from roi.settings s);
  queued integer;
begin
  insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank)
  select n.run_id, n.probe_id, n.owner_id, p.source_kind, p.source_scope,
         array_position(n.surfaced_ids, p.memory_id)
  from recorded n join roi.probes p on p.id = n.probe_id
  on conflict (run_id, probe_id) do nothing;

  if checks > 0 then
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
    where x.pick + x.already <= checks
    on conflict do nothing;
    get diagnostics queued = row_count;
    if queued > 0 then
      perform pg_notify('roi_work', 'closed_book');
    end if;
  end if;
  return null;
end
$$;

-- How a judgment leaves the queue (its row locked by the caller), judged or skipped: its one verdict
-- (a second is a no-op), the note kept out of owners' sight, the row gone, the run closed if complete.
create or replace function roi.settle_judgment(job_id bigint, judged_with_memory boolean, judged_without_memory boolean,
  judged_confidence real, settled_note text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
  recorded integer;
begin
  select w.run_id, w.probe_id, w.owner_id, p.memory_id into job
  from roi.work w join roi.probes p on p.id = w.probe_id
  where w.id = job_id and w.kind = 'judge';
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
  delete from roi.work w where w.id = job_id;
  perform roi.close_run_if_done(job.run_id);
  return recorded > 0;
end
$$;

-- A failed attempt goes back to the queue after a backoff that grows with each attempt
-- (graphile-worker's formula, the one for every kind); after max_attempts the row gives up the way
-- its kind does: a judgment is recorded as skipped ('judge_failed', the last error in the gated
-- notes, so a partial run still completes and counts what was judged), a question that cannot be
-- written retires its probe ('generation_failed'), a spot-check or an embedding is dropped (a sample
-- that cannot be made is left out; the question stays lexical-only). `attempt` fences a stale worker:
-- once the row was released or claimed again, a release of that attempt changes nothing.
create or replace function roi.release_work(work_id bigint, attempt integer, failure text) returns text
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
  case job.kind
    when 'judge' then
      perform roi.settle_judgment(job.id, null, null, null, coalesce(nullif(failure, ''), 'judge failed'));
      return 'skipped';
    when 'write_question' then
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

-- Hands a worker the most urgent due row that is not leased (a waiting run's judgments first, then
-- spot-checks, questions to write, questions to embed; oldest first within a kind) under a fresh
-- lease, with what its kind needs and nothing more. A crashed worker's row comes back by itself once
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
         r.surfaced
  from claimed c
  join roi.probes p on p.id = c.probe_id
  left join roi.recalls r on c.kind = 'judge' and r.run_id = c.run_id and r.probe_id = c.probe_id;
end
$$;

-- The question the model wrote for a claimed probe: the probe joins the pool (and its
-- write_question row leaves the queue). False when the probe is no longer pending (another worker got
-- there first, or upkeep retired it): the question is dropped.
create or replace function roi.record_question(target_probe uuid, new_question text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  if length(btrim(coalesce(new_question, ''))) not between 10 and 300 then
    raise exception 'roi.record_question: a question has 10 to 300 characters' using errcode = '22023';
  end if;
  update roi.probes p
  set question = btrim(new_question), state = 'active', activated_at = now(), last_error = null
  where p.id = target_probe and p.state = 'pending';
  return found;
end
$$;

-- The question the model wrote, with its embedding (the worker embeds what it writes, so the
-- question joins the pool ready for both legs of recall). Same rules as the two-argument form.
create or replace function roi.record_question(target_probe uuid, new_question text, new_embedding extensions.vector,
  new_embedding_model text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  -- Set while the probe is still pending: that is the row the worker may update.
  update roi.probes p
  set question_embedding = new_embedding, question_embedding_model = new_embedding_model
  where p.id = target_probe and p.state = 'pending';
  return roi.record_question(target_probe, new_question);
end
$$;

-- The embedding of an active probe's question (embed_question work): stored, the row gone. With no
-- embedding (embeddings are off for this worker) the row just leaves: the lexical leg serves the
-- question. False when nothing was stored (the row had left, or the probe is no longer active).
create or replace function roi.record_question_embedding(target_probe uuid, new_embedding extensions.vector,
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

-- `zm-roi embed` (as roi_embedder, which never reads a question): queue embed_question work for the
-- active questions not embedded by `model`, for the worker to embed. Returns how many were queued.
create or replace function roi.queue_question_embeddings(model text) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  queued integer;
begin
  insert into roi.work (kind, owner_id, probe_id)
  select 'embed_question', p.owner_id, p.id from roi.probes p
  where p.state = 'active' and p.question_embedding_model is distinct from model
  on conflict do nothing;
  get diagnostics queued = row_count;
  if queued > 0 then
    perform pg_notify('roi_work', 'embed_question');
  end if;
  return queued;
end
$$;

-- The judge's verdict on a queued judgment, with its reason for the gated notes. False when the
-- judgment is no longer queued (another worker recorded it, or the run timed out): never a second verdict.
create or replace function roi.record_verdict(target_run uuid, target_probe uuid, judged_with_memory boolean,
  judged_without_memory boolean, judged_confidence real, judged_reason text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job_id bigint;
begin
  if judged_with_memory is null or judged_without_memory is null then
    raise exception 'roi.record_verdict: a verdict says yes or no to both questions' using errcode = '22023';
  end if;
  select w.id into job_id from roi.work w
  where w.kind = 'judge' and w.run_id = target_run and w.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  return roi.settle_judgment(job_id, judged_with_memory, judged_without_memory, judged_confidence, judged_reason);
end
$$;

-- The grading call's decision on a claimed spot-check: recorded once, the queue row gone. False when
-- the row is no longer queued (another worker recorded it first).
create or replace function roi.record_closed_book(target_run uuid, target_probe uuid, correct boolean) returns boolean
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

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger probes_queue_work_on_insert after insert on roi.probes
  for each row when (new.state = 'pending' or (new.state = 'active' and new.question_embedding is null))
  execute function roi.queue_probe_work();
create trigger probes_queue_work_on_state_change after update of state on roi.probes
  for each row when (old.state is distinct from new.state) execute function roi.queue_probe_work();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table roi.work enable row level security;

create policy "The worker reads the probes it has work on" on roi.probes
  for select to roi_worker
  using (exists (select from roi.work w where w.probe_id = probes.id));

create policy "The worker writes questions into pending probes and embeddings into probes it embeds" on roi.probes
  for update to roi_worker
  using (state = 'pending'
         or exists (select from roi.work w where w.probe_id = probes.id and w.kind = 'embed_question'))
  with check (state <> 'retired' or retired_reason = 'generation_failed');

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
                 where w.kind = 'judge' and w.run_id = recalls.run_id and w.probe_id = recalls.probe_id));

create policy "The worker records verdicts for queued judgments only" on roi.verdicts
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'judge' and w.run_id = verdicts.run_id and w.probe_id = verdicts.probe_id));

create policy "The worker records results for queued spot-checks only" on roi.closed_book_results
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'closed_book' and w.run_id = closed_book_results.run_id
                        and w.probe_id = closed_book_results.probe_id));

create policy "The worker writes notes for queued judgments only" on roi.verdict_notes
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'judge' and w.run_id = verdict_notes.run_id
                        and w.probe_id = verdict_notes.probe_id));

create policy "The worker reads the keys of owners it has work for" on roi.provider_keys
  for select to roi_worker
  using (exists (select from roi.work w where w.owner_id = provider_keys.owner_id));

create policy "The embedder sees which active probes lack an embedding" on roi.probes
  for select to roi_embedder using (state = 'active');

create policy "The embedder queues the embedding of active questions" on roi.work
  for insert to roi_embedder with check (kind = 'embed_question');

-- ============================================================================================
-- Grants
-- ============================================================================================
grant select, insert, delete on roi.work to roi_worker;
grant update (attempts, run_after, lease_until, last_error) on roi.work to roi_worker;
grant select, insert, delete on roi.work to authenticated;

-- roi_embedder: no question text any more, and no write to probes; it may queue embed_question work.
revoke select (question) on roi.probes from roi_embedder;
revoke update (question_embedding, question_embedding_model) on roi.probes from roi_embedder;
grant insert on roi.work to roi_embedder;

revoke execute on function roi.queue_probe_work(), roi.claim_work(), roi.release_work(bigint, integer, text),
  roi.record_question_embedding(uuid, extensions.vector, text), roi.queue_question_embeddings(text)
  from public, anon, authenticated;
grant execute on function roi.claim_work(), roi.release_work(bigint, integer, text),
  roi.record_question_embedding(uuid, extensions.vector, text)
  to roi_worker;
grant execute on function roi.queue_question_embeddings(text) to roi_embedder;
