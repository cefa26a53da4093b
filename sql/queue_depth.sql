-- Operator check, as the user sees it: the verdicts the user's open runs still wait for. The queue
-- itself (roi.work) is readable only by the worker role and the database owner; a signed-in user
-- sees its depth through their runs. A run that stays here past the run timeout is what
-- stale_runs.sql lists.
-- Run it in Studio's SQL editor as the role `authenticated`, impersonating the user.
select r.run_id,
       r.started_at,
       r.probe_count,
       r.judged_count + r.skipped_count as settled,
       r.probe_count - r.judged_count - r.skipped_count as waiting_for_verdicts
from public.roi_benchmark_runs r
where r.status = 'judging'
order by r.started_at;
