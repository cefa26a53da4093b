-- The user's runs, newest first: the exclusive rate with its 95% Wilson interval, and the rate
-- corrected for the judge's measured error with its interval (null, with the reason in
-- correction_note, until an operator records a calibration of the run's judge).
-- Run it in Studio's SQL editor as the role `authenticated`, impersonating the user.
select run_id,
       started_at,
       status,
       mode,
       judged_count,
       skipped_count,
       exclusive_count,
       exclusive_rate,
       exclusive_rate_low,
       exclusive_rate_high,
       judge_calibrated,
       exclusive_rate_corrected,
       exclusive_rate_corrected_low,
       exclusive_rate_corrected_high,
       correction_note
from public.roi_benchmark_runs
order by started_at desc;
