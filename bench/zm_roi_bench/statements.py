"""python -m zm_roi_bench.statements [--size 100k] [--rounds 3]: where a benchmark_memory() call's time
goes, statement by statement. On the bench corpus, 20 owners' full pools are benchmarked `rounds` times
each (deterministic mode, as `make bench` measures them) with pg_stat_statements tracking nested
statements; the report lists each statement's time per call, and the recalls inside beside the run's
bookkeeping (the recalls' time is public.recall's own, from pg_stat_user_functions: a run calls the
bundled recall straight from the statement that snapshots it). pg_stat_statements adds a cost of its
own to every statement it tracks, small ones most: read the shares and the ranking, not the
milliseconds. Report: bench/results/<date>-statements-<size>.md
(+ .json)."""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
import time
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from zm_roi import localdb
from zm_roi.errors import UserError
from zm_roi.identity import act_as, claims_for
from zm_roi_bench import DEFAULT_SEED, SIZES, corpus, report
from zm_roi_bench.cluster import machine, throwaway_cluster
from zm_roi_bench.sql import bench_query

TRACKING = {
    "shared_preload_libraries": "'pg_cron,pg_stat_statements'",
    "pg_stat_statements.track": "all",
    "track_functions": "'pl'",
}
OWNERS = 20
# The bench's call (queries.sql, benchmark_memory) as pg_stat_statements records it.
ENTRY = "select public.benchmark_memory()"
# The statement inside roi.configured_recall that calls the bundled recall: the recalls' own time when
# no function statistics are given (a run calls the bundled recall directly; `zm-roi recall` through it).
RECALLS = "from public.recall(question"
BUNDLED_RECALL = "public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)"


def profile(url: str, seed: int, rounds: int) -> dict:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        conn.execute("create extension if not exists pg_stat_statements with schema extensions")
        owners = [row["user_id"] for row in conn.execute(bench_query("bench_owners"), {"seed": seed, "n": OWNERS})]
        conn.commit()

        def call(owner) -> float:
            act_as(conn, claims_for(owner))
            started = time.perf_counter()
            conn.execute(bench_query("benchmark_memory"))
            conn.commit()
            return (time.perf_counter() - started) * 1000

        for owner in owners * 2:  # the first call fills the pool; the second has a run to rotate after
            call(owner)
        conn.execute("select extensions.pg_stat_statements_reset()")
        conn.execute("select pg_stat_reset_single_function_counters(%s::regprocedure)", (BUNDLED_RECALL,))
        conn.commit()
        client_ms = [call(owner) for _ in range(rounds) for owner in owners]
        statements = conn.execute(bench_query("statements_by_time")).fetchall()
    # A backend flushes its function statistics when it ends: read them from the next connection.
    with psycopg.connect(url, row_factory=dict_row) as conn:
        row = conn.execute(
            "select total_time from pg_stat_user_functions where funcid = %s::regprocedure", (BUNDLED_RECALL,)
        ).fetchone()
    return summarize(statements, client_ms, None if row is None else row["total_time"])


def summarize(statements: list[dict], client_ms: list[float], recall_total_ms: float | None = None) -> dict:
    """Each statement's time per benchmark_memory() call, and the call split into recalls and bookkeeping.
    `recall_total_ms`: public.recall's total time from pg_stat_user_functions, when tracked."""
    calls = len(client_ms)
    rows = [
        {
            "ms_per_call": round(s["total_ms"] / calls, 3),
            "executions_per_call": round(s["calls"] / calls, 2),
            "ms_each": round(s["total_ms"] / s["calls"], 4),
            "rows": s["rows"],
            "query": re.sub(r"\s+", " ", s["query"]).strip(),
        }
        for s in statements
    ]
    total = sum(s["total_ms"] for s in statements if s["query"].strip() == ENTRY)
    recalls = (
        recall_total_ms
        if recall_total_ms is not None
        else sum(s["total_ms"] for s in statements if RECALLS in s["query"])
    )
    return {
        "calls": calls,
        "client_p50_ms": round(statistics.median(client_ms), 2),
        "benchmark_memory_ms": round(total / calls, 3),
        "recalls_ms": round(recalls / calls, 3),
        "bookkeeping_ms": round((total - recalls) / calls, 3),
        "statements": rows,
    }


def render(results: dict, top: int = 30) -> str:
    lines = [
        f"# Where a benchmark_memory() call's time goes, {results['size']:,} memories",
        "",
        f"`{results['command']}`: {results['calls']} calls (20 owners with full pools, deterministic mode), "
        "pg_stat_statements with `track = all`: every statement, nested ones included, so a function's line "
        "includes the statements it runs. Client p50 "
        f"{results['client_p50_ms']} ms; inside the server {results['benchmark_memory_ms']} ms a call, of which "
        f"the 20 recalls {results['recalls_ms']} ms and the run's bookkeeping {results['bookkeeping_ms']} ms.",
        "",
        "| ms per call | executions per call | ms each | statement |",
        "| --- | --- | --- | --- |",
    ]
    for row in results["statements"][:top]:
        query = row["query"][:140].replace("|", "\\|")
        lines.append(f"| {row['ms_per_call']} | {row['executions_per_call']} | {row['ms_each']} | `{query}` |")
    m = results["machine"]
    lines += [
        "",
        report.machine_line(m),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.statements", description=__doc__)
    parser.add_argument("--size", default="100k", choices=sorted(SIZES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None, help="report folder (default: bench/results in the checkout)")
    args = parser.parse_args(argv)
    root = localdb.project_root()
    size = SIZES[args.size]
    try:
        started_machine = machine()
        with throwaway_cluster(root, settings=TRACKING) as cluster:
            corpus.build(cluster.url(), size, DEFAULT_SEED)
            results = profile(cluster.url(), DEFAULT_SEED, args.rounds)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    results.update(
        size=size,
        machine=started_machine,
        command=f"python -m zm_roi_bench.statements --size {args.size} --rounds {args.rounds}",
        date=datetime.date.today().isoformat(),
        label=f"statements-{args.size}",
    )
    report.write(results, Path(args.out) if args.out else root / "bench" / "results", render)
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
