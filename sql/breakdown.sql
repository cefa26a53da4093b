-- The user's latest judged run, broken down by the source memory's kind and scope: where the
-- knowledge that only memory holds lives.
-- Run it in Studio's SQL editor as the role `authenticated`, impersonating the user.
select b.dimension,
       b.value,
       b.judged_count,
       b.exclusive_count,
       b.exclusive_rate
from public.roi_benchmark_breakdown b
where b.run_id = (select r.run_id from public.roi_benchmark_runs r
                  where r.judged_count > 0 order by r.started_at desc limit 1)
order by b.dimension, b.value;
