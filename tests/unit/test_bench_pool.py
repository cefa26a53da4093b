"""The pool bench (python -m zm_roi_bench.pool, decision 0038): the lines it swaps in the lexical leg's
copy are still the shipped leg's, once each, and its table reads the figures it is given."""

import re
from pathlib import Path

from zm_roi_bench import pool

SCHEMA = Path(__file__).resolve().parents[2] / "supabase" / "schemas" / "20_recall.sql"


def _leg() -> str:
    text = SCHEMA.read_text()
    start = text.index("create function roi.recall_lexical_leg(")
    return text[start : text.index("\n$$;\n", start)]


def test_the_bench_swaps_lines_the_shipped_leg_holds_once_each():
    leg = _leg()
    assert pool.SIGNATURE.split("(")[1].count(",") == re.search(r"\(([^)]*)\)", leg).group(1).count(",")
    for shipped, settable in pool.SETTABLE:
        assert leg.count(shipped) == 1, f"the leg no longer holds {shipped.strip()!r} once"
        assert "current_setting('bench." in settable


def test_the_table_has_a_row_per_arm_with_its_figures():
    quality = {
        "paraphrased": {"n": 2, "hit10": 2, "hit1": 1, "mrr": 0.75},
        "templated": {"n": 1, "hit10": 1, "hit1": 1, "mrr": 1.0},
    }
    arm = {
        "hybrid_buffers_p50": 5684,
        "leg_buffers_p50": 3251,
        "hybrid_ms_p50": 13.6,
        "hybrid_ms_p95": 20.1,
        "hybrid_quality": quality,
        "lexical_quality": quality,
        "hybrid_lists_unchanged": 3,
        "lexical_ms_p50": 7.1,
    }
    results = {
        "size": 100_000,
        "date": "2026-12-06",
        "seed": 42,
        "rows_seen_by_the_member": 100_000,
        "questions": {"paraphrased": 2, "templated": 1},
        "rounds": 3,
        "machine": {"load_average_at_start": [1.0, 1.0, 1.0]},
        "load_average_at_measurements": [2.0, 2.0, 2.0],
        "seconds": 589,
        "arms": {"1500/500": arm, "1500/300": dict(arm, hybrid_buffers_p50=4884)},
    }
    table = pool.render(results)
    assert "| 1500/500 | 5,684 | 3,251 | 13.6 | 20.1 | 1 / 2 / 0.750 | 1 / 1 / 1.000 | 3 of 3 |" in table
    assert "| 1500/300 | 4,884 |" in table
