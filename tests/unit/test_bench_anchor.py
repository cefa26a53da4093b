"""The anchor arm's arithmetic (make bench SIZE=anchor): where a source first comes, the quality per
question set, and the side-by-side ratios, on figures given by hand."""

from zm_roi_bench import anchor, layers

# Row ids (as a recall returns them, one-tuples) and the originals each row copies.
ORIGINALS = {"a": {0}, "b": {1}, "c": {1, 2}, "d": {3}}


def test_a_source_is_found_at_its_first_row_or_a_copy_and_not_past_the_tenth():
    rows = [("d",), ("c",), ("b",)]
    assert layers.source_rank(2, rows, ORIGINALS) == 2, "c copies 2: second row"
    assert layers.source_rank(1, rows, ORIGINALS) == 2, "c copies 1 too, before b"
    assert layers.source_rank(0, rows, ORIGINALS) is None, "not among the rows"
    assert layers.source_rank(0, [("d",)] * 10 + [("a",)], ORIGINALS) is None, "the 11th row does not count"
    assert layers.source_rank(9, [("x",)], ORIGINALS) is None, "a row without a title maps to nothing"


def test_quality_is_counted_per_question_set():
    questions = [{"set": "paraphrased"}] * 4 + [{"set": "templated"}] * 2
    ranks = [1, 2, None, 4, 1, 1]
    quality = anchor.quality(ranks, questions)
    # MRR: (1 + 1/2 + 0 + 1/4) / 4 = 0.4375 -> 0.438 (rounded to 3 places); templated (1 + 1) / 2.
    assert quality == {
        "paraphrased": {"n": 4, "hit10": 3, "hit1": 1, "mrr": 0.438},
        "templated": {"n": 2, "hit10": 2, "hit1": 2, "mrr": 1.0},
    }
    assert anchor.quality([3], [{"set": "templated"}]) == {"templated": {"n": 1, "hit10": 1, "hit1": 0, "mrr": 0.333}}


def _arm(per_memory, buffers, p50, quality):
    return {
        "bytes": {"per_memory": per_memory},
        "buffers": {"buffers_p50": buffers},
        "timing": {"p50": p50, "p95": 2 * p50},
        "quality": quality,
    }


def test_the_side_by_side_puts_zm_roi_over_the_anchor():
    ours = {"paraphrased": {"n": 40, "hit10": 36, "hit1": 27, "mrr": 0.79}}
    theirs = {"paraphrased": {"n": 40, "hit10": 30, "hit1": 18, "mrr": 0.5}}
    results = {
        "questions": {"paraphrased": 40, "templated": 0},
        "arms": {"hybrid": _arm(16_000, 1_000, 3.0, ours), "anchor": _arm(4_000, 500, 6.0, theirs)},
    }
    rows = {row["what"]: (row["zm_roi"], row["anchor"], row["ratio"]) for row in anchor.side_by_side(results)}
    assert rows["bytes a memory, all in"] == (16_000, 4_000, 4.0)
    assert rows["shared buffers per recall, p50"] == (1_000, 500, 2.0)
    assert rows["ms per recall, p50 (client, steady)"] == (3.0, 6.0, 0.5)
    assert rows["ms per recall, p95 (client, steady)"] == (6.0, 12.0, 0.5)
    assert rows["hit@1, paraphrased"] == (27, 18, 1.5)
    assert rows["MRR@10, paraphrased"] == (0.79, 0.5, 0.79 / 0.5)
    assert not any("templated" in what for what in rows), "a set without questions has no rows"
    zero = dict(
        results,
        arms={
            "hybrid": _arm(1, 1, 1.0, ours),
            "anchor": _arm(1, 1, 1.0, {"paraphrased": {"n": 40, "hit10": 0, "hit1": 0, "mrr": 0.0}}),
        },
    )
    assert {row["what"]: row["ratio"] for row in anchor.side_by_side(zero)}["hit@1, paraphrased"] is None
