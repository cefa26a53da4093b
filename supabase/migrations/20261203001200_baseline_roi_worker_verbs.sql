-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- What the worker records: one record_… verb per kind of work (the queue they take it from:
-- 70_roi_queue.sql), each writing its result and removing the row in one transaction. Cut from the
-- queue because these are the writes of results; what the worker may read and write in each table is
-- said beside the table (30_roi_probes_runs_and_work.sql, 31_roi_results.sql), what it spends in
-- 90_keys_and_totals.sql.
--
-- roi_worker sees only what its rows carry: a pending probe's source snapshot, for a judgment the
-- question, ground truth and recall snapshot (for a check of the judge, the snapshot as the check shows
-- it: source withheld or order reversed), for a spot-check the question and ground truth, for an
-- embedding the question. It has no privilege on public.memories, so it cannot top up pools: when its
-- verdict closes a run (roi.close_run_if_done), the owner's next benchmark_memory() call rotates and
-- tops up that pool, and upkeep (pg_cron, impersonating the owner) does it for an owner who never calls.
-- That is by design: only the owner's own identity ever selects probe candidates.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- A question's shortest and longest length, read from the one place they are written: the check
-- constraint probes_question_length on roi.probes. record_question's gate and the worker's
-- (zm_roi/prompts.py, through the named query question_length_bounds) read them here, so no other
-- copy of the two numbers exists to drift from the table's.
create function roi.question_length_bounds(out min_chars integer, out max_chars integer)
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  bounds text[];
begin
  select regexp_match(pg_catalog.pg_get_constraintdef(c.oid),
                      'length\(question\) >= (\d+)\) AND \(length\(question\) <= (\d+)\)')
  into bounds
  from pg_catalog.pg_constraint c
  where c.conrelid = 'roi.probes'::regclass and c.conname = 'probes_question_length';
  if bounds is null then
    raise exception 'roi.question_length_bounds: roi.probes has no check probes_question_length '
      'of the form length(question) between N and M' using errcode = 'undefined_object';
  end if;
  min_chars := bounds[1]::integer;
  max_chars := bounds[2]::integer;
end
$$;

-- The question the worker wrote for a claimed probe: the probe joins the pool (and its
-- write_question row leaves the queue), marked with where its question came from ('model'; 'retry'
-- when the gate refused the first and the model's second passed; 'template' when both failed:
-- new_question is then ignored and the probe takes its template question) and which generator wrote
-- it. False when the probe is no longer pending (another worker got there first, or upkeep retired
-- it): the question is dropped.
create function roi.record_question(target_probe uuid, new_question text, new_origin text default 'model',
  new_generator text default null) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  written text := new_question;
  bounds record;
begin
  if new_origin = 'template' then
    select roi.template_question(p.source_kind, p.source_title, p.source_body) into written
    from roi.probes p where p.id = target_probe and p.state = 'pending';
    if not found then
      return false;
    end if;
  end if;
  select * into bounds from roi.question_length_bounds();
  if length(btrim(coalesce(written, ''))) not between bounds.min_chars and bounds.max_chars then
    raise exception 'roi.record_question: a question has % to % characters', bounds.min_chars, bounds.max_chars
      using errcode = '22023';
  end if;
  update roi.probes p
  set question = btrim(written), state = 'active', activated_at = now(), last_error = null,
      question_origin = new_origin, generator_fingerprint = new_generator
  where p.id = target_probe and p.state = 'pending';
  return found;
end
$$;

-- The question the model wrote, with its embedding (the worker embeds what it writes, so the
-- question joins the pool ready for both legs of recall). Same rules as the form above.
create function roi.record_question(target_probe uuid, new_question text, new_embedding extensions.vector,
  new_embedding_model text, new_origin text default 'model', new_generator text default null) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  -- Set while the probe is still pending: that is the row the worker may update.
  update roi.probes p
  set question_embedding = new_embedding, question_embedding_model = new_embedding_model
  where p.id = target_probe and p.state = 'pending';
  return roi.record_question(target_probe, new_question, new_origin, new_generator);
end
$$;

-- The embedding of an active probe's question (embed_question work): stored, the row gone. With no
-- embedding (embeddings are off for this worker) the row just leaves: the lexical leg serves the
-- question. False when nothing was stored (the row had left, or the probe is no longer active).
create function roi.record_question_embedding(target_probe uuid, new_embedding extensions.vector,
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

-- The judge's verdict on a queued judgment, with its reason for the gated notes and the judge's
-- fingerprint (model and prompt hash) for the run. False when the judgment is no longer queued
-- (another worker recorded it, or the run timed out): never a second verdict.
create function roi.record_verdict(target_run uuid, target_probe uuid, judged_with_memory boolean,
  judged_without_memory boolean, judged_confidence real, judged_reason text, judge_fingerprint text default null)
  returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
begin
  if judged_with_memory is null or judged_without_memory is null then
    raise exception 'roi.record_verdict: a verdict says yes or no to both questions' using errcode = '22023';
  end if;
  select w.id, w.owner_id into job from roi.work w
  where w.kind = 'judge' and w.run_id = target_run and w.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  if judge_fingerprint is not null then
    insert into roi.run_judges (run_id, owner_id, judge_fingerprint)
    values (target_run, job.owner_id, left(judge_fingerprint, 300))
    on conflict do nothing;
  end if;
  return roi.settle_judgment(job.id, judged_with_memory, judged_without_memory, judged_confidence, judged_reason);
end
$$;

-- The grading call's decision on a claimed spot-check: recorded once, the queue row gone. False when
-- the row is no longer queued (another worker recorded it first).
create function roi.record_closed_book(target_run uuid, target_probe uuid, correct boolean) returns boolean
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

-- The judge's verdict on a claimed check (judge_withheld or judge_reversed): recorded once, the queue
-- row gone. False when the row is no longer queued (another worker recorded it first).
create function roi.record_judge_check(target_run uuid, target_probe uuid, check_kind text,
  judged_with_memory boolean, judged_without_memory boolean) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
  recorded integer;
begin
  if judged_with_memory is null or judged_without_memory is null then
    raise exception 'roi.record_judge_check: a verdict says yes or no to both questions' using errcode = '22023';
  end if;
  select w.id, w.owner_id into job from roi.work w
  where w.kind = check_kind and w.kind in ('judge_withheld', 'judge_reversed')
    and w.run_id = target_run and w.probe_id = target_probe
  for update;
  if not found then
    return false;
  end if;
  insert into roi.judge_check_results (run_id, probe_id, owner_id, kind, with_memory, without_memory)
  values (target_run, target_probe, job.owner_id, check_kind, judged_with_memory, judged_without_memory)
  on conflict (run_id, probe_id, kind) do nothing;
  get diagnostics recorded = row_count;
  delete from roi.work w where w.id = job.id;
  return recorded > 0;
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.question_length_bounds(), roi.record_question(uuid, text, text, text),
  roi.record_question(uuid, text, extensions.vector, text, text, text), roi.record_question_embedding(uuid, extensions.vector, text),
  roi.record_question_embedding_minilm(uuid, extensions.vector, text), roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.record_closed_book(uuid, uuid, boolean), roi.record_judge_check(uuid, uuid, text, boolean, boolean)
  from public, anon, authenticated;
grant execute on function roi.question_length_bounds(), roi.record_question(uuid, text, text, text),
  roi.record_question(uuid, text, extensions.vector, text, text, text), roi.record_question_embedding(uuid, extensions.vector, text),
  roi.record_question_embedding_minilm(uuid, extensions.vector, text), roi.record_verdict(uuid, uuid, boolean, boolean, real, text, text),
  roi.record_closed_book(uuid, uuid, boolean), roi.record_judge_check(uuid, uuid, text, boolean, boolean)
  to roi_worker;
