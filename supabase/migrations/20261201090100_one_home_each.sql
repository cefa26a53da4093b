-- One home each (issue 19): the run lock key is one function, roi.run_lock_key(), used by every
-- closer of a run; whether the configured recall takes the query embedding is recorded once, in
-- roi.settings.recall_takes_embedding, whenever recall_function is written, instead of being answered
-- by a pattern on the name in start_run() and by the argument count in configured_recall().

-- ============================================================================================
-- Tables
-- ============================================================================================
alter table roi.settings add column recall_takes_embedding boolean not null default true;

-- ============================================================================================
-- Functions
-- ============================================================================================

-- The advisory lock key that serialises closing one run (its last verdicts, its timeout, a switch of
-- mode), so that two closers cannot both miss the moment or both close it.
create or replace function roi.run_lock_key(run uuid) returns bigint
  language sql immutable security invoker set search_path = ''
as $$
  select hashtextextended('roi.run:' || run::text, 0)
$$;

-- Record whether the recall being configured takes the query embedding, once, where recall_function
-- is written (`zm-roi configure`, or an operator's update): every run reads the answer.
create or replace function roi.note_recall_takes_embedding() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  new.recall_takes_embedding := coalesce(
    (select p.pronargs = 6 and p.proargtypes[5] = 'extensions.vector'::regtype
     from pg_catalog.pg_proc p where p.oid = to_regprocedure(new.recall_function)), false);
  return new;
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
create or replace function roi.close_overdue_run(target_run uuid) returns boolean
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
create or replace function roi.close_run_left_without_judge(target_run uuid) returns boolean
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

-- One recall through the configured function, as the caller, in its rank order. The function is
-- re-checked on every call (it may have been replaced by a SECURITY DEFINER one since configure) and
-- called dynamically; its rows go through jsonb so that kind and scope may be absent.
create or replace function roi.configured_recall(question text, pin_project uuid, pin_team uuid, match_count integer,
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

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger settings_note_recall_takes_embedding before insert or update of recall_function on roi.settings
  for each row execute function roi.note_recall_takes_embedding();

-- A deployment that configured a recall without the embedding argument records it now.
update roi.settings set recall_function = recall_function;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.run_lock_key(uuid), roi.note_recall_takes_embedding() from public;
grant execute on function roi.run_lock_key(uuid) to authenticated, roi_worker;
