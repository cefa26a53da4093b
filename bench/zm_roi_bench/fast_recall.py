"""`make bench SIZE=fast-recall`: a 100,000-row import on the user's path, followed to fast recall, as one
report with the issue's goals beside it.

The measurement is the pages bench's (`pages.run_to_fast_recall`: the import's own writes with every vector,
pg_cron's one-minute index decision and autovacuum on, the member's recalls measured every minute from the
import's end until the large layer's HNSW indexes are valid, autovacuum has visited both tables and the
build job has nothing left). This
module only names the run, reads the goals off its figures and renders them. Fast recall is timed by
pg_cron's run log, not by the minute polls: the later of the two HNSW builds' ends, after the import's end.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from zm_roi_bench import compare, footprint, pages, report

SIZE = 100_000
LABEL = "fast-recall"
GOAL_SECONDS = 5 * 60
GOAL_HYBRID_MS = 15.0
GOAL_LEXICAL_MS = 10.0
TIMEOUT_MINUTES = 30


def run(adr_corpus: Path, seed: int, say=print) -> dict:
    """One import of SIZE real-text rows followed to fast recall, with the figures the report needs."""
    started = time.monotonic()
    figures = pages.run_to_fast_recall([SIZE], seed, adr_corpus, TIMEOUT_MINUTES, vectors="real", say=say)
    figures["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    figures.update(
        label=LABEL,
        seed=seed,
        date=datetime.now(UTC).date().isoformat(),
        seconds=round(time.monotonic() - started, 1),
        hnsw_valid_after_import_seconds=hnsw_valid_after(figures),
    )
    return figures


def hnsw_valid_after(figures: dict) -> float | None:
    """Seconds from the import's end until the last of the large layer's HNSW indexes was built (0 when
    both were built before it ended), by pg_cron's run log; None when one never became valid."""
    states = figures["timeline"][-1]["indexes"] if figures["timeline"] else {}
    if not states or any(state != "valid" for state in states.values()):
        return None
    ends = {}
    for build in figures["index_builds"]:
        if build["job"] in states and build["status"] == "succeeded" and build["job"] not in ends:
            ends[build["job"]] = datetime.fromisoformat(str(build["end"]))
    if set(ends) != set(states):
        return None
    import_end = datetime.fromisoformat(figures["import_ended_at"])
    return max(0.0, round((max(ends.values()) - import_end).total_seconds(), 1))


def goals(figures: dict) -> list[list]:
    """Each goal of the issue this run measures: the goal, the figure, met or missed."""
    settled = _layer(figures["timeline"][-1]) if figures["timeline"] else {"hybrid": {}, "lexical": {}}
    valid_after = figures["hnsw_valid_after_import_seconds"]
    rows = [
        (
            "both HNSW indexes valid after the import's end",
            f"≤ {GOAL_SECONDS} s",
            valid_after,
            GOAL_SECONDS,
            ",.0f",
            " s",
        ),
        (
            "hybrid recall, shared buffers p50",
            f"≤ {pages.GOAL_BUFFERS:,}",
            settled["hybrid"].get("buffers_p50"),
            pages.GOAL_BUFFERS,
            ",.0f",
            "",
        ),
        (
            "hybrid recall p50",
            f"≤ {GOAL_HYBRID_MS:g} ms",
            settled["hybrid"].get("ms_p50"),
            GOAL_HYBRID_MS,
            ".1f",
            " ms",
        ),
        (
            "lexical recall p50",
            f"≤ {GOAL_LEXICAL_MS:g} ms",
            settled["lexical"].get("ms_p50"),
            GOAL_LEXICAL_MS,
            ".1f",
            " ms",
        ),
        (
            "bytes a memory, all in",
            f"≤ {footprint.GOAL_BYTES_PER_MEMORY:,}",
            figures["bytes"]["per_memory"],
            footprint.GOAL_BYTES_PER_MEMORY,
            ",.0f",
            "",
        ),
    ]
    return [
        [what, goal, "never" if value is None else f"{value:{spec}}{unit}", _verdict(value, limit)]
        for what, goal, value, limit, spec, unit in rows
    ]


def _layer(point: dict) -> dict:
    """The measured layer's recalls at one poll (int keys in the run, str keys once read back from json)."""
    return point["layers"].get(SIZE) or point["layers"][str(SIZE)]


def _verdict(value: float | None, limit: float) -> str:
    return "missed" if value is None or value > limit else "met"


def render(figures: dict) -> str:
    """The Markdown report: how it was measured, the goals, the builds, the timeline and the bytes."""
    m = figures["machine"]
    out = [
        f"# zm-roi bench: fast recall after a {SIZE:,}-row import ({figures['date']})",
        "",
        f"Produced by `make bench SIZE={LABEL}` (seed {figures['seed']}): one project of {SIZE:,} real-text "
        "memories written the import's way (`zm_roi.importer.insert_memories`, then each row's two offline vectors "
        "as the import writes them), on a throwaway cluster with pg_cron's index decision and autovacuum on; from "
        f"the import's end the member's recalls are measured every {pages.POLL_SECONDS} s (buffers from EXPLAIN "
        "(ANALYZE, BUFFERS), as the member) until both HNSW indexes are valid, autovacuum has visited both "
        "tables and the build job has nothing left (it rebuilds the postings' impact index last), or "
        f"{TIMEOUT_MINUTES} minutes pass; the bytes are read then. The builds' times are pg_cron's run log's. How: "
        "[zm_roi_bench/fast_recall.py](../zm_roi_bench/fast_recall.py), [pages.py](../zm_roi_bench/pages.py).",
        "",
        *compare.machine_table(m, figures["load_average_at_import_end"], figures["server"]),
        "",
        f"The import took {figures['import_seconds']:,} s and ended at {figures['import_ended_at']}; the run took "
        f"{figures['seconds']:,.0f} s{'' if figures['settled'] else ' and timed out before it settled'}.",
        "",
        "## Goals",
        "",
        *report.table(["goal", "target", "measured (at the last poll)", ""], goals(figures)),
        "",
        "## The index builds (pg_cron's run log)",
        "",
        *report.table(
            ["job", "start", "end", "status"],
            [[b["job"], b["start"], b["end"], b["status"]] for b in figures["index_builds"]],
        ),
        "",
        "## From the import's end",
        "",
        *report.table(
            ["s", "indexes valid", "hybrid buffers p50", "hybrid ms p50", "lexical buffers p50", "lexical ms p50"],
            [
                [
                    point["seconds"],
                    f"{sum(s == 'valid' for s in point['indexes'].values())} of {len(point['indexes'])}",
                    f"{layer['hybrid']['buffers_p50']:,.0f}",
                    layer["hybrid"]["ms_p50"],
                    f"{layer['lexical']['buffers_p50']:,.0f}",
                    layer["lexical"]["ms_p50"],
                ]
                for point, layer in ((point, _layer(point)) for point in figures["timeline"])
            ],
        ),
        "",
        f"## Bytes a memory ({figures['bytes']['memories']:,} memories, {figures['bytes']['postings']:,} postings)",
        "",
        *report.table(
            ["part", "relation", "bytes a memory"],
            [[p["part"], p["relation"], f"{p['per_memory']:,}"] for p in figures["bytes"]["parts"] if p["per_memory"]],
        ),
        f"| all in | | **{figures['bytes']['per_memory']:,}** |",
        "",
    ]
    return "\n".join(out)
