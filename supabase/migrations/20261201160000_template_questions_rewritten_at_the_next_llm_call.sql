-- Switching deterministic → LLM mode hands the template questions to the question writer. They quote
-- the source's title, so a recall finds them by the title's words; an LLM-judged run carries no caveat,
-- and scored them as if a model had written them. Now, in LLM mode, the owner's next benchmark_memory()
-- call returns each active template probe to pending (its question and embedding cleared), the worker
-- writes a real question, and that call answers `generating` until it has, like a first call in LLM
-- mode. At the next call, not at the switch: an owner who never calls again costs no model call, and
-- the hand-over runs as the owner, like every other change to a pool.

-- ============================================================================================
-- Functions
-- ============================================================================================

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

-- Unchanged but for the hand-over in LLM mode, before the pool is topped up and counted.
create or replace function public.benchmark_memory() returns jsonb
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
-- Grants
-- ============================================================================================
revoke execute on function roi.hand_template_questions_to_writer() from public;
grant execute on function roi.hand_template_questions_to_writer() to authenticated;
