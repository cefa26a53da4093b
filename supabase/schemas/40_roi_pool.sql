-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The ROI benchmark's probe pool: the template question, and the pool's life: which knowledge is
-- never probed, retiring what became unreachable, handing template questions to the writer, topping
-- up to roi.settings.pool_target and rotating after a completed run. All of it runs as the owner,
-- inside the benchmark (benchmark_memory(), 50_roi_runs.sql) or upkeep impersonating them
-- (80_roi_upkeep.sql). Cut here because it is the one part of the benchmark that reads memories to
-- choose what to ask; the tables it works on: 30_roi_probes_runs_and_work.sql.

-- ============================================================================================
-- Functions
-- ============================================================================================
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

-- Retire the caller's probes in `states` whose source is invalidated or no longer visible to them.
-- Runs as the owner (caller or impersonated), so "visible" means exactly what RLS lets the owner see.
-- A source among `reachable` is not read again: roi.start_run passes the memories its recalls just
-- returned to the caller, visible and live by construction, so that only the run's probes whose
-- source did not surface cost a read of memories through their read policy. Upkeep checks every
-- pending and active probe; benchmark_memory() the pending ones before a run (all of them in LLM
-- mode), the run its own after their recalls. Planned for each call's arrays (~0.3 ms): the generic
-- plan, forced, made a benchmark call ~3 ms slower.
create function roi.retire_unreachable_probes(states text[] default array['pending', 'active'],
  reachable uuid[] default '{}') returns integer
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
      and p.state = any (states)
      and p.memory_id <> all (reachable)
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
-- cost ~1.3 ms of its ~2.4 ms per call; PL/pgSQL keeps the statement prepared for the session. The
-- owner's probes are one hashed set (`not in`; memory_id is never null), read once a layer kind: as
-- `not exists`, the plan for the few probes an owner is estimated to have rescanned all of them for
-- every memory the walk passed, and both grow with the owner's history (docs/decisions/0044).
create function roi.never_probed_knowledge(wanted integer) returns setof public.memories
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query
    select m.* from (
      (select v.* from public.memories v
       where v.scope = 'personal' and v.invalidated_at is null and v.author_id = (select auth.uid())
         and v.kind in ('decision', 'gotcha', 'convention')
         and v.id not in (select p.memory_id from roi.probes p where p.owner_id = (select auth.uid()))
       order by v.created_at desc, v.id
       limit wanted)
      union all
      select v.* from unnest(array(select public.caller_project_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'project' and v.invalidated_at is null and v.project_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and v.id not in (select p.memory_id from roi.probes p where p.owner_id = (select auth.uid()))
        order by v.created_at desc, v.id
        limit wanted
      ) v
      union all
      select v.* from unnest(array(select public.caller_team_ids())) as layer (id)
      cross join lateral (
        select v.* from public.memories v
        where v.scope = 'team' and v.invalidated_at is null and v.team_id = layer.id
          and v.kind in ('decision', 'gotcha', 'convention')
          and v.id not in (select p.memory_id from roi.probes p where p.owner_id = (select auth.uid()))
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
-- gave them become pending again (question and embeddings cleared), so the worker writes a real one
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
      question_embedding_model = null, question_embedding_minilm = null, question_embedding_minilm_model = null,
      last_error = null
  where p.owner_id = (select auth.uid()) and p.state = 'active' and p.question_origin is null
    and p.question = roi.template_question(p.source_kind, p.source_title, p.source_body);
  get diagnostics handed = row_count;
  return handed;
end
$$;

-- Retire up to `how_many` of the caller's longest-serving active probes after a completed run, and
-- record the rotation once per run. The first step of roi.rotate_and_top_up(). Every run asks every
-- active probe, so the longest-serving are the earliest activated: the order needs no counter, and a
-- call writes no row per probe to keep one (docs/decisions/0043). A probe handed back to the writer
-- (roi.hand_template_questions_to_writer) serves again from its new question's activation.
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
      order by p.activated_at, p.id
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
-- read to decide how many to retire are the rows the top-up adds. A run a spending cap stopped
-- rotates nothing: its probes were not all asked, and fresh probes would spend on their questions
-- while the cap holds. Returns probes retired.
create function roi.rotate_and_top_up(completed_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  fresh public.memories[] := '{}';
  retired integer := 0;
begin
  if not exists (select from roi.rotations r where r.run_id = completed_run)
     and not exists (select from roi.run_closures c where c.run_id = completed_run and c.reason = 'aborted_budget')
  then
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

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.template_question(text, text, text), roi.pool_counts(), roi.retire_unreachable_probes(text[], uuid[]),
  roi.never_probed_knowledge(integer), roi.take_over_pending_probes(), roi.hand_template_questions_to_writer(),
  roi.retire_longest_serving(uuid, integer), roi.refill_pool(public.memories[]), roi.top_up_pool(),
  roi.rotate_and_top_up(uuid), roi.rotate_completed_runs(uuid)
  from public;
grant execute on function roi.template_question(text, text, text), roi.pool_counts(), roi.retire_unreachable_probes(text[], uuid[]),
  roi.never_probed_knowledge(integer), roi.take_over_pending_probes(), roi.hand_template_questions_to_writer(),
  roi.retire_longest_serving(uuid, integer), roi.refill_pool(public.memories[]), roi.top_up_pool(),
  roi.rotate_and_top_up(uuid), roi.rotate_completed_runs(uuid)
  to authenticated;
-- The worker templates a question the model failed to write.
grant execute on function roi.template_question(text, text, text) to roi_worker;
