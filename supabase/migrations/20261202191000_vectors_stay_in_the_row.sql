-- Issue 35, pages per recall on the user's write path: a memory's two vectors stay in its row.
-- pgvector's type defaults to STORAGE external, and a row that `zm-roi import` writes (the row first,
-- then each vector column by UPDATE) grows past the ~2 kB TOAST threshold with its second vector, so
-- its vectors went out of line: each exact distance of the hybrid recall then read the TOAST index
-- and a TOAST page, ~7 shared buffers a row for the two semantic legs (68,869 per recall at 10,000
-- rows). Both vectors are now `plain` (in the row, never compressed: float vectors do not compress),
-- and the search vector `main` (compressed in the row if need be), so when a row must shed bytes it
-- sheds its title and body, which recall reads only for the rows it returns; the lexical leg's
-- ts_rank keeps reading `search` from the row (docs/decisions/0019).
--
-- Only rows written from now on are stored this way: ALTER ... SET STORAGE rewrites nothing, and a
-- vector already out of line stays there until its row's vectors are written again (`zm-roi embed`
-- after a model change, an edit of the title or body) or the table is rewritten, e.g. by
-- `vacuum full public.memories` (an exclusive lock for the length of the rewrite).
alter table public.memories
  alter column embedding set storage plain,
  alter column embedding_minilm set storage plain,
  alter column search set storage main;
