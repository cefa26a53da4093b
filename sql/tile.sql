-- The "Only memory knows" tile, as the dashboard shows it: one row, the signed-in user's.
-- Run it in Studio's SQL editor as the role `authenticated`, impersonating the user.
-- The view words every state itself (invite, judging, no_score, ready); print what it says.
select state,
       exclusive_rate,
       exclusive_count,
       judged_count,
       hint,
       caveat,
       judge_note,
       rerun_hint,
       trend,
       latest_run_at
from public.roi_benchmark_tile;
