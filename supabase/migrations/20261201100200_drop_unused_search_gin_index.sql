-- memories_search_idx (GIN on `search`, 120 MB at 1M memories, updated on every write) served no
-- recall (issue 19). A signed-in caller's `@@` is not leakproof (ts_match_vq), so under row-level
-- security Postgres evaluates it after the policy and never as an index condition: pinned and
-- unpinned recalls of users read the covering b-tree indexes of 20_recall.sql. The one path that
-- could use it, an unpinned recall by a caller with no identity who bypasses RLS (service_role), is
-- no product path, and measured on 111,000 real-text memories it was no faster with the index
-- (40 questions, p50 155 ms with it, 160 ms without: an OR of a question's words matches most rows,
-- so the planner reads the table either way). bench/README.md, "The GIN index on search".

-- ============================================================================================
-- Indexes
-- ============================================================================================
drop index public.memories_search_idx;
