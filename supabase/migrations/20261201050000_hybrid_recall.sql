-- A real recall: the bundled recall becomes hybrid (lexical + semantic, fused by reciprocal rank),
-- and the benchmark calls whichever recall function the deployment configures.
--
-- Why (issue 12): in LLM mode probe questions are paraphrases, and the lexical recall alone put the
-- source in its top 10 for about 3 questions in 4, so the exclusive rate mostly measured the lexical
-- matcher. And a deployment that already has a search function could not point the benchmark at it.
--
-- Embeddings (384 dimensions, pgvector in schema `extensions`, as Supabase installs it) are written
-- from outside the database by the one embedding door of the Python package: at import, by
-- `zm-roi embed` (the backfill for memories written by other paths, and for templated probe
-- questions), and by the worker for the questions it writes. Each row records its model. Rows with no
-- embedding are still found by the lexical leg. The role `roi_embedder` exists for the backfill: it
-- reads only the text it embeds and writes only the embedding columns.
--
-- No HNSW or IVFFlat index on purpose: under RLS an index-ordered approximate scan applies the
-- policy after the search, so it under-returns, and its row counts reveal how dense other tenants'
-- data is. The semantic leg computes exact distances over the pinned layer, which the lexical leg
-- reads anyway (a few thousand rows).

create schema if not exists extensions;
create extension if not exists vector with schema extensions;

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table public.memories
  add column embedding extensions.vector(384),
  add column embedding_model text;

alter table roi.probes
  add column question_embedding extensions.vector(384),
  add column question_embedding_model text;

-- The recall the benchmark calls, as a regprocedure text (`public.recall(text,uuid,…)`); resolved on
-- every run, so a dropped function fails the run with a clear message instead of calling another.
alter table roi.settings
  add column recall_function text not null
    default 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector)';

-- What produced a run: the recall function and the embedding model of its questions (null when the
-- questions carried no embedding, i.e. only the lexical leg could run).
alter table roi.runs
  add column recall_function text,
  add column embedding_model text;

alter table public.usage_events drop constraint usage_events_purpose_check;
alter table public.usage_events add constraint usage_events_purpose_check
  check (purpose in ('probe_generation', 'judgment', 'closed_book_answer', 'closed_book_grade', 'embedding'));

-- The backfill's least-privilege login (given a password by the operator, or locally by zm-roi db up).
do $$
begin
  if not exists (select from pg_roles where rolname = 'roi_embedder') then
    create role roi_embedder nologin noinherit;
  end if;
end
$$;

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The lexical recall (the bundled recall before this migration, body unchanged from
-- recall_at_scale): kept under its own name as the lexical leg, and as a recall a deployment can
-- configure to compare against (the demo does).
create function public.recall_lexical(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall_lexical.project_id is null and recall_lexical.team_id is null
                      and not coalesce(personal_only, false);
  projects uuid[] := '{}';
  teams uuid[] := '{}';
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if unpinned and caller is null then
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank_cd(m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  if recall_lexical.project_id is not null then
    projects := array[recall_lexical.project_id];
  elsif unpinned then
    projects := array(select public.caller_project_ids());
  end if;
  if recall_lexical.team_id is not null then
    teams := array[recall_lexical.team_id];
  elsif unpinned then
    teams := array(select public.caller_team_ids());
  end if;
  return query
    select c.id, c.kind, c.scope, c.title, c.body, ts_rank_cd(c.search, tsq, 1)::real as score
    from (
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.created_at
      from public.memories m
      where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
      union all
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.created_at
      from public.memories m
      where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
      union all
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.created_at
      from public.memories m
      where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
    ) c
    where c.search @@ tsq
    order by score desc, c.created_at desc, c.id
    limit wanted;
end
$$;

-- The bundled recall, now hybrid. The contract's five arguments plus an optional query embedding
-- (the documented extension of the contract). Without an embedding it is the lexical recall. With
-- one, two legs over the same layers the lexical recall reads (personal + the pin, or every layer the
-- caller is a member of): the lexical leg ranks by ts_rank_cd, the semantic leg by exact cosine
-- distance over the rows that have an embedding; each leg keeps its best 2 × match_count, and
-- reciprocal rank fusion (k = 50, as Supabase's hybrid_search) adds weight / (k + rank) per leg.
-- The weights were tuned on paraphrased questions (bench/README.md, "Hybrid recall"). A caller with
-- no identity and no pin (maintenance) gets the lexical recall: exact distances over a whole corpus
-- are not a read path.
drop function public.recall(text, uuid, uuid, integer, boolean);
create function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false,
  query_embedding extensions.vector default null
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  rrf_k constant integer := 50;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.5;
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false);
  projects uuid[] := '{}';
  teams uuid[] := '{}';
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if query_embedding is null or (unpinned and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  if recall.project_id is not null then
    projects := array[recall.project_id];
  elsif unpinned then
    projects := array(select public.caller_project_ids());
  end if;
  if recall.team_id is not null then
    teams := array[recall.team_id];
  elsif unpinned then
    teams := array(select public.caller_team_ids());
  end if;
  return query
    with layer as materialized (
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.embedding, m.created_at
      from public.memories m
      where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
      union all
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.embedding, m.created_at
      from public.memories m
      where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
      union all
      select m.id, m.kind, m.scope, m.title, m.body, m.search, m.embedding, m.created_at
      from public.memories m
      where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
    ), lexical as (
      select l.id, row_number() over (order by ts_rank_cd(l.search, tsq, 1) desc, l.created_at desc, l.id) as rank
      from layer l
      where l.search @@ tsq
      order by rank
      limit wanted * 2
    ), semantic as (
      select l.id,
             row_number() over (order by l.embedding operator(extensions.<=>) query_embedding, l.created_at desc, l.id)
               as rank
      from layer l
      where l.embedding is not null
      order by rank
      limit wanted * 2
    ), fused as (
      select coalesce(x.id, s.id) as id,
             (coalesce(lexical_weight / (rrf_k + x.rank), 0) + coalesce(semantic_weight / (rrf_k + s.rank), 0))::real
               as score
      from lexical x
      full join semantic s on s.id = x.id
    )
    select l.id, l.kind, l.scope, l.title, l.body, f.score
    from fused f
    join layer l on l.id = f.id
    order by f.score desc, l.created_at desc, l.id
    limit wanted;
end
$$;

-- Resolve SCHEMA.NAME to the recall function the benchmark may call, or raise why not, in one line.
-- The contract: SECURITY INVOKER; arguments (text, uuid, uuid, integer, boolean), optionally followed
-- by a query embedding (extensions.vector); a set whose columns include memory_id, title, body and
-- score, in rank order. When both forms exist, the one that takes an embedding is chosen.
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
  configured text := (select s.recall_function from roi.settings s);
  fn regprocedure := to_regprocedure(configured);
  target record;
begin
  if fn is null then
    raise exception 'the configured recall function % no longer exists: zm-roi configure --recall-function public.recall',
      configured using errcode = '42883';
  end if;
  select s.nspname, p.proname, p.prosecdef, p.pronargs into target
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
    target.nspname, target.proname, case when target.pronargs = 6 then ', $6' else '' end)
  using question, pin_project, pin_team, match_count, personal_only, question_embedding;
end
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot what
-- surfaced, and record strict verdicts at once (deterministic) or queue judgments (LLM). Unchanged
-- from roi_benchmark except the recall call and that the run records which recall produced it.
create or replace function roi.start_run(mode text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  new_run uuid;
  run_started timestamptz;
  probe_total integer;
  question_model text;
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
  insert into roi.pending_runs (run_id, owner_id, started_at) values (new_run, (select auth.uid()), run_started);

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
    perform roi.close_run_if_done(new_run);
    perform roi.rotate_pool(new_run);
    perform roi.top_up_pool();
  else
    insert into roi.judgments (run_id, probe_id, owner_id)
    select rc.run_id, rc.probe_id, rc.owner_id from roi.recalls rc where rc.run_id = new_run;
    perform pg_notify('roi_work', 'judgment');
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total);
end
$$;

-- The question the model wrote, with its embedding (the worker embeds what it writes, so the
-- question joins the pool ready for both legs). Same rules as the two-argument form.
create function roi.record_question(target_probe uuid, new_question text, new_embedding extensions.vector,
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

-- A memory whose text changes loses its embedding (it described the old text); the backfill
-- embeds it again. A write that sets the embedding itself keeps it. (Compared as text: with an empty
-- search_path pgvector's `=` is not visible.)
create function roi.forget_stale_embedding() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  if (new.title, new.body) is distinct from (old.title, old.body)
     and new.embedding::text is not distinct from old.embedding::text then
    new.embedding := null;
    new.embedding_model := null;
  end if;
  return new;
end
$$;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger memories_forget_stale_embedding before update of title, body on public.memories
  for each row execute function roi.forget_stale_embedding();

-- ============================================================================================
-- Policies
-- ============================================================================================
create policy "The embedder reads and embeds live memories" on public.memories
  for select to roi_embedder using (invalidated_at is null);
create policy "The embedder writes embeddings of live memories" on public.memories
  for update to roi_embedder using (invalidated_at is null) with check (invalidated_at is null);
create policy "The embedder reads active questions to embed them" on roi.probes
  for select to roi_embedder using (state = 'active');
create policy "The embedder writes embeddings of active questions" on roi.probes
  for update to roi_embedder using (state = 'active') with check (state = 'active');
create policy "The embedder marks the layers of the memories it embeds" on roi.dirty_layers
  for insert to roi_embedder with check (true);
create policy "The embedder meters its embedding calls" on public.usage_events
  for insert to roi_embedder with check (purpose = 'embedding');

-- ============================================================================================
-- Grants
-- ============================================================================================
grant usage on schema extensions to authenticated, roi_embedder;
grant usage on schema public, roi to roi_embedder;

revoke execute on function public.recall_lexical(text, uuid, uuid, integer, boolean),
  public.recall(text, uuid, uuid, integer, boolean, extensions.vector) from public, anon;
grant execute on function public.recall_lexical(text, uuid, uuid, integer, boolean),
  public.recall(text, uuid, uuid, integer, boolean, extensions.vector) to authenticated;

revoke execute on function roi.resolve_recall_function(text), roi.configure_recall(text),
  roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector),
  roi.record_question(uuid, text, extensions.vector, text), roi.forget_stale_embedding() from public;
-- (A trigger function needs no grant to fire.)
grant execute on function roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector)
  to authenticated;
grant execute on function roi.record_question(uuid, text, extensions.vector, text) to roi_worker;
grant update (question_embedding, question_embedding_model) on roi.probes to roi_worker;

-- The embedder: the text it embeds and the columns it writes, nothing else.
grant select (id, author_id, title, body, embedding_model, invalidated_at) on public.memories to roi_embedder;
grant update (embedding, embedding_model) on public.memories to roi_embedder;
grant select (id, owner_id, question, question_embedding_model, state) on roi.probes to roi_embedder;
grant update (question_embedding, question_embedding_model) on roi.probes to roi_embedder;
grant insert on public.usage_events to roi_embedder;
-- Its updates of memories mark their layers dirty like any other write (a statement trigger); an
-- embedding changes no visibility, but the trigger cannot tell, so the embedder may add marks too.
grant insert on roi.dirty_layers to roi_embedder;
grant execute on function roi.mark_memory_layers() to roi_embedder;
