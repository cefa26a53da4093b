-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Recall, part 2 of 3: its inverted index (public.memory_postings), who may read and write it, and
-- what keeps it current. Cut from 20_recall.sql because it is a table with its own writers: every
-- writer of a memory writes its postings.
--
-- What keeps recall's inverted index (public.memory_postings) current: every write of a
-- memory's words, layer or liveness rewrites its postings, in the writer's own statement and as the
-- writer (no SECURITY DEFINER: the postings' write policy admits authors in their own layers), so a
-- memory is searchable the moment it is written. A deleted memory's postings go with it (foreign key).

-- ============================================================================================
-- Tables
-- ============================================================================================
-- Recall's inverted index: one row per live memory and lexeme of its search vector. `impact` is that
-- lexeme's own ts_rank on the memory's vector (recall's weights, normalisation 1): for an OR query of
-- q distinct lexemes ts_rank is the sum of the matched lexemes' impacts divided by q, so the summed
-- impacts rank memories as ts_rank does. The policy columns are the memory's layer: `layer_id` (the
-- author for personal memories, else the project or team) and `layer_kind`, the memory's scope in one
-- byte ('u' a user's personal layer, 'p' a project, 't' a team; without it a project's id could pass
-- for a user's). Row-level security reads a posting exactly as it reads its memory, and `=` on them and on the lexeme (leakproof) lets an index serve a caller under RLS, which
-- the GIN index on `search` never could. Written only by the triggers on public.memories, as the
-- writer of the memory (below). Slim because there are ~45 rows a memory
-- (docs/decisions/0033-slim-postings.md): no author column (the write policies ask the memory who wrote
-- it), the fixed-width columns first so that no byte is alignment padding, and no primary key: one
-- posting per lexeme of a memory is the search vector's own rule, and the key's index cost ~57 bytes a
-- posting where the index on memory_id below costs ~10 (docs/decisions/0027-compact-postings.md).
create table public.memory_postings (
  memory_id uuid not null references public.memories (id) on delete cascade,
  layer_id uuid not null,
  impact real not null,
  layer_kind "char" not null check (layer_kind in ('u', 'p', 't')),
  lexeme text not null
);

-- ============================================================================================
-- Indexes
-- ============================================================================================
-- A layer's postings of one lexeme, highest impact first: recall reads the first few of each of the
-- question's lexemes (an index-only scan; the policy runs on layer_kind and layer_id in the entry).
create index memory_postings_impact_idx on public.memory_postings (layer_id, lexeme, impact desc)
  include (layer_kind, memory_id);
-- A memory's postings, for the foreign key's cascade and roi.repost_memory()'s delete. Keyed on the
-- memory alone, so b-tree deduplication keeps one key and a list of heap pointers for its ~45 postings.
create index memory_postings_memory_idx on public.memory_postings (memory_id);

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table public.memory_postings enable row level security;

-- Matched against arrays gathered once per statement (InitPlans): a recall reads thousands of postings,
-- and each is then matched against a short array instead of probing a hashed subplan (the memories'
-- policy keeps its subplan: 10_memory_core.sql).
create policy "Postings are visible to their memory's audience" on public.memory_postings
  for select to authenticated using (
    (layer_kind = 'u' and layer_id = (select auth.uid()))
    or (layer_kind = 'p' and layer_id = any (array(select public.caller_project_ids())))
    or (layer_kind = 't' and layer_id = any (array(select public.caller_team_ids())))
  );

-- A posting names a memory its writer wrote, in that memory's own layer, which the writer still
-- belongs to. The memory says who wrote it (one probe of its primary key a posting), so the postings
-- carry no author of their own.
create policy "Authors post their memories where they belong" on public.memory_postings
  for insert to authenticated with check (
    (
      (layer_kind = 'u' and layer_id = (select auth.uid()))
      or (layer_kind = 'p' and layer_id in (select public.caller_project_ids()))
      or (layer_kind = 't' and layer_id in (select public.caller_team_ids()))
    )
    and exists (
      select from public.memories m
      where m.id = memory_id and m.author_id = (select auth.uid())
        and m.scope = case layer_kind when 'u' then 'personal' when 'p' then 'project' else 'team' end
        and coalesce(m.project_id, m.team_id, m.author_id) = layer_id
    )
  );

create policy "Authors withdraw their memories' postings" on public.memory_postings
  for delete to authenticated using (
    exists (select from public.memories m where m.id = memory_id and m.author_id = (select auth.uid()))
  );

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
  insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
  select n.id, coalesce(n.project_id, n.team_id, n.author_id),
         ts_rank(roi.lexical_weights(), n.search,
                 ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
         (case n.scope when 'personal' then 'u' when 'project' then 'p' else 't' end)::"char", l.lexeme
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
    insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
    select new.id, coalesce(new.project_id, new.team_id, new.author_id),
           ts_rank(roi.lexical_weights(), new.search,
                   ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
           (case new.scope when 'personal' then 'u' when 'project' then 'p' else 't' end)::"char", l.lexeme
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
revoke all on public.memory_postings from anon, authenticated;
grant select, insert, delete on public.memory_postings to authenticated;

-- (A trigger function needs no grant to fire.)
revoke execute on function roi.post_new_memories(), roi.repost_memory() from public;
