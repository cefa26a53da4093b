-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Embeddings: what keeps them current and how the embedder asks for question embeddings. The columns
-- live with their tables (public.memories.embedding in 10_memory_core.sql, roi.probes.question_embedding
-- in 30_roi_probes_runs_and_work.sql), beside the embedder's policies and grants on them; pgvector in
-- schema `extensions`, the recall that reads them in 20_recall.sql. Cut here because a memory's
-- embedding is written from outside the database, by the one embedding door of the Python package.
--
-- Embeddings (384 dimensions) are written from outside the database by the one embedding door of the
-- Python package: memories at import and by `zm-roi embed` (the backfill for memories written by
-- other paths); probe questions only by the worker, the one role besides the gated owner that reads
-- them: with the questions it writes (roi.record_question), and as embed_question work for templated
-- questions and for questions an older model embedded (roi.record_question_embedding,
-- 71_roi_worker_verbs.sql). Each row records its model. Rows with no embedding are still found by the
-- lexical leg. The role `roi_embedder` exists for the memory backfill: it reads only the memory text
-- it embeds and writes only the embedding columns; of probes it sees ids, states and embedding models,
-- enough to queue embed_question work (roi.queue_question_embeddings) and never a question. Both roles: 00_roles_and_extensions.sql.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- A memory whose text changes loses its embeddings, each leg's (they described the old text); the
-- backfill embeds it again. A write that sets an embedding itself keeps that one. (Compared as text: with an empty
-- search_path pgvector's `=` is not visible.)
create function roi.forget_stale_embedding() returns trigger
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

-- `zm-roi embed` (as roi_embedder, which never reads a question): queue embed_question work for the
-- active questions not embedded by `model` (or, when given, by `minilm_model` in the second leg), for
-- the worker to embed. Returns how many were queued.
create function roi.queue_question_embeddings(model text, minilm_model text default null) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  queued integer;
begin
  select coalesce(sum(roi.enqueue('embed_question', o.owner_id, o.probes)), 0) into queued
  from (select p.owner_id, array_agg(p.id) as probes from roi.probes p
        where p.state = 'active'
          and (p.question_embedding_model is distinct from model
               or (minilm_model is not null and p.question_embedding_minilm_model is distinct from minilm_model))
        group by p.owner_id) o;
  return queued;
end
$$;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger memories_forget_stale_embedding before update of title, body on public.memories
  for each row execute function roi.forget_stale_embedding();

-- ============================================================================================
-- Grants
-- ============================================================================================
-- (A trigger function needs no grant to fire.)
revoke execute on function roi.forget_stale_embedding() from public;

revoke execute on function roi.queue_question_embeddings(text, text) from public, anon, authenticated;
grant execute on function roi.queue_question_embeddings(text, text) to roi_embedder;
