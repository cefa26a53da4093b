"""The postings-order bench's report, on figures of the shape its run writes."""

from __future__ import annotations

from zm_roi_bench import postings_order


def arm(pages: int, hybrid: float, lexical: float) -> dict:
    return {
        "postings_heap_pages": pages,
        "hybrid_buffers_p50": hybrid,
        "lexical_leg_buffers_p50": lexical,
        "e5_leg_buffers_p50": 1371,
        "minilm_leg_buffers_p50": 752,
        "hybrid_lists_unchanged": 81,
        "quality": {"paraphrased": {"n": 41, "hit1": 25, "hit10": 31, "mrr": 0.666}},
    }


def test_the_report_puts_both_orders_side_by_side():
    results = {
        "date": "2026-12-07",
        "size": 100_000,
        "seed": 42,
        "seconds": 600.4,
        "machine": {"cpu_model": "cpu", "cores": 2, "memory_gb": 24.0, "load_average_at_start": [1.5, 1, 1]},
        "questions": {"paraphrased": 41, "templated": 40},
        "shape_alone": [{"heap_order": "random", "heap_pages": 37_500, "key": 7, "rows": 1453, "buffers": 357}],
        "arms": {"memory order": arm(41_000, 4730, 2600), "list order": arm(41_002, 3650, 1520)},
    }
    report = postings_order.render(results)
    assert "| memory order | 41,000 | 4,730 | 2,600 | 1,371 | 752 | 81 of 81 | 25 / 31 / 0.666 |" in report
    assert "| list order | 41,002 | 3,650 | 1,520 | 1,371 | 752 | 81 of 81 | 25 / 31 / 0.666 |" in report
    assert "took 600 s" in report.lower()
    assert "Machine: cpu, 2 cores, 24.0 GB" in report
    assert "| random | 37,500 | 7 | 1,453 | 357 |" in report
    # Each table whole: the layer's rows under their header, the shape's after them.
    assert report.index("| list order |") < report.index("The shape alone") < report.index("| random |")


def test_each_arm_is_summarised_against_the_first_arms_top_10s():
    questions = [{"set": "paraphrased"}, {"set": "paraphrased"}, {"set": "templated"}]

    def measured(hybrid: list[int], lists: list[list[str]], ranks: list[int | None]) -> dict:
        return {
            "hybrid": hybrid,
            "hybrid_ms": [3.0, 1.0, 2.456],
            "lexical": [10, 30, 20],
            "embedding": [5, 5, 7],
            "embedding_minilm": [1, 2, 3],
            "lists": lists,
            "ranks": ranks,
        }

    arms = {
        "postings": measured([100, 300, 200], [["a"], ["b"], ["c"]], [1, 2, None]),
        "blocks": measured([90, 10, 50], [["a"], ["x"], ["c"]], [1, None, 1]),
    }
    figures = postings_order.summary(arms, questions)
    assert figures["postings"]["hybrid_buffers_p50"] == 200
    assert figures["blocks"]["hybrid_buffers_p50"] == 50
    assert figures["blocks"]["hybrid_ms_p50"] == 2.46
    assert figures["blocks"]["lexical_leg_buffers_p50"] == 20
    assert figures["blocks"]["e5_leg_buffers_p50"] == 5
    assert figures["postings"]["hybrid_lists_unchanged"] == 3
    assert figures["blocks"]["hybrid_lists_unchanged"] == 2
    assert figures["postings"]["quality"]["paraphrased"]["hit1"] == 1
    assert figures["postings"]["quality"]["paraphrased"]["hit10"] == 2
    assert figures["blocks"]["quality"]["templated"]["hit1"] == 1
