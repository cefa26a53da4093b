"""Upkeep proportional to what changed (issue 13): an idle cycle, a cycle after one write to one
project, and a cycle after 100 writes spread over 100 projects. Each write is made as a member of
the project (role `authenticated`, RLS applied), so the triggers mark layers exactly as a user's
write would; the cycle then visits the owners of the marked layers, and the report sets how many it
visited beside how many it should have (the project members with a pool)."""

from __future__ import annotations

import psycopg

from zm_roi.bench.sql import bench_query
from zm_roi.bench.timing import Series, timed
from zm_roi.identity import act_as, claims_for

SPREAD = 100


def _write(conn: psycopg.Connection, target: tuple, title: str) -> None:
    project_id, author, _ = target
    with conn.transaction():
        act_as(conn, claims_for(author))
        conn.execute(bench_query("write_project_memory"), {"author": author, "project_id": project_id, "title": title})


def measure(url: str, idle_cycles: int, one_write_cycles: int, spread_cycles: int) -> dict:
    idle = Series()
    one = Series()
    spread = Series()
    cycles: list[dict] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(bench_query("upkeep"))  # take the marks earlier measurements left
        for _ in range(idle_cycles):
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            idle.add(ms)
        idle_owners = row[0]["owners"] if idle_cycles else None
        wanted = one_write_cycles + SPREAD * spread_cycles
        targets = conn.execute(bench_query("write_targets"), {"n": wanted}).fetchall()
        if not targets:
            return {"status": "no project with a member to write as"}
        take = iter(targets[i % len(targets)] for i in range(wanted))
        for n in range(one_write_cycles):
            target = next(take)
            _write(conn, target, f"Upkeep bench single write {n}")
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            one.add(ms)
            cycles.append({"kind": "one_write", "ms": round(ms, 1), "expected": target[2], **row[0]})
        for n in range(spread_cycles):
            batch = [next(take) for _ in range(SPREAD)]
            for i, target in enumerate(batch):
                _write(conn, target, f"Upkeep bench spread write {n}.{i}")
            expected = conn.execute(
                bench_query("pool_owners_of_projects"), {"projects": [t[0] for t in batch]}
            ).fetchone()[0]
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            spread.add(ms)
            cycles.append({"kind": "spread_writes", "ms": round(ms, 1), "expected": expected, **row[0]})
    return {
        "status": "measured",
        "idle": idle.summary(),
        "idle_owners_visited": idle_owners,
        "one_write": one.summary(),
        "spread_writes": spread.summary(),
        "spread": SPREAD,
        "cycles": cycles,
    }
