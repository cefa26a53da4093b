-- Switching deterministic → LLM mode hands the template questions to the question writer. They
-- quote the source's title, so a recall finds them by the title's words; an LLM-judged run carries
-- no caveat, and scored them as if a model had written them. Now the switch returns every active
-- template probe to pending (its question and embedding cleared), the worker writes a real question,
-- and the owner's next call answers `generating` until it has, like a first call in LLM mode.

-- ============================================================================================
-- Functions
-- ============================================================================================

-- Fires when roi.settings switches deterministic → LLM (and once below, for a database already in
-- LLM mode): every owner's active probe whose question is its template question becomes pending
-- again. It runs as whoever writes the setting (`zm-roi configure`, the database owner), reads no
-- memory; roi.queue_probe_work queues the writing and wakes the worker.
create function roi.hand_template_questions_to_writer() returns trigger
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  update roi.probes p
  set state = 'pending', question = null, activated_at = null, question_embedding = null,
      question_embedding_model = null, last_error = null
  where p.state = 'active'
    and p.question = roi.template_question(p.source_kind, p.source_title, p.source_body);
  return null;
end
$$;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger llm_mode_rewrites_template_questions after update of extractor on roi.settings
  for each row when (old.extractor = 'deterministic' and new.extractor = 'llm')
  execute function roi.hand_template_questions_to_writer();

-- A database already switched keeps its template questions until the next switch: hand them over now.
do $handover$
begin
  if (select s.extractor from roi.settings s) = 'llm' then
    update roi.settings set extractor = 'deterministic';
    update roi.settings set extractor = 'llm';
  end if;
end
$handover$;

-- ============================================================================================
-- Grants (a trigger function needs none to fire)
-- ============================================================================================
revoke execute on function roi.hand_template_questions_to_writer() from public;
