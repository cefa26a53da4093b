"""Upkeep proportional to what changed (issue 13): an idle cycle, a cycle after one write to one
project (a new memory; then an invalidation), and a cycle after 100 new memories, then 100
invalidations, spread over 100 projects. Each write is made as a member of the project (role
`authenticated`, RLS applied), so the triggers mark layers exactly as a user's write would; the cycle
then visits the owners of the marked layers, and the report sets how many it visited beside how many
it should have: the members with a pool that is not full after an addition (a full pool has nothing
to take), every member with a pool after an invalidation (it may retire a probe)."""

from __future__ import annotations

import psycopg

from zm_roi.identity import act_as, claims_for
from zm_roi_bench.sql import bench_query
from zm_roi_bench.timing import Series, timed

SPREAD = 100


def _write(conn: psycopg.Connection, target: tuple, title: str, invalidate: bool = False) -> int:
    project_id, author, *_ = target
    with conn.transaction():
        act_as(conn, claims_for(author))
        if invalidate:
            return conn.execute(
                bench_query("invalidate_project_memory"), {"author": author, "project_id": project_id}
            ).rowcount
        conn.execute(bench_query("write_project_memory"), {"author": author, "project_id": project_id, "title": title})
        return 1


def measure(url: str, idle_cycles: int, one_write_cycles: int, spread_cycles: int) -> dict:
    idle = Series()
    one = Series()
    invalidation = Series()
    spread = Series()
    spread_invalidations = Series()
    cycles: list[dict] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(bench_query("upkeep"))  # take the marks earlier measurements left
        for _ in range(idle_cycles):
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            idle.add(ms)
        idle_owners = row[0]["owners"] if idle_cycles else None
        wanted = 2 * one_write_cycles + 2 * SPREAD * spread_cycles
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
        for _ in range(one_write_cycles):
            target = next(take)
            if not _write(conn, target, "", invalidate=True):
                continue  # the author has no live memory in that project
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            invalidation.add(ms)
            cycles.append({"kind": "one_invalidation", "ms": round(ms, 1), "expected": target[3], **row[0]})
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
        for _ in range(spread_cycles):
            batch = [next(take) for _ in range(SPREAD)]
            projects = [t[0] for t in batch if _write(conn, t, "", invalidate=True)]
            expected = conn.execute(bench_query("pool_owners_of_projects_any"), {"projects": projects}).fetchone()[0]
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            spread_invalidations.add(ms)
            cycles.append(
                {
                    "kind": "spread_invalidations",
                    "ms": round(ms, 1),
                    "expected": expected,
                    "invalidated": len(projects),
                    **row[0],
                }
            )
    return {
        "status": "measured",
        "idle": idle.summary(),
        "idle_owners_visited": idle_owners,
        "one_write": one.summary(),
        "one_invalidation": invalidation.summary(),
        "spread_writes": spread.summary(),
        "spread_invalidations": spread_invalidations.summary(),
        "spread": SPREAD,
        "cycles": cycles,
    }
