"""The whole deterministic cycle as a user sees it: call, verdicts, tile, trend, and upkeep
retiring a probe whose memory was invalidated before topping the pool back up."""

from __future__ import annotations

import psycopg

from tests.support import as_user, benchmark, user_with_knowledge


def tile(db_url, user_id) -> dict:
    rows = as_user(db_url, user_id, "select * from public.roi_benchmark_tile")
    assert len(rows) == 1
    return rows[0]


def test_the_deterministic_cycle_end_to_end(db_url, email, deterministic_mode):
    owner = user_with_knowledge(db_url, email, count=24)
    assert tile(db_url, owner)["state"] == "invite"

    first = benchmark(db_url, owner)
    assert first["status"] == "started" and first["probes"] == 20

    runs = as_user(db_url, owner, "select * from public.roi_benchmark_runs")
    assert [(r["status"], r["judged_count"], r["skipped_count"]) for r in runs] == [("complete", 20, 0)]
    shown = tile(db_url, owner)
    assert shown["state"] == "ready"
    assert shown["exclusive_rate"] == runs[0]["exclusive_count"] / 20
    assert shown["exclusive_rate_low"] <= shown["exclusive_rate"] <= shown["exclusive_rate_high"]
    assert shown["hint"] == f"{runs[0]['exclusive_count']} of 20 questions a bare agent could not answer"
    assert len(shown["trend"]) == 1

    assert benchmark(db_url, owner)["status"] == "started"
    assert len(tile(db_url, owner)["trend"]) == 2

    with psycopg.connect(db_url) as conn:
        probed = conn.execute(
            "select memory_id from roi.probes where owner_id = %s and state = 'active' limit 1", (owner,)
        ).fetchone()[0]
        conn.execute("update public.memories set invalidated_at = now() where id = %s", (probed,))
        conn.execute(
            "insert into public.memories (author_id, scope, kind, title, body) "
            "values (%s, 'personal', 'gotcha', 'A fresh gotcha', 'Learned today.')",
            (owner,),
        )
        conn.commit()
        conn.execute("select roi.upkeep()")
        conn.commit()
        retired = conn.execute(
            "select state, retired_reason from roi.probes where owner_id = %s and memory_id = %s", (owner, probed)
        ).fetchone()
        active = conn.execute(
            "select count(*) from roi.probes where owner_id = %s and state = 'active'", (owner,)
        ).fetchone()[0]
        fresh = conn.execute(
            "select state from roi.probes where owner_id = %s and source_title = 'A fresh gotcha'", (owner,)
        ).fetchone()
    assert retired == ("retired", "source_invalidated")
    assert active == 20
    assert fresh == ("active",)
