"""The layer bench's rounds: every recall's block once per round, and whose block goes first rotates."""

from collections import Counter

from zm_roi_bench import layers


def test_each_round_runs_every_recall_once_and_each_goes_first_alike():
    turns = [layers.rotated(layers.RECALLS, turn) for turn in range(3 * len(layers.RECALLS))]
    assert all(sorted(order) == sorted(layers.RECALLS) for order in turns)
    assert Counter(order[0] for order in turns) == dict.fromkeys(layers.RECALLS, 3)
