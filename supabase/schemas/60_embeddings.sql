-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Embeddings: who writes them and what keeps them current. The columns live with their tables
-- (public.memories.embedding in 10_memory_core.sql, roi.probes.question_embedding in
-- 30_roi_settings_and_tables.sql), pgvector in schema `extensions`, the recall that reads them in 20_recall.sql.
--
-- Embeddings (384 dimensions) are written from outside the database by the one embedding door of the
-- Python package: memories at import and by `zm-roi embed` (the backfill for memories written by
-- other paths); probe questions only by the worker, the one role besides the gated owner that reads
-- them: with the questions it writes (roi.record_question), and as embed_question work for templated
-- questions and for questions an older model embedded (roi.record_question_embedding,
-- 51_roi_worker_verbs.sql). Each row records its model. Rows with no embedding are still found by the
-- lexical leg. The role `roi_embedder` exists for the memory backfill: it reads only the memory text
-- it embeds and writes only the embedding columns; of probes it sees ids, states and embedding models,
-- enough to queue embed_question work (roi.queue_question_embeddings) and never a question. Like
-- roi_worker it is created NOLOGIN; locally `zm-roi db up` gives it a password, on Supabase the
-- operator does.

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
create policy "The embedder sees which active probes lack an embedding" on roi.probes
  for select to roi_embedder using (state = 'active');
create policy "The embedder queues the embedding of active questions" on roi.work
  for insert to roi_embedder with check (kind = 'embed_question');
create policy "The embedder reads the kinds of work it queues" on roi.work_kinds
  for select to roi_embedder using (true);
create policy "The embedder marks the layers of the memories it embeds" on roi.dirty_layers
  for insert to roi_embedder with check (true);
create policy "The embedder meters its embedding calls" on public.usage_events
  for insert to roi_embedder with check (purpose = 'embedding');

-- ============================================================================================
-- Grants
-- ============================================================================================
grant usage on schema extensions, public, roi to roi_embedder;

-- (A trigger function needs no grant to fire.)
revoke execute on function roi.forget_stale_embedding() from public;

-- The embedder: the text it embeds and the columns it writes, nothing else.
grant select (id, author_id, title, body, embedding_model, embedding_minilm_model, invalidated_at)
  on public.memories to roi_embedder;
grant update (embedding, embedding_model, embedding_minilm, embedding_minilm_model) on public.memories to roi_embedder;
-- Of probes, no text: the columns that say which question needs the worker's embedding.
grant select (id, owner_id, state, question_embedding_model, question_embedding_minilm_model) on roi.probes
  to roi_embedder;
grant insert on roi.work to roi_embedder;
grant select on roi.work_kinds to roi_embedder;
grant execute on function roi.queue_question_embeddings(text, text), roi.enqueue(text, uuid, uuid[], uuid)
  to roi_embedder;
grant insert on public.usage_events to roi_embedder;
-- Its updates of memories mark their layers dirty like any other write (a statement trigger); an
-- embedding changes no visibility, but the trigger cannot tell, so the embedder may add marks too.
grant insert on roi.dirty_layers to roi_embedder;
grant execute on function roi.mark_memory_layers() to roi_embedder;
