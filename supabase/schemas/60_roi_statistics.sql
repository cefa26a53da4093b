-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The statistics the runs view and the tile report, each in one place: the Wilson bound of a rate, the
-- exact sign test of a paired comparison, and the exclusive rate corrected for the judge's measured
-- error. Pure functions of counts, no table read: pgTAP (50-benchmark-runs, 60-run-diagnostics,
-- 63-judge-corrected-rate) and tests/db/test_judge_correction.py hold them to values computed by hand,
-- and the corrected rate's interval to its coverage in seeded simulation, at the clamps too. Cut from
-- 61_roi_views.sql, which reads them, because they are pure arithmetic.

-- ============================================================================================
-- Functions
-- ============================================================================================
-- Wilson score interval (95%) for k successes in n trials: honest error bars for 20 probes.
create function roi.wilson_bound(k bigint, n bigint, upper_bound boolean) returns numeric
  language sql immutable security invoker set search_path = ''
as $$
  select round(greatest(0, least(1,
           (p + z * z / (2 * t)
             + (case when upper_bound then 1 else -1 end) * z * sqrt(p * (1 - p) / t + z * z / (4 * t * t)))
           / (1 + z * z / t))), 4)
  from (select k::numeric / n as p, 1.96::numeric as z, n::numeric as t where n > 0) w
$$;

-- Two-sided exact sign test on the discordant pairs of a paired comparison (this run against the
-- owner's previous one): the chance, with no real change, of a split at least this lopsided. Null
-- when there is no discordant pair.
create function roi.sign_test_p(improved bigint, regressed bigint) returns numeric
  language plpgsql immutable security invoker set search_path = ''
as $$
declare
  n integer := improved + regressed;
  k integer := least(improved, regressed);
  term numeric := 1;
  tail numeric := 1;
begin
  if n is null or n = 0 then
    return null;
  end if;
  for i in 1..k loop
    term := term * (n - i + 1) / i;  -- C(n, i), exact: C(n, i-1) * (n-i+1) is divisible by i
    tail := tail + term;
  end loop;
  return round(least(1, 2 * tail / power(2::numeric, n)), 4);
end
$$;

-- The judge's measured error taken out of a run's exclusive rate (docs/judge-calibration.md): k of
-- n judged questions exclusive, and the judge's exclusive-label counts on its calibration set
-- (sensitivity q1 = tp/(tp+fn), specificity q0 = tn/(tn+fp)). The estimate is Rogan–Gladen,
-- (k/n + q0 − 1)/(q0 + q1 − 1) clipped to [0, 1]. The 95% interval is the delta-method one, carrying
-- the run's sampling error and the calibration's, computed on each proportion with two successes and
-- two failures added (Agresti–Coull): the plain one covers ~93% at n = 20, this one ≥ 95%
-- (tests/unit/test_judge_correction.py). It is never narrower than the run's sampling error alone: it
-- holds the raw rate's Wilson interval mapped through the correction and slid inside [0, 1] at its
-- full width, so an estimate clipped to 0 or 1 still shows how little n questions pin it. Null
-- figures and the reason in `note` when there is nothing to correct, or when the judge is too close
-- to chance (q0 + q1 − 1 < 0.3) for a correction to mean anything. The one home of these figures:
-- the runs view and everything after it read them here.
create function roi.judge_corrected_rate(
  k integer, n integer, tp integer, fn integer, tn integer, fp integer,
  out estimate numeric, out low numeric, out high numeric, out note text)
  language plpgsql immutable security invoker set search_path = ''
as $$
declare
  z constant numeric := 1.96;
  q1 numeric;
  q0 numeric;
  youden numeric;
  p_adj numeric;
  q1_adj numeric;
  q0_adj numeric;
  youden_adj numeric;
  centre numeric;
  share numeric;
  half numeric;
  sampling_low numeric;
  sampling_high numeric;
begin
  if tp is null or fn is null or tn is null or fp is null then
    note := 'judge not calibrated: an operator runs zm-roi judge-check --record';
    return;
  end if;
  if n is null or n <= 0 or k is null then
    note := 'no judged question to correct';
    return;
  end if;
  if tp + fn = 0 or tn + fp = 0 then
    note := 'no corrected rate: the judge''s calibration has no case whose exclusive label is '
            || case when tp + fn = 0 then 'true' else 'false' end || ', so it cannot measure the judge';
    return;
  end if;
  q1 := tp::numeric / (tp + fn);
  q0 := tn::numeric / (tn + fp);
  youden := q0 + q1 - 1;
  if youden < 0.3 then
    note := format('no corrected rate: the judge is too close to chance (sensitivity %s%% + specificity %s%% '
                   '- 100%% = %s points, below the 30 a correction needs)',
                   round(100 * q1), round(100 * q0), round(100 * youden));
    return;
  end if;
  p_adj := (k + 2)::numeric / (n + 4);
  q1_adj := (tp + 2)::numeric / (tp + fn + 4);
  q0_adj := (tn + 2)::numeric / (tn + fp + 4);
  youden_adj := q0_adj + q1_adj - 1;
  if youden_adj <= 0 then
    note := 'no corrected rate: the judge''s calibration is too small to bound the correction';
    return;
  end if;
  estimate := greatest(0, least(1, (k::numeric / n + q0 - 1) / youden));
  centre := (p_adj + q0_adj - 1) / youden_adj;
  share := greatest(0, least(1, centre));
  half := z * sqrt(p_adj * (1 - p_adj) / (n + 4)
                   + (1 - share) ^ 2 * q0_adj * (1 - q0_adj) / (tn + fp + 4)
                   + share ^ 2 * q1_adj * (1 - q1_adj) / (tp + fn + 4)) / youden_adj;
  -- The run's sampling error alone, on the corrected scale; slid back inside [0, 1] where the
  -- correction pushes it out, keeping its width (at most 1), rather than cut to a point at the clamp.
  sampling_low := (roi.wilson_bound(k, n, false) + q0 - 1) / youden;
  sampling_high := (roi.wilson_bound(k, n, true) + q0 - 1) / youden;
  if sampling_high > 1 then
    sampling_low := sampling_low - (sampling_high - 1);
    sampling_high := 1;
  end if;
  if sampling_low < 0 then
    sampling_high := least(1, sampling_high - sampling_low);
    sampling_low := 0;
  end if;
  -- The interval always holds the estimate it is printed beside, and the sampling interval.
  low := round(least(estimate, greatest(0, centre - half), sampling_low), 4);
  high := round(greatest(estimate, least(1, centre + half), sampling_high), 4);
  estimate := round(estimate, 4);
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.wilson_bound(bigint, bigint, boolean), roi.sign_test_p(bigint, bigint),
  roi.judge_corrected_rate(integer, integer, integer, integer, integer, integer) from public;
grant execute on function roi.wilson_bound(bigint, bigint, boolean), roi.sign_test_p(bigint, bigint),
  roi.judge_corrected_rate(integer, integer, integer, integer, integer, integer) to authenticated;
