"""A Python port of roi.judge_corrected_rate (supabase/schemas/60_roi_statistics.sql), the one home of the
judge-corrected exclusive rate, for what a database cannot do quickly: the seeded coverage simulation
(tests/unit/test_judge_correction.py). tests/db/test_judge_correction.py proves the port equal to the
SQL function on a grid of inputs, so a change to either that the other does not share fails there."""

from __future__ import annotations

import math
from typing import NamedTuple

Z = 1.96  # as roi.wilson_bound and roi.judge_corrected_rate


class Corrected(NamedTuple):
    estimate: float | None
    low: float | None
    high: float | None
    refused: bool


def corrected_rate(k: int, n: int, tp: int, fn: int, tn: int, fp: int) -> Corrected:
    """Rogan–Gladen on k/n with sensitivity tp/(tp+fn) and specificity tn/(tn+fp), and the delta-method
    interval on proportions with two successes and two failures added, never narrower than the run's
    sampling error alone (`sampling_interval`); refused (all None) as the SQL is."""
    refused = Corrected(None, None, None, True)
    if n <= 0 or tp + fn == 0 or tn + fp == 0:
        return refused
    m1, m0 = tp + fn, tn + fp
    q1, q0 = tp / m1, tn / m0
    youden = q0 + q1 - 1
    # q0 + q1 - 1 < 0.3 in integers, exact at the boundary as the SQL's numeric is.
    if 10 * (tn * m1 + tp * m0 - m1 * m0) < 3 * m1 * m0:
        return refused
    p_adj, q1_adj, q0_adj = (k + 2) / (n + 4), (tp + 2) / (tp + fn + 4), (tn + 2) / (tn + fp + 4)
    youden_adj = q0_adj + q1_adj - 1
    if youden_adj <= 0:
        return refused
    estimate = min(1.0, max(0.0, (k / n + q0 - 1) / youden))
    centre = (p_adj + q0_adj - 1) / youden_adj
    share = min(1.0, max(0.0, centre))
    half = (
        Z
        * math.sqrt(
            p_adj * (1 - p_adj) / (n + 4)
            + (1 - share) ** 2 * q0_adj * (1 - q0_adj) / (tn + fp + 4)
            + share**2 * q1_adj * (1 - q1_adj) / (tp + fn + 4)
        )
        / youden_adj
    )
    sampling_low, sampling_high = sampling_interval(k, n, q0, youden)
    low = min(estimate, max(0.0, centre - half), sampling_low)
    high = max(estimate, min(1.0, centre + half), sampling_high)
    return Corrected(round(estimate, 4), round(low, 4), round(high, 4), False)


def sampling_interval(k: int, n: int, q0: float, youden: float) -> tuple[float, float]:
    """The run's sampling error alone: the raw rate's Wilson interval (rounded as roi.wilson_bound rounds it)
    mapped through the correction, then slid inside [0, 1] keeping its width (at most 1), so that a clamped
    estimate keeps an interval as wide as its n questions allow."""
    raw_low, raw_high = (round(bound, 4) for bound in wilson(k, n))
    low, high = (raw_low + q0 - 1) / youden, (raw_high + q0 - 1) / youden
    if high > 1:
        low, high = low - (high - 1), 1.0
    if low < 0:
        low, high = 0.0, min(1.0, high - low)
    return low, high


def wilson(k: int, n: int) -> tuple[float, float]:
    """The raw rate's Wilson 95% interval, as roi.wilson_bound computes it."""
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
