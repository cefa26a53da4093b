"""The whole deterministic cycle as a user sees it, through the local transport (a verified token,
then PostgREST's role and claims): call, verdicts, tile with rate, interval and hint, a two-point
trend, and upkeep retiring the probe of an invalidated memory before topping the pool back up."""

from __future__ import annotations

import psycopg

from tests.support import benchmark_user, knowledge
from zm_roi.transport import LocalTransport


def test_the_deterministic_cycle_end_to_end(cluster, email, deterministic_mode):
    with benchmark_user(cluster, email, knowledge(24)) as user:
        transport = LocalTransport(cluster.url(), cluster.jwt_secret(), user.token)
        assert transport.tile()["state"] == "invite"

        first = transport.benchmark_memory()
        assert first["status"] == "started" and first["probes"] == 20

        runs = transport.runs()
        assert [(r["status"], r["judged_count"], r["skipped_count"]) for r in runs] == [("complete", 20, 0)]
        tile = transport.tile()
        assert tile["state"] == "ready"
        assert tile["exclusive_rate"] == runs[0]["exclusive_count"] / 20
        assert tile["exclusive_rate_low"] <= tile["exclusive_rate"] <= tile["exclusive_rate_high"]
        assert tile["hint"] == f"{runs[0]['exclusive_count']} of 20 questions only memory answered"
        assert len(tile["trend"]) == 1

        assert transport.benchmark_memory()["status"] == "started"
        assert len(transport.tile()["trend"]) == 2

        with psycopg.connect(cluster.url()) as conn:
            probed = conn.execute(
                "select memory_id from roi.probes where owner_id = %s and state = 'active' limit 1", (user.id,)
            ).fetchone()[0]
            conn.execute("update public.memories set invalidated_at = now() where id = %s", (probed,))
            conn.execute(
                "insert into public.memories (author_id, scope, kind, title, body) "
                "values (%s, 'personal', 'gotcha', 'A fresh gotcha', 'Learned today.')",
                (user.id,),
            )
            conn.commit()
            conn.execute("select roi.upkeep()")
            conn.commit()
            retired = conn.execute(
                "select state, retired_reason from roi.probes where owner_id = %s and memory_id = %s",
                (user.id, probed),
            ).fetchone()
            active = conn.execute(
                "select count(*) from roi.probes where owner_id = %s and state = 'active'", (user.id,)
            ).fetchone()[0]
            fresh = conn.execute(
                "select state from roi.probes where owner_id = %s and source_title = 'A fresh gotcha'", (user.id,)
            ).fetchone()
        assert retired == ("retired", "source_invalidated")
        assert active == 20
        assert fresh == ("active",)
