-- The judge-corrected rate's interval collapsed to a point when the estimate was clipped to 0 or 1
-- (a calibrated judge at 1.0 showed 1.000–1.000 while 20 questions alone span about a third): it
-- now always holds the run's sampling error alone, the raw rate's Wilson interval mapped through the
-- correction and slid inside [0, 1] at its full width (docs/judge-calibration.md). `create or
-- replace` keeps the grants and the views that read it.
create or replace function roi.judge_corrected_rate(
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
