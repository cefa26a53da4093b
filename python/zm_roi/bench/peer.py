"""The peer design we chose not to build, implemented honestly for the bench only.

A client drives the run itself: it fetches the owner's probes, calls recall() once per probe over
the connection, and inserts each snapshot and verdict, in one transaction under the owner's
identity, with the same lock, pool steps and append-only tables as public.benchmark_memory().
What differs is where the loop runs: here every probe costs round trips, there none. (A real
client could not open the probe gate at all: rule 3 keeps questions server-only. The bench opens it
so the comparison is about the loop, not about privacy.)
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from zm_roi.bench.sql import bench_query
from zm_roi.identity import act_as, claims_for


def client_loop_run(conn: psycopg.Connection, owner) -> dict:
    """One deterministic run for `owner`, driven from Python. Returns the outcome and round trips."""
    trips = 0
    plain = conn.cursor(row_factory=tuple_row)

    def run(name: str, params: dict | None = None) -> psycopg.Cursor:
        nonlocal trips
        trips += 1
        return plain.execute(bench_query(name), params or {})

    with conn.transaction():
        act_as(conn, claims_for(owner))
        trips += 1
        cur = conn.cursor(row_factory=dict_row)
        begun = run("peer_begin", {"owner": owner}).fetchone()
        if not begun[0]:
            return {"status": "in_progress", "round_trips": trips}
        if run("peer_open_run").fetchone()[0] is not None:
            return {"status": "in_progress", "round_trips": trips}
        trips += 1
        probes = cur.execute(bench_query("peer_probes"), {"owner": owner}).fetchall()
        if not probes:
            return {"status": "empty", "round_trips": trips}
        run_id = run("peer_start_run", {"owner": owner, "probes": len(probes)}).fetchone()[0]
        surfaced_hits = 0
        for probe in probes:
            trips += 1
            rows = cur.execute(bench_query("recall"), probe).fetchall()
            surfaced_ids = [row["memory_id"] for row in rows]
            snapshot = [
                {
                    "rank": rank,
                    "memory_id": str(row["memory_id"]),
                    "kind": row["kind"],
                    "scope": row["scope"],
                    "title": row["title"],
                    "body": row["body"],
                    "score": row["score"],
                }
                for rank, row in enumerate(rows, start=1)
            ]
            run(
                "peer_record_recall",
                {
                    "run_id": run_id,
                    "probe_id": probe["id"],
                    "owner": owner,
                    "surfaced_ids": surfaced_ids,
                    "surfaced": Jsonb(snapshot),
                },
            )
            hit = probe["memory_id"] in surfaced_ids
            surfaced_hits += hit
            run(
                "peer_record_verdict",
                {
                    "run_id": run_id,
                    "probe_id": probe["id"],
                    "owner": owner,
                    "memory_id": probe["memory_id"],
                    "with_memory": hit,
                },
            )
        run("peer_count_served", {"owner": owner})
        finished = run("peer_finish", {"run_id": run_id}).fetchone()
    return {
        "status": "started",
        "run_id": run_id,
        "probes": len(probes),
        "closed": finished[0],
        "with_memory": surfaced_hits,
        "round_trips": trips + 1,  # the commit
    }
