"""The statistics of `zm-roi judge-check` (zm_roi.judgecheck), worked by hand: the Wilson interval, a
label's sensitivity, specificity, Youden's J and Cohen's kappa, and the verdict against THRESHOLDS."""

from __future__ import annotations

import pytest

from zm_roi import judgecheck


def test_the_wilson_interval_matches_the_textbook_values_and_stays_inside_0_and_1():
    # 17 of 20: the interval every table of the Wilson score interval gives, 0.640 to 0.948.
    assert [round(x, 4) for x in judgecheck.wilson(17, 20)] == [0.6396, 0.9476]
    assert [round(x, 4) for x in judgecheck.wilson(0, 10)] == [0.0, 0.2775]
    assert [round(x, 4) for x in judgecheck.wilson(10, 10)] == [0.7225, 1.0]
    assert judgecheck.wilson(0, 0) == (0.0, 1.0), "no trials: nothing is known"


def pairs(tp: int, fn: int, tn: int, fp: int) -> list[tuple[bool, bool]]:
    """(gold, judged) pairs with the four counts given."""
    return [(True, True)] * tp + [(True, False)] * fn + [(False, False)] * tn + [(False, True)] * fp


def test_a_labels_figures_are_the_ones_worked_by_hand():
    figures = judgecheck.label_figures(pairs(tp=8, fn=2, tn=9, fp=1))
    assert {k: figures[k] for k in ("n", "agreed", "tp", "fn", "tn", "fp")} == {
        "n": 20,
        "agreed": 17,
        "tp": 8,
        "fn": 2,
        "tn": 9,
        "fp": 1,
    }
    # sensitivity 8/10, specificity 9/10, J = 0.8 + 0.9 - 1, accuracy 17/20.
    assert (figures["sensitivity"], figures["specificity"], figures["youden"]) == (0.8, 0.9, 0.7)
    assert (figures["accuracy"], figures["accuracy_low"], figures["accuracy_high"]) == (0.85, 0.6396, 0.9476)
    # Chance agreement pe = 0.5 x 0.45 + 0.5 x 0.55 = 0.5, so kappa = (0.85 - 0.5) / (1 - 0.5) = 0.7, and its
    # interval is the accuracy's mapped the same way.
    assert figures["kappa"] == 0.7
    assert (figures["kappa_low"], figures["kappa_high"]) == (0.2792, 0.8953)


def test_a_judge_that_says_yes_to_everything_has_no_skill():
    figures = judgecheck.label_figures(pairs(tp=5, fn=0, tn=0, fp=5))
    assert (figures["sensitivity"], figures["specificity"], figures["youden"]) == (1.0, 0.0, 0.0)
    assert figures["kappa"] == 0.0


def test_a_label_with_one_class_only_has_no_specificity_youden_or_kappa():
    figures = judgecheck.label_figures(pairs(tp=6, fn=0, tn=0, fp=0))
    assert figures["sensitivity"] == 1.0
    assert figures["specificity"] is None and figures["youden"] is None and figures["kappa"] is None


def report(youden, decoy_rate=0.0, skipped=0, cases=40) -> dict:
    return {
        "exclusive": {"youden": youden, "sensitivity": 0.7, "specificity": 0.8},
        "decoys": {
            "general": {"rate": decoy_rate, "false_positives": 3, "n": 10, "description": "of general knowledge"}
        },
        "skipped": skipped,
        "cases": cases,
    }


def test_a_judge_above_every_threshold_passes():
    assert judgecheck.verdict(report(0.6)) == {"passed": True, "failures": [], "thresholds": judgecheck.THRESHOLDS}


@pytest.mark.parametrize(
    ("given", "failure"),
    [
        (report(0.5), "exclusive Youden's J 0.50 is below 0.60 (sensitivity 70.0%, specificity 80.0%)"),
        (report(None), "the exclusive label cannot be measured: the judged cases hold only one of its classes"),
        (report(0.9, decoy_rate=0.3), "3 of 10 decoys of general knowledge judged answered (30.0%, above 20.0%)"),
        (report(0.9, skipped=5), "5 of 40 cases got no parseable reply (12.5%, above 10.0%)"),
    ],
)
def test_each_threshold_missed_is_a_reason_given(given, failure):
    result = judgecheck.verdict(given)
    assert result["passed"] is False
    assert result["failures"] == [failure]
