-- Operator check, as the user sees it: the user's runs still judging, and whether each is past the
-- lease or the run timeout (roi.settings). A worker that died holding a lease leaves its rows
-- claimable again once the lease expires; a run past the run timeout is closed by upkeep (pg_cron),
-- its unjudged questions recorded as skipped. A run overdue here means no worker is draining the
-- queue, or pg_cron is not running upkeep. The leases themselves (roi.work) are readable only by
-- the worker role and the database owner.
-- Run it in Studio's SQL editor as the role `authenticated`, impersonating the user.
select r.run_id,
       r.started_at,
       now() - r.started_at as judging_for,
       now() - r.started_at > s.lease_duration as past_a_lease,
       now() - r.started_at > s.run_timeout as past_the_run_timeout
from public.roi_benchmark_runs r
cross join roi.settings s
where r.status = 'judging'
order by r.started_at;
