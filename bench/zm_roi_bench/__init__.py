"""`make bench`: measured speed at scale, on a throwaway cluster with a synthetic corpus.

One run builds a cluster per size, generates the corpus in SQL (corpus.sql, beside this file), times
recall, benchmark_memory(), upkeep and (once it exists) the
worker, then writes bench/results/<date>-<size>.md and .json. See bench/README.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable
from pathlib import Path

import psycopg

from zm_roi_bench import corpus, latency, measure, report, upkeep_writes
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.measure import Plan

SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
CURVE = (10_000, 100_000, 1_000_000)
DEFAULT_SEED = 42


def measure_size(
    root: Path, size: int, seed: int, plan: Plan, say: Callable[[str], None] = print, owners: int | None = None
) -> dict:
    """Everything the report shows for one corpus size, measured on its own throwaway cluster."""
    with throwaway_cluster(root, say) as cluster:
        url = cluster.url()
        say(f"generating {size:,} memories (seed {seed}{f', {owners:,} owners' if owners else ''})")
        build = corpus.build(url, size, seed, say, owners=owners)
        shape = corpus.shape(url)
        with psycopg.connect(url) as conn:
            settings = server(conn)
        load = [round(x, 2) for x in os.getloadavg()]
        say("measuring: round trip, recall")
        round_trip = measure.round_trip(url, plan)
        recall, sample = measure.recall(url, seed, plan)
        say("measuring: benchmark_memory(), its recalls alone")
        bench = measure.benchmark(url, seed, plan)
        say("measuring: upkeep")
        upkeep = measure.upkeep(url, plan)
        say("measuring: upkeep after one write, after 100 spread writes")
        upkeep_writes_figures = upkeep_writes.measure(
            url, plan.idle_upkeep_calls, plan.one_write_cycles, plan.spread_write_cycles
        )
        worker = (
            measure.worker(url, plan, say)
            if plan.worker
            else {"status": "measured at the largest size only", "detail": "the queue does not read memories"}
        )
        model_latency = (
            latency.measure(url, plan.model_delay_s, say=say)
            if plan.worker
            else {"status": "measured at the largest size only"}
        )
        explain = measure.explain_recall(url, sample) if sample else {}
    return {
        "size": size,
        "load_average": load,
        "build_seconds": build,
        "corpus": shape,
        "server": settings,
        "round_trip": round_trip,
        "recall": recall,
        "benchmark": bench,
        "upkeep": upkeep,
        "upkeep_writes": upkeep_writes_figures,
        "worker": worker,
        "model_latency": model_latency,
        "explain": explain,
    }


def begin(label: str, command: str, seed: int, owners: int | None, plan: Plan) -> dict:
    """What every report's raw figures start with: what ran, when, on which machine."""
    started = datetime.datetime.now(datetime.UTC)
    return {
        "label": label,
        "date": started.strftime("%Y-%m-%d"),
        "started_at": started.isoformat(timespec="seconds"),
        "command": command,
        "seed": seed,
        "owners": owners,
        "plan": plan.__dict__,
        "machine": machine(),
    }


def end(results: dict) -> None:
    """When the run finished, how long it took, and the machine's load then."""
    finished = datetime.datetime.now(datetime.UTC)
    results["finished_at"] = finished.isoformat(timespec="seconds")
    results["seconds"] = round((finished - datetime.datetime.fromisoformat(results["started_at"])).total_seconds(), 1)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]


def run(
    root: Path,
    sizes: list[int],
    label: str,
    out_dir: Path,
    seed: int = DEFAULT_SEED,
    plan: Plan | None = None,
    command: str = "make bench",
    say: Callable[[str], None] = print,
    owners: int | None = None,
) -> tuple[Path, Path]:
    """Measure every size in order and write one report; returns the .md and .json paths."""
    results = begin(label, command, seed, owners, plan or Plan()) | {"sizes": []}
    for size in sizes:
        say(f"== {size:,} memories ==")
        this_plan = dataclasses.replace(plan or Plan(), worker=(plan or Plan()).worker and size == sizes[-1])
        results["sizes"].append(measure_size(root, size, seed, this_plan, say, owners=owners))
    end(results)
    results["targets"] = report.assess(results["sizes"][-1])
    return report.write(results, out_dir)
