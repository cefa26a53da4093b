-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Which recall function the benchmark calls and with what arguments: the contract a configured one
-- must meet, `zm-roi configure --recall-function` that validates and stores it, the check that it
-- still meets it (once per run, and on every roi.configured_recall() call), and one recall through
-- it. Cut here because it is the one part of a run a deployment chooses; the run that calls it is
-- 50_roi_runs.sql, the bundled recall 20_recall.sql.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- Resolve SCHEMA.NAME to the recall function the benchmark may call, or raise why not, in one line.
-- The contract: SECURITY INVOKER; arguments (text, uuid, uuid, integer, boolean), optionally followed
-- by one or two query embeddings (extensions.vector: the first model's, then MiniLM's); a set whose
-- columns include memory_id, title, body and score, in rank order. When several forms exist, the one
-- that takes the most embeddings is chosen. (A deployment that already has a search function points
-- the benchmark at it.)
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

-- The configured recall function, or raise why the benchmark may not call it: it may have been dropped,
-- or replaced by a SECURITY DEFINER one, since `zm-roi configure` validated it. Checked once per run
-- (roi.start_run) and once per roi.configured_recall() call.
create function roi.checked_recall_function() returns regprocedure
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  configured text;
  fn regprocedure;
begin
  select s.recall_function into configured from roi.settings s;
  fn := to_regprocedure(configured);
  if fn is null then
    raise exception 'the configured recall function % no longer exists: zm-roi configure --recall-function public.recall',
      configured using errcode = '42883';
  end if;
  if (select p.prosecdef from pg_catalog.pg_proc p where p.oid = fn) then
    raise exception 'the configured recall function % is SECURITY DEFINER: refusing to run it', configured
      using errcode = '42501';
  end if;
  return fn;
end
$$;

-- One recall through the configured function, as the caller, in its rank order (`zm-roi recall`, and
-- a run's recalls when the function is not the bundled one). The function is re-checked on every call
-- and called dynamically; its rows go through jsonb so that kind and scope may be absent.
create function roi.configured_recall(question text, pin_project uuid, pin_team uuid, match_count integer,
  personal_only boolean, question_embedding extensions.vector, question_embedding_minilm extensions.vector)
  returns table (memory_id uuid, kind text, scope text, title text, body text, score real, rank bigint)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  fn regprocedure := roi.checked_recall_function();
  embeddings smallint;
  target record;
begin
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
  select s.recall_embeddings into embeddings from roi.settings s;
  select n.nspname, p.proname into target
  from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
  where p.oid = fn;
  return query execute format(
    'select (f.j ->> ''memory_id'')::uuid, f.j ->> ''kind'', f.j ->> ''scope'', f.j ->> ''title'',
            f.j ->> ''body'', (f.j ->> ''score'')::real, f.n
     from (select to_jsonb(r) as j, r.ordinality as n from %I.%I($1, $2, $3, $4, $5%s) with ordinality r) f
     order by f.n',
    target.nspname, target.proname, case embeddings when 2 then ', $6, $7' when 1 then ', $6' else '' end)
  using question, pin_project, pin_team, match_count, personal_only, question_embedding, question_embedding_minilm;
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
-- roi.configure_recall and roi.resolve_recall_function are granted to no one: `zm-roi configure` runs
-- them as the database owner.
revoke execute on function roi.resolve_recall_function(text), roi.configure_recall(text), roi.checked_recall_function(),
  roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector)
  from public;
grant execute on function roi.checked_recall_function(),
  roi.configured_recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector)
  to authenticated;
