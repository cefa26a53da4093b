-- The upkeep cycle, benchmark_memory() and the recalls run short statements whose cost estimates
-- grow with the tables, not with their work. At 1M memories and 1,000 users the estimate for the
-- owners of the dirty layers crossed jit_above_cost, and every idle upkeep cycle (every minute)
-- spent ~10 ms compiling a plan that ran in microseconds (the bench's idle cycle: 10.2 ms, against
-- 0.9 ms at 10,000 users, where the estimate stayed under the threshold). JIT pays off for long
-- analytical scans; none of these is one. A function-level setting covers every statement the
-- function runs, nested calls included (tests/test_no_jit.py forces jit_above_cost = 0 and reads the
-- plans through auto_explain).

-- ============================================================================================
-- Functions
-- ============================================================================================
alter function roi.upkeep() set jit = off;
alter function public.benchmark_memory() set jit = off;
alter function public.recall(text, uuid, uuid, integer, boolean, extensions.vector) set jit = off;
alter function public.recall_lexical(text, uuid, uuid, integer, boolean) set jit = off;
