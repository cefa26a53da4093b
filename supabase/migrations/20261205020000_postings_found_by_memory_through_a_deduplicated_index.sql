-- The postings' primary key (memory_id, lexeme) cost ~57 bytes a posting, ~2.6 KB a memory: a quarter of
-- recall's inverted index. Only two paths read it, and both look a memory's postings up by memory_id
-- alone: the `on delete cascade` of a deleted memory and roi.repost_memory()'s delete. A plain b-tree
-- on memory_id serves both, and b-tree deduplication stores a memory's ~45 entries as one key and a
-- list of heap pointers (~8 bytes a posting; docs/decisions/0027-compact-postings.md). The
-- uniqueness the key enforced is the search vector's own (one posting per lexeme of a memory; the
-- triggers write nothing else). The foreign key, its cascade and every policy are unchanged.
create index memory_postings_memory_idx on public.memory_postings (memory_id);
alter table public.memory_postings drop constraint memory_postings_pkey;
