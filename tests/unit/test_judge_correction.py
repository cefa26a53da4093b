"""The judge-corrected exclusive rate (roi.judge_corrected_rate, through its Python port in
tests/judge_correction.py, which tests/db/test_judge_correction.py proves equal to the SQL): values
worked by hand, the refusals, and a seeded coverage simulation. A judge with sensitivity 0.85 and
specificity 0.80 judges runs of 20 questions at true exclusive rates 0.1, 0.4 and 0.8; each run has its
own calibration (100 cases whose exclusive label is true, 140 false: the shape of the 240-case set),
drawn afresh. The corrected 95% interval must cover the true rate in at least 94% of 2,000 runs at
each rate; the raw Wilson interval, which describes what the judge said, not the truth, covers less.
At the clamps (true rates 0, 0.1, 0.8 and 1, and a judge of sensitivity 0.6 at 0.9, where the estimate
often clips to 0 or 1) it must cover at least 94% of all runs and of the clipped ones, and on a grid an
interval at either clamp is never narrower than the run's own sampling error."""

from __future__ import annotations

import math
import random

import pytest

from tests.judge_correction import Z, corrected_rate, wilson

SENSITIVITY, SPECIFICITY = 0.85, 0.80
QUESTIONS, POSITIVES, NEGATIVES = 20, 100, 140
RUNS = 2000


def test_the_estimate_and_interval_match_values_worked_by_hand():
    # 8 of 20 judged exclusive; calibration tp 85, fn 15 (sensitivity 0.85), tn 80, fp 20 (specificity 0.80).
    #   Rogan–Gladen: (0.4 + 0.8 - 1) / (0.8 + 0.85 - 1) = 0.2 / 0.65 = 0.30769.
    #   Two successes and two failures added: p = 10/24 = 0.416667, q1 = 87/104 = 0.836538,
    #   q0 = 82/104 = 0.788462, q0 + q1 - 1 = 0.625; centre = (0.416667 + 0.788462 - 1) / 0.625 = 0.328205.
    #   Variance: 0.416667·0.583333/24 = 0.0101273; (1 - 0.328205)²·0.788462·0.211538/104
    #   = 0.451309·0.0016038 = 0.0007238; 0.328205²·0.836538·0.163462/104 = 0.107719·0.0013148 = 0.0001416;
    #   sum 0.0109927, root 0.104846; half-width 1.96·0.104846/0.625 = 0.328797.
    #   Interval: 0.328205 ∓ 0.328797 → [-0.0006 → 0, 0.6570].
    assert corrected_rate(8, 20, 85, 15, 80, 20) == (0.3077, 0.0, 0.657, False)
    # 14 of 20: (0.7 + 0.8 - 1) / 0.65 = 0.76923. p = 16/24 = 0.666667; centre = 0.455128/0.625 = 0.728205.
    #   Variance: 0.666667·0.333333/24 = 0.0092593; 0.271795²·0.0016038 = 0.0001185;
    #   0.728205²·0.0013148 = 0.0006972; sum 0.0100750, root 0.100374; half 0.314773.
    #   Interval: [0.413432, 1.042978 → 1].
    assert corrected_rate(14, 20, 85, 15, 80, 20) == (0.7692, 0.4134, 1.0, False)
    #   The run's sampling error alone: Wilson for 8/20 is [0.2188, 0.6134], through the correction
    #   [0.0289, 0.6360], inside the interval above; for 14/20 [0.4810, 0.8545] → [0.4323, 1.0069], slid
    #   below 1 at its width: [0.4254, 1], again inside.
    # 20 of 20: (1 + 0.8 - 1)/0.65 = 1.2308, clipped to 1; p = 22/24 = 0.916667, centre = 0.705128/0.625
    #   = 1.128205 (the variance weighs it as 1): 0.916667·0.083333/24 = 0.0031829; 0.0013148; sum
    #   0.0044977, root 0.067065; half 0.210316; the delta method's low 0.917889. But 20 questions alone
    #   say less: Wilson for 20/20 is [0.8389, 1], through the correction [0.6389/0.65, 0.8/0.65] =
    #   [0.982923, 1.230769], width 0.247846, slid below 1: [0.752154, 1]. The wider low wins.
    assert corrected_rate(20, 20, 85, 15, 80, 20) == (1.0, 0.7522, 1.0, False)


def test_a_clamped_estimate_keeps_the_width_of_the_runs_sampling_error():
    # The collapse the sampling floor prevents: sensitivity 0.5, specificity 0.95 (q0 + q1 - 1 = 0.45),
    #   18 of 20 judged exclusive: (0.9 + 0.95 - 1)/0.45 = 1.89, clipped to 1. The delta method alone,
    #   centred at 1.76 with a half-width of about 0.33, printed 1.0–1.0. Wilson for 18/20 is
    #   [0.6990, 0.9721]: through the correction [0.6490/0.45, 0.9221/0.45] = [1.442222, 2.049111], width
    #   0.606889, slid below 1: [0.393111, 1].
    assert corrected_rate(18, 20, 50, 50, 133, 7) == (1.0, 0.3931, 1.0, False)
    # The other clamp: 0 of 20 with sensitivity 0.85, specificity 0.80: (0 + 0.8 - 1)/0.65 < 0, clipped to 0.
    #   Wilson for 0/20 is [0, 0.1611]: through the correction [-0.307692, -0.059846], width 0.247846,
    #   slid above 0: [0, 0.247846].
    assert corrected_rate(0, 20, 85, 15, 80, 20) == (0.0, 0.0, 0.2478, False)


CLAMP_GRID = [
    (k, n, tp, m1 - tp, tn, m0 - tn)
    for n in (5, 20, 50)
    for k in range(n + 1)
    for m1, m0 in ((100, 140), (20, 20))
    for tp in range(m1 // 2, m1 + 1, max(1, m1 // 10))
    for tn in range(m0 // 2, m0 + 1, max(1, m0 // 10))
]


def test_at_either_clamp_the_interval_is_no_narrower_than_the_runs_sampling_error():
    clamped = 0
    for arguments in CLAMP_GRID:
        k, n, tp, fn, tn, fp = arguments
        figures = corrected_rate(*arguments)
        if figures.refused or figures.estimate not in (0.0, 1.0):
            continue
        clamped += 1
        raw_low, raw_high = wilson(k, n)
        youden = tn / (tn + fp) + tp / (tp + fn) - 1
        sampling_width = min(1.0, (raw_high - raw_low) / youden)
        assert figures.high - figures.low >= sampling_width - 5e-4, (arguments, figures, sampling_width)
        # At least the raw rate's own Wilson width, whatever the correction does to it.
        assert figures.high - figures.low >= raw_high - raw_low - 5e-4, (arguments, figures)
    assert clamped > 1000, "the grid reaches both clamps often"


def test_a_judge_too_close_to_chance_or_an_empty_side_is_refused_not_corrected():
    # An always-yes judge: sensitivity 1, specificity 0; q0 + q1 - 1 = 0.
    assert corrected_rate(12, 20, 100, 0, 0, 140).refused
    # Just under and exactly at the line: 0.5 + 0.79 - 1 = 0.29 refused; 0.5 + 0.8 - 1 = 0.3 corrected.
    assert corrected_rate(12, 20, 50, 50, 79, 21).refused
    assert not corrected_rate(12, 20, 50, 50, 80, 20).refused
    # A calibration with no positive (or no negative) case measures nothing; no judged question neither.
    assert corrected_rate(12, 20, 0, 0, 80, 20).refused and corrected_rate(12, 20, 85, 15, 0, 0).refused
    assert corrected_rate(0, 0, 85, 15, 80, 20).refused


def binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(rng.random() < p for _ in range(n))


def plain_delta(k: int, n: int, tp: int, fn: int, tn: int, fp: int) -> tuple[float, float]:
    """The unadjusted delta-method interval (no small-sample adjustment), for the comparison only."""
    p, q1, q0 = k / n, tp / (tp + fn), tn / (tn + fp)
    youden = q0 + q1 - 1
    theta = min(1.0, max(0.0, (p + q0 - 1) / youden))
    variance = p * (1 - p) / n + (1 - theta) ** 2 * q0 * (1 - q0) / (tn + fp) + theta**2 * q1 * (1 - q1) / (tp + fn)
    half = Z * math.sqrt(variance) / youden
    return max(0.0, theta - half), min(1.0, theta + half)


def coverage(rate: float, seed: int) -> dict[str, float]:
    """Share of RUNS seeded runs whose corrected, plain delta-method and raw Wilson intervals hold `rate`."""
    rng = random.Random(seed)  # noqa: S311 (a seeded simulation, not a secret)
    observed = rate * SENSITIVITY + (1 - rate) * (1 - SPECIFICITY)
    held = {"corrected": 0, "plain": 0, "raw": 0, "refused": 0}
    for _ in range(RUNS):
        k = binomial(rng, QUESTIONS, observed)
        tp = binomial(rng, POSITIVES, SENSITIVITY)
        tn = binomial(rng, NEGATIVES, SPECIFICITY)
        figures = corrected_rate(k, QUESTIONS, tp, POSITIVES - tp, tn, NEGATIVES - tn)
        if figures.refused:
            held["refused"] += 1
            continue
        held["corrected"] += figures.low <= rate <= figures.high
        low, high = plain_delta(k, QUESTIONS, tp, POSITIVES - tp, tn, NEGATIVES - tn)
        held["plain"] += low <= rate <= high
        low, high = wilson(k, QUESTIONS)
        held["raw"] += low <= rate <= high
    return {name: count / RUNS for name, count in held.items()}


def clamped_coverage(rate: float, seed: int, sensitivity: float, specificity: float) -> dict[str, float]:
    """Over RUNS seeded runs at a true rate where the estimate often clips to 0 or 1: the share of all runs
    whose corrected interval holds `rate`, and the share of the runs whose estimate clipped."""
    rng = random.Random(seed)  # noqa: S311 (a seeded simulation, not a secret)
    observed = rate * sensitivity + (1 - rate) * (1 - specificity)
    held = clamped = clamped_held = 0
    for _ in range(RUNS):
        k = binomial(rng, QUESTIONS, observed)
        tp = binomial(rng, POSITIVES, sensitivity)
        tn = binomial(rng, NEGATIVES, specificity)
        figures = corrected_rate(k, QUESTIONS, tp, POSITIVES - tp, tn, NEGATIVES - tn)
        assert not figures.refused, "a judge this good is never refused"
        covers = figures.low <= rate <= figures.high
        held += covers
        if figures.estimate in (0.0, 1.0):
            clamped += 1
            clamped_held += covers
    return {"all": held / RUNS, "clamped": clamped_held / clamped, "clamped_runs": clamped}


@pytest.mark.parametrize(
    ("rate", "sensitivity", "specificity", "seed"),
    [
        (0.0, SENSITIVITY, SPECIFICITY, 3300),
        (0.1, SENSITIVITY, SPECIFICITY, 3301),
        (0.8, SENSITIVITY, SPECIFICITY, 3308),
        (1.0, SENSITIVITY, SPECIFICITY, 3310),
        # A judge that misses half the exclusive answers: the observed rate often runs past its
        # sensitivity and the estimate clips to 1 (the case that once printed 1.000–1.000).
        (0.9, 0.6, 0.95, 3319),
    ],
)
def test_the_corrected_interval_covers_the_true_rate_at_the_clamps(rate, sensitivity, specificity, seed):
    figures = clamped_coverage(rate, seed, sensitivity, specificity)
    print(
        f"true rate {rate} (sensitivity {sensitivity}, specificity {specificity}): corrected covers "
        f"{figures['all']:.1%} of {RUNS} runs, {figures['clamped']:.1%} of the {figures['clamped_runs']} "
        "whose estimate clipped to 0 or 1"
    )
    assert figures["clamped_runs"] >= 100, f"the estimate clips often enough to measure: {figures}"
    assert figures["all"] >= 0.94, figures
    assert figures["clamped"] >= 0.94, f"a clipped estimate's interval still covers the truth: {figures}"


@pytest.mark.parametrize(("rate", "seed"), [(0.1, 3201), (0.4, 3204), (0.8, 3208)])
def test_the_corrected_interval_covers_the_true_rate_and_the_raw_one_does_not(rate, seed):
    figures = coverage(rate, seed)
    print(
        f"true rate {rate}: corrected covers {figures['corrected']:.1%}, plain delta-method "
        f"{figures['plain']:.1%}, raw Wilson {figures['raw']:.1%} of {RUNS} runs"
    )
    assert figures["refused"] == 0, "a judge this good is never refused"
    assert figures["corrected"] >= 0.94, figures
    assert figures["raw"] < figures["corrected"], figures
    if rate == 0.4:
        # Why the two successes and two failures: without them the delta method falls short here.
        assert figures["plain"] < 0.94, figures
    else:
        # Away from the middle the judge's errors bias the raw rate off the truth and Wilson's interval
        # misses it (at 0.4 the observed rate 0.46 sits near the truth by accident).
        assert figures["raw"] < 0.9, figures
