-- 20261201080000 gave benchmark_memory() its own roi.rotate_and_top_up(), which repeated the bodies of
-- roi.rotate_pool() and roi.top_up_pool() (a reader had to keep three copies of the rotation and the
-- insert in step). The two steps now have one home each, roi.retire_longest_serving() and
-- roi.refill_pool(), and the three functions call them. Same probes retire, same memories come in
-- (supabase/tests/database/11-run-bookkeeping.sql runs twin owners through both paths).

-- ============================================================================================
-- Functions
-- ============================================================================================
-- Retire up to `how_many` of the caller's longest-serving active probes after a completed run, and
-- record the rotation once per run. The shared step of roi.rotate_pool() and roi.rotate_and_top_up().
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
-- mode left pending); LLM mode leaves the probe pending for the worker and wakes it. The shared step
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
  if added > 0 and config.extractor = 'llm' then
    perform pg_notify('roi_work', 'probe_generation');
  end if;
  return added;
end
$$;

-- Fill the caller's pool up to the target from never-probed live knowledge, newest first, selected
-- as the caller (upkeep and benchmark_memory() call it before a run).
create or replace function roi.top_up_pool() returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  return roi.refill_pool(null);
end
$$;

-- After a completed run: retire a few of the longest-serving probes, but only when never-probed
-- knowledge exists to replace them (so the benchmark follows what the owner has learned).
create or replace function roi.rotate_pool(completed_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  fresh integer;
  retired integer := 0;
begin
  if not exists (select from roi.rotations r where r.run_id = completed_run) then
    select count(*) into fresh
    from roi.never_probed_knowledge((select s.rotation_per_run from roi.settings s));
    retired := roi.retire_longest_serving(completed_run, fresh);
  end if;
  delete from roi.pending_runs pr where pr.run_id = completed_run;
  return retired;
end
$$;

-- After a deterministic run, in the same call: rotation and the top-up that refills the rotated
-- places, with one read of never-probed knowledge instead of two (each read is a statement per layer
-- the owner reads, under RLS). The newest n never-probed memories are the first n of the newest m for
-- any m >= n, and retiring a probe does not make its memory never-probed again, so the rows rotation
-- read to decide how many to retire are the rows the top-up adds. Returns probes retired.
create or replace function roi.rotate_and_top_up(completed_run uuid) returns integer
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

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.retire_longest_serving(uuid, integer), roi.refill_pool(public.memories[]) from public;
grant execute on function roi.retire_longest_serving(uuid, integer), roi.refill_pool(public.memories[])
  to authenticated;
