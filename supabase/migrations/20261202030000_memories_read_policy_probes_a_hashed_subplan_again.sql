-- The memories' read policy goes back to `x in (select …)`; the postings' keeps its arrays.
-- With the arrays, generic plans put a caller's layer at about one row: never_probed_knowledge then
-- read whole layers from the heap and sorted them, where the hashed subplan's estimate kept its
-- ordered index scans, which stop after a few rows. benchmark_memory() measured +11% (100k) and +20%
-- (1M) against the commit before the arrays. Interleaved on one synthetic 100k cluster (20 owners ×
-- 6 rounds, p50): hashed 33.4 ms, arrays on both 35.5 ms, arrays on the postings alone 32.6 ms.
-- Recall reads thousands of postings a call, and there the arrays pay: on the real-text layers, hybrid
-- p50 at 100k 21.2 ms hashed, 18.7 with both arrays, 18.4 with the postings' alone (lexical within
-- 0.2 ms).
-- The rule is unchanged: a personal row is its author's, a project or team row its members'.

alter policy "Memories are visible to their audience" on public.memories
  using (
    (scope = 'personal' and author_id = (select auth.uid()))
    or (scope = 'project' and project_id in (select public.caller_project_ids()))
    or (scope = 'team' and team_id in (select public.caller_team_ids()))
  );
