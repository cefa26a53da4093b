-- The hybrid recall is planned per call (issue 22). Its generic plan estimates `project_id = any
-- (projects)` at a share of the whole table; where one project holds most memories (a team whose
-- agents write into one project), that estimate made the semantic leg's project arm a sequential
-- scan of every memory, for every pin: on real text, a 1,000-row project next to a 100,000-row one
-- cost 62 ms of server CPU per hybrid recall, against 3.4 ms planned per call (the covering indexes'
-- index-only scans; bench/README.md, "Pinned recall against the layer's size"). At 100,000 rows the
-- two cost the same. public.recall_lexical keeps its generic plan: its arms stay on their indexes
-- and planning per call would add about a millisecond.

-- ============================================================================================
-- Functions
-- ============================================================================================
alter function public.recall(text, uuid, uuid, integer, boolean, extensions.vector)
  set plan_cache_mode = force_custom_plan;
