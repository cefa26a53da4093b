-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- What keeps recall's inverted index (public.memory_postings, 20_recall.sql) current: every write of a
-- memory's words, layer or liveness rewrites its postings, in the writer's own statement and as the
-- writer (no SECURITY DEFINER: the postings' write policy admits authors in their own layers), so a
-- memory is searchable the moment it is written. A deleted memory's postings go with it (foreign key).

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The postings of memories just written: one per lexeme of each live one's search vector, its impact
-- the lexeme's ts_rank (recall's weights, roi.lexical_weights(), normalisation 1; the lexeme quoted as tsquery syntax wants,
-- so no text is parsed as an operator). One statement per insert statement: an import's COPY of
-- thousands of rows indexes them in one pass. Runs as the writer, under the postings' write policy.
create function roi.post_new_memories() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  insert into public.memory_postings (memory_id, lexeme, impact, scope, layer_id, author_id)
  select n.id, l.lexeme,
         ts_rank(roi.lexical_weights(), n.search,
                 ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
         n.scope, coalesce(n.project_id, n.team_id, n.author_id), n.author_id
  from new_memories n
  cross join lateral unnest(n.search) l
  where n.invalidated_at is null;
  return null;
end
$$;

-- A memory whose words, layer or liveness changed gets its postings again (an invalidated one none).
-- A delete needs nothing here: the postings' foreign key cascades.
create function roi.repost_memory() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  delete from public.memory_postings p where p.memory_id = old.id;
  if new.invalidated_at is null then
    insert into public.memory_postings (memory_id, lexeme, impact, scope, layer_id, author_id)
    select new.id, l.lexeme,
           ts_rank(roi.lexical_weights(), new.search,
                   ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
           new.scope, coalesce(new.project_id, new.team_id, new.author_id), new.author_id
    from unnest(new.search) l;
  end if;
  return null;
end
$$;

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger memories_post_new after insert on public.memories
  referencing new table as new_memories for each statement execute function roi.post_new_memories();
create trigger memories_repost after update of title, body, scope, project_id, team_id, author_id, invalidated_at
  on public.memories for each row
  when ((old.search, old.scope, old.project_id, old.team_id, old.author_id, old.invalidated_at is null)
        is distinct from (new.search, new.scope, new.project_id, new.team_id, new.author_id, new.invalidated_at is null))
  execute function roi.repost_memory();

-- ============================================================================================
-- Grants
-- ============================================================================================
-- (A trigger function needs no grant to fire.)
revoke execute on function roi.post_new_memories(), roi.repost_memory() from public;
