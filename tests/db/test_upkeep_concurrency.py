"""Upkeep running while owners benchmark and memories are imported and invalidated: nothing is lost,
nothing duplicated, nobody deadlocks. Three actors, interleaved freely for a fixed number of rounds."""

from __future__ import annotations

import threading
import time

import psycopg

from tests.support import benchmark, user_with_knowledge

ROUNDS = 15
JOIN_SECONDS = 300  # for all three actors together


def test_upkeep_during_runs_and_imports_loses_and_duplicates_nothing(db_url, email, deterministic_mode, reliability):
    owners = [user_with_knowledge(db_url, f"{n}-{email}", count=8) for n in range(6)]
    errors: list[BaseException] = []
    imported = {owner: 8 for owner in owners}

    def actor(work):
        def loop():
            try:
                for round_number in range(ROUNDS):
                    work(round_number)
            except BaseException as exc:  # noqa: BLE001 - any failure is the finding
                errors.append(exc)

        # A daemon, so an actor stuck on a lock is reported below instead of holding pytest open.
        return threading.Thread(target=loop, name=work.__name__, daemon=True)

    def upkeep(_):
        with psycopg.connect(db_url) as conn:
            outcome = conn.execute("select roi.upkeep()").fetchone()[0]
        assert outcome["failures"] == 0, outcome

    def runs(round_number):
        for owner in owners:
            assert benchmark(db_url, owner)["status"] in ("started", "in_progress")

    def imports(round_number):
        with psycopg.connect(db_url) as conn:
            for owner in owners:
                conn.execute(
                    "insert into public.memories (author_id, scope, kind, title, body) "
                    "values (%s, 'personal', 'gotcha', %s, 'learned during the storm')",
                    (owner, f"Storm gotcha {round_number}"),
                )
                imported[owner] += 1
                conn.execute(
                    """update public.memories set invalidated_at = now()
                       where id = (select id from public.memories where author_id = %s and invalidated_at is null
                                   order by created_at limit 1)""",
                    (owner,),
                )

    threads = [actor(upkeep), actor(runs), actor(imports)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + JOIN_SECONDS
    for thread in threads:
        thread.join(timeout=max(0, deadline - time.monotonic()))
    # An actor still running at the deadline is stuck (a deadlock, a lock never released): a finding.
    stuck = [thread.name for thread in threads if thread.is_alive()]

    with psycopg.connect(db_url) as conn:
        conn.execute("select roi.upkeep()")
        conn.commit()
        stored = dict(
            conn.execute(
                "select author_id, count(*) from public.memories where author_id = any(%s) group by 1", (owners,)
            ).fetchall()
        )
        unfinished = conn.execute(
            """select r.id from roi.runs r left join roi.run_closures c on c.run_id = r.id
               where r.owner_id = any(%s)
                 and (c.run_id is null
                      or (select count(*) from roi.verdicts v where v.run_id = r.id) <> r.probe_count)""",
            (owners,),
        ).fetchall()
        oversized = conn.execute(
            """select owner_id from roi.probes where owner_id = any(%s) and state in ('active', 'pending')
               group by owner_id having count(*) > 20""",
            (owners,),
        ).fetchall()
        wrongly_retired = conn.execute(
            """select p.id from roi.probes p join public.memories m on m.id = p.memory_id
               where p.owner_id = any(%s) and p.retired_reason = 'source_invalidated' and m.invalidated_at is null""",
            (owners,),
        ).fetchall()
        live_unretired = conn.execute(
            """select p.id from roi.probes p join public.memories m on m.id = p.memory_id
               where p.owner_id = any(%s) and p.state = 'active' and m.invalidated_at is not null""",
            (owners,),
        ).fetchall()
        total_runs = conn.execute("select count(*) from roi.runs where owner_id = any(%s)", (owners,)).fetchone()[0]
    # Measured before any assert: unfinished runs, memories missing, pools overfilled, probes retired
    # wrongly or left active on an invalidated source, and actors that failed or never finished.
    missing = sum(abs(imported[owner] - stored.get(owner, 0)) for owner in owners)
    reliability.record(
        "concurrency",
        f"upkeep × runs × imports, {ROUNDS} rounds, {len(owners)} owners",
        tried=total_runs,
        lost=len(unfinished)
        + missing
        + len(oversized)
        + len(wrongly_retired)
        + len(live_unretired)
        + len(errors)
        + len(stuck),
    )
    assert stuck == [], "every actor finished its rounds"
    assert errors == []
    assert stored == imported, "every memory written is there"
    assert unfinished == [], "every run closed with exactly one verdict per probe"
    assert oversized == [] and wrongly_retired == [] and live_unretired == []
