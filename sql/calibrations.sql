-- Operator check, as the user sees it: each judge (by fingerprint) that judged the user's runs,
-- how many runs it judged, and its measured error from its newest calibration (`zm-roi judge-check
-- --record`). A judge with no calibration leaves its runs without a corrected rate; correction_note
-- says why. A user reads the calibrations of the judges of their own runs, no other.
-- Run it in Studio's SQL editor as the role `authenticated`, impersonating the user.
select judge_fingerprint,
       count(*) as runs,
       judge_calibrated,
       judge_calibration_cases,
       judge_sensitivity,
       judge_specificity,
       max(started_at) as latest_run_at
from public.roi_benchmark_runs
where judge_fingerprint is not null
group by judge_fingerprint, judge_calibrated, judge_calibration_cases, judge_sensitivity, judge_specificity
order by latest_run_at desc;
