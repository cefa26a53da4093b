"""The gate's decision (zm_roi.gate.decide), a pure function: each rule held, failed or undecided, the
exit codes, and the noise budget (an unchanged corpus judged by a judge that flips 10% of its verdicts
at random fails the gate at most 3 times in 50 seeded runs)."""

from __future__ import annotations

import math
import random
from decimal import ROUND_HALF_UP, Decimal, localcontext

import pytest

from zm_roi.errors import UserError
from zm_roi.gate import FAILED, HELD, NOT_MEASURED, Outcome, Rules, decide, markdown_report


def _round4(value: Decimal) -> float:
    """round(x, 4) as PostgreSQL rounds a numeric: half away from zero."""
    return float(value.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def sign_test_p(improved: int, regressed: int) -> float | None:
    """roi.sign_test_p in Python (tests/e2e/test_gate.py holds the two to the same values)."""
    n = improved + regressed
    if n == 0:
        return None
    k = min(improved, regressed)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return _round4(min(Decimal(1), Decimal(2 * tail) / Decimal(2**n)))


def wilson(k: int, n: int, upper: bool) -> float:
    """roi.wilson_bound in Python, in decimals as the database computes it."""
    with localcontext() as ctx:
        ctx.prec = 40
        z, t = Decimal("1.96"), Decimal(n)
        p = Decimal(k) / t
        centre = p + z * z / (2 * t)
        spread = z * (p * (1 - p) / t + z * z / (4 * t * t)).sqrt()
        bound = (centre + (spread if upper else -spread)) / (1 + z * z / t)
        return _round4(max(Decimal(0), min(Decimal(1), bound)))


def run_row(exclusive: int, judged: int = 20, **extra) -> dict:
    return {
        "run_id": "r2",
        "status": "complete",
        "probe_count": judged,
        "judged_count": judged,
        "skipped_count": 0,
        "exclusive_count": exclusive,
        "exclusive_rate": round(exclusive / judged, 4) if judged else None,
        "exclusive_rate_low": wilson(exclusive, judged, False) if judged else None,
        "exclusive_rate_high": wilson(exclusive, judged, True) if judged else None,
        "cost_usd": None,
        **extra,
    }


def comparison(improved: int, regressed: int, paired: int = 20, judge_changed: bool = False) -> dict:
    return {
        "run_id": "r2",
        "previous_run_id": "r1",
        "paired_count": paired,
        "improved_count": improved,
        "regressed_count": regressed,
        "paired_p_value": None if judge_changed else sign_test_p(improved, regressed),
        "judge_changed": judge_changed,
        "judge_fingerprint": "judge-b",
        "previous_judge_fingerprint": "judge-a" if judge_changed else "judge-b",
    }


BOTH = Rules(min_rate=0.3, no_regression=True)


def test_an_unchanged_run_holds():
    decision = decide(run_row(12), comparison(1, 1), BOTH)
    assert (decision.code, decision.verdict) == (HELD, "held")


def test_a_significant_paired_regression_fails():
    # 8 questions lost, none gained: p = 2 / 2^8 = 0.0078.
    decision = decide(run_row(6), comparison(0, 8), Rules(no_regression=True))
    assert (decision.code, decision.verdict) == (FAILED, "failed")
    assert "significant regression" in decision.reasons[0] and "0.0078" in decision.reasons[0]


def test_a_regression_within_noise_holds_and_alpha_moves_the_line():
    # 4 lost, 0 gained: p = 0.125.
    assert decide(run_row(8), comparison(0, 4), Rules(no_regression=True)).code == HELD
    assert decide(run_row(8), comparison(0, 4), Rules(no_regression=True, alpha=0.2)).code == FAILED


def test_an_improvement_never_fails_however_significant():
    assert decide(run_row(18), comparison(10, 0), Rules(no_regression=True)).code == HELD


def test_min_rate_fails_only_when_the_upper_bound_is_below_it():
    # 4 of 20: 20%, interval about 8%-42%.
    run = run_row(4)
    assert decide(run, None, Rules(min_rate=0.4)).code == HELD, "40% is inside the interval: not shown below"
    decision = decide(run, None, Rules(min_rate=0.5))
    assert decision.code == FAILED and "below --min-rate 50%" in decision.reasons[0]
    assert decide(run, None, Rules(min_rate=0.0)).code == HELD


def test_a_changed_judge_is_not_comparable_never_a_pass_or_a_fail():
    decision = decide(run_row(12), comparison(0, 10, judge_changed=True), Rules(no_regression=True))
    assert (decision.code, decision.verdict) == (NOT_MEASURED, "not_comparable")
    assert "judge-a → judge-b" in decision.reasons[0]


def test_a_failed_min_rate_still_fails_when_the_judge_changed():
    decision = decide(run_row(1), comparison(0, 10, judge_changed=True), Rules(min_rate=0.5, no_regression=True))
    assert decision.code == FAILED


def test_nothing_to_compare_with_is_exit_2():
    assert decide(run_row(12), None, Rules(no_regression=True)).code == NOT_MEASURED
    no_previous = {"run_id": "r2", "previous_run_id": None}
    assert decide(run_row(12), no_previous, Rules(no_regression=True)).verdict == "not_measured"
    assert decide(run_row(12), comparison(0, 0, paired=0), Rules(no_regression=True)).code == NOT_MEASURED


def test_runs_that_cannot_be_scored_are_exit_2_whatever_the_rules():
    assert decide(None, None, BOTH).code == NOT_MEASURED
    judging = run_row(3, status="judging", judged_count=3, probe_count=20)
    assert "3 of 20 verdicts in" in decide(judging, None, BOTH).reasons[0]
    skipped = run_row(0, judged=0, skipped_count=20)
    assert decide(skipped, None, BOTH).code == NOT_MEASURED
    aborted = run_row(2, status="aborted_budget", cost_usd=0.0312)
    decision = decide(aborted, comparison(0, 15), BOTH)
    assert (decision.code, decision.verdict) == (NOT_MEASURED, "aborted_budget")
    assert "aborted by the spending cap, spent $0.0312" in decision.reasons[0]


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (Rules(), "the gate needs a rule"),
        (Rules(min_rate=1.5), "--min-rate is a rate from 0 to 1"),
        (Rules(min_rate=-0.1), "--min-rate is a rate from 0 to 1"),
        (Rules(no_regression=True, alpha=0), "--alpha is a significance level"),
        (Rules(no_regression=True, alpha=1), "--alpha is a significance level"),
    ],
)
def test_bad_rules_are_refused_by_name(rules, expected):
    with pytest.raises(UserError, match=expected):
        rules.check()


def flipped(truth: list[bool], rng: random.Random, rate: float) -> list[bool]:
    return [(not v) if rng.random() < rate else v for v in truth]


def simulated_gate(truth: list[bool], rng: random.Random, flip: float, rules: Rules, repeats: int) -> int:
    """`repeats` runs in a row over the same questions, each judged by a judge that flips `flip` of its
    verdicts at random, each gated against the run before it as the database pairs them. Failures."""
    failures = 0
    before = flipped(truth, rng, flip)
    for _ in range(repeats):
        after = flipped(truth, rng, flip)
        improved = sum(a and not b for a, b in zip(after, before, strict=True))
        regressed = sum(b and not a for a, b in zip(after, before, strict=True))
        decision = decide(run_row(sum(after), len(after)), comparison(improved, regressed, len(after)), rules)
        failures += decision.code == FAILED
        before = after
    return failures


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_noise_alone_fails_the_gate_at_most_3_times_in_50(seed):
    rng = random.Random(seed)  # noqa: S311 - a seeded simulation, not secrets
    truth = [rng.random() < 0.6 for _ in range(20)]
    rules = Rules(min_rate=0.25, no_regression=True)
    failures = simulated_gate(truth, rng, 0.10, rules, repeats=50)
    assert failures <= 3, f"seed {seed}: the gate failed {failures} of 50 unchanged runs"


def test_the_noise_test_can_fail_a_gate_that_compares_point_estimates():
    """The same simulation catches a gate that fails on any drop: it is not a test that passes anyway."""
    rng = random.Random(1)  # noqa: S311 - a seeded simulation, not secrets
    truth = [rng.random() < 0.6 for _ in range(20)]
    failures = simulated_gate(truth, rng, 0.10, Rules(no_regression=True, alpha=0.99), repeats=50)
    assert failures > 3


@pytest.mark.parametrize(("flip", "at_least"), [(0.0, 50), (0.10, 12)])
def test_a_recall_that_drops_half_the_answers_is_caught(flip, at_least):
    """The other side of the noise budget: 14 of 20 answered, then half of them lost. A judge that never
    flips (deterministic mode) is caught every time (-7, p = 0.016); one that flips 10% of its verdicts
    about 4 times in 10 (measured over 200 draws: 38%; 62% at 18 of 20, 70% at 20 of 20): 20 questions
    cannot tell more from one run, and the gate does not pretend they can."""
    rng = random.Random(7)  # noqa: S311 - a seeded simulation, not secrets
    truth = [True] * 14 + [False] * 6
    caught = 0
    for _ in range(50):
        before = flipped(truth, rng, flip)
        after = flipped([v and i % 2 == 0 for i, v in enumerate(truth)], rng, flip)
        improved = sum(a and not b for a, b in zip(after, before, strict=True))
        regressed = sum(b and not a for a, b in zip(after, before, strict=True))
        caught += decide(run_row(sum(after)), comparison(improved, regressed), Rules(no_regression=True)).code == FAILED
    assert caught >= at_least, f"caught {caught} of 50"


def test_markdown_is_a_before_after_table():
    outcome = Outcome(
        decide(run_row(6, recall_function="public.half"), comparison(0, 8), BOTH),
        BOTH,
        run=run_row(6, recall_function="public.half"),
        previous=run_row(14, run_id="r1", recall_function="public.recall"),
        comparison=comparison(0, 8),
    )
    table = markdown_report(outcome)
    assert "| | before | after |" in table
    assert "| exclusive rate (95% interval) | 70% (48%–85%) | 30% (15%–52%) |" in table
    assert "| paired improved / regressed |  | +0 / −8 on 20 shared |" in table
    assert "| p-value (sign test) |  | 0.0078 |" in table
    assert "| recall function | `public.recall` | `public.half` |" in table
    assert "**failed** (exit 1)" in table
    assert outcome.as_json()["comparison"]["regressed_count"] == 8
