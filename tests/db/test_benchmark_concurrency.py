"""One run per owner, strictly: concurrent calls by one owner start exactly one run, while owners
never wait for each other. Each test names the interleaving it forces."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support import activate_pending_probes, benchmark, user_with_knowledge, wait_for
from zm_roi.identity import act_as, claims_for


def concurrent_calls(db_url: str, user_ids: list) -> list[dict]:
    """Every caller connects and becomes its user first; then a barrier releases all calls at once."""
    barrier = threading.Barrier(len(user_ids))

    def call(user_id):
        with psycopg.connect(db_url, row_factory=dict_row) as conn, conn.transaction():
            act_as(conn, claims_for(user_id))
            barrier.wait(timeout=60)
            return conn.execute("select public.benchmark_memory() as r").fetchone()["r"]

    with ThreadPoolExecutor(max_workers=len(user_ids)) as pool:
        futures = [pool.submit(call, user_id) for user_id in user_ids]
        return [future.result(timeout=120) for future in futures]


def blocked_on_advisory_lock(observer, statement_like: str = "%benchmark_memory%") -> int:
    """Backends waiting on an advisory lock while running a benchmark call (observed, never assumed)."""
    return observer.execute(
        """select count(*) from pg_stat_activity
           where wait_event_type = 'Lock' and wait_event = 'advisory' and query like %s""",
        (statement_like,),
    ).fetchone()[0]


def run_count(db_url: str, user_id) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute("select count(*) from roi.runs where owner_id = %s", (user_id,)).fetchone()[0]


@pytest.mark.parametrize("callers", [20, 50])
def test_concurrent_calls_by_one_owner_start_exactly_one_run(db_url, email, llm_mode, reliability, callers):
    # c0 queues the pool; the worker writes it; c1..cN race; exactly one starts, the rest see in_progress.
    owner = user_with_knowledge(db_url, email, count=5)
    assert benchmark(db_url, owner)["status"] == "generating"
    assert activate_pending_probes(db_url, owner) == 5

    answers = concurrent_calls(db_url, [owner] * callers)

    # Measured before any assert: every call that did not end as the one run or an in_progress pointing
    # at it, plus every run beyond the one (a stacked run), is a loss or a duplicate.
    started = [a for a in answers if a["status"] == "started"]
    runs = run_count(db_url, owner)
    first_run = started[0]["run_id"] if started else None
    answered_right = len(started[:1]) + sum(a["status"] == "in_progress" and a["run_id"] == first_run for a in answers)
    reliability.record(
        "concurrency",
        f"{callers} simultaneous calls by one owner",
        tried=callers,
        lost=(callers - answered_right) + abs(runs - 1),
    )
    assert len(started) == 1, answers
    assert [a["status"] for a in answers].count("in_progress") == callers - 1
    assert {a["run_id"] for a in answers if a["status"] == "in_progress"} == {started[0]["run_id"]}
    assert runs == 1


def test_fifty_owners_calling_at_once_each_get_their_run(db_url, email, deterministic_mode, reliability):
    owners = [user_with_knowledge(db_url, f"{n}-{email}", count=3) for n in range(50)]
    answers = concurrent_calls(db_url, owners)
    with psycopg.connect(db_url) as conn:
        complete = conn.execute(
            """select count(*) from roi.runs r join roi.run_closures c on c.run_id = r.id
               where r.owner_id = any(%s) and c.reason = 'complete'""",
            (owners,),
        ).fetchone()[0]
    reliability.record("concurrency", "50 owners calling at once", tried=50, lost=abs(50 - complete))
    assert [a["status"] for a in answers] == ["started"] * 50
    assert complete == 50


def test_calls_queued_behind_a_held_lock_still_start_one_run(db_url, email, llm_mode):
    # c0 holds the owner's lock; c1..c10 all block; c0 releases; one starts, nine answer in_progress
    # with the id of the run the first one created while they waited.
    owner = user_with_knowledge(db_url, email, count=3)
    benchmark(db_url, owner)
    activate_pending_probes(db_url, owner)
    # The pool is entered first so that a failed assert closes the holder (releasing the lock) before
    # the pool waits for its calls: a failure never hangs.
    with (
        ThreadPoolExecutor(max_workers=10) as pool,
        psycopg.connect(db_url) as holder,
        psycopg.connect(db_url, autocommit=True) as observer,
    ):
        holder.execute("select pg_advisory_xact_lock(roi.owner_lock_key(%s))", (owner,))
        futures = [pool.submit(benchmark, db_url, owner) for _ in range(10)]
        # Only once all ten are seen waiting on the owner's lock does c0 let go.
        wait_for(lambda: blocked_on_advisory_lock(observer) == 10)
        assert not any(f.done() for f in futures), "no call got past the held lock"
        assert run_count(db_url, owner) == 0
        holder.commit()
        answers = [f.result(timeout=60) for f in futures]
    assert sorted(a["status"] for a in answers) == ["in_progress"] * 9 + ["started"]
    assert run_count(db_url, owner) == 1


def test_deterministic_runs_by_one_owner_never_overlap(db_url, email, deterministic_mode):
    # c0 row-locks one probe. c1 calls: takes the owner's lock, starts its run, blocks on that probe
    # mid-run. c2 calls: must wait on the owner's lock, not start a second run beside c1's. c0 commits:
    # c1 finishes; c2 gets the lock, sees the run c1 made while it waited, and answers in_progress.
    owner = user_with_knowledge(db_url, email, count=5)
    assert benchmark(db_url, owner)["status"] == "started"  # the pool exists; run 1 is closed
    with (
        ThreadPoolExecutor(max_workers=2) as pool,
        psycopg.connect(db_url) as holder,
        psycopg.connect(db_url, autocommit=True) as observer,
    ):
        holder.execute("select 1 from roi.probes where owner_id = %s and state = 'active' limit 1 for update", (owner,))
        first = pool.submit(benchmark, db_url, owner)
        wait_for(
            lambda: (
                observer.execute(
                    "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                    "and wait_event = 'transactionid' and query like '%benchmark_memory%'"
                ).fetchone()[0]
                == 1
            )
        )
        second = pool.submit(benchmark, db_url, owner)
        wait_for(lambda: blocked_on_advisory_lock(observer) == 1)
        assert not first.done() and not second.done(), "c1 is mid-run and c2 waits for it"
        holder.commit()
        answers = [first.result(timeout=60), second.result(timeout=60)]
    assert answers[0]["status"] == "started"
    assert answers[1] == {"status": "in_progress", "run_id": answers[0]["run_id"]}, "c2 started nothing beside c1"
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            """select r.id::text, r.probe_count, (select count(*) from roi.verdicts v where v.run_id = r.id)
               from roi.runs r join roi.run_closures c on c.run_id = r.id
               where r.owner_id = %s order by r.started_at""",
            (owner,),
        ).fetchall()
    assert len(rows) == 2 and rows[1][0] == answers[0]["run_id"], "the setup run and c1's run, nothing more"
    assert all(probes == verdicts for _, probes, verdicts in rows), "every run closed whole"


def test_two_owners_calling_at_once_both_start(db_url, email, llm_mode):
    # Owner A's lock is held by c0 the whole time; owner B's call still starts: locks are per owner.
    owner_a = user_with_knowledge(db_url, "a-" + email, count=2)
    owner_b = user_with_knowledge(db_url, "b-" + email, count=2)
    for owner in (owner_a, owner_b):
        benchmark(db_url, owner)
        activate_pending_probes(db_url, owner)
    with (
        ThreadPoolExecutor(max_workers=2) as pool,
        psycopg.connect(db_url) as holder,
        psycopg.connect(db_url, autocommit=True) as observer,
    ):
        holder.execute("select pg_advisory_xact_lock(roi.owner_lock_key(%s))", (owner_a,))
        call_a = pool.submit(benchmark, db_url, owner_a)
        wait_for(lambda: blocked_on_advisory_lock(observer) == 1)
        assert pool.submit(benchmark, db_url, owner_b).result(timeout=30)["status"] == "started"
        assert not call_a.done(), "owner A waits for their own lock only"
        holder.commit()
        assert call_a.result(timeout=30)["status"] == "started"


def test_a_call_that_cannot_get_the_owner_lock_in_time_answers_in_progress(db_url, email, deterministic_mode):
    # c1 completes a run. c0 holds the owner's lock and never lets go in time. c2 calls: waits
    # roi.settings.owner_lock_wait (shortened from 30 s for the test), then answers in_progress with
    # the newest run it knew, while c0 still holds the lock; nothing is started.
    owner = user_with_knowledge(db_url, email, count=3)
    first = benchmark(db_url, owner)
    assert first["status"] == "started"
    with psycopg.connect(db_url) as conn:
        conn.execute("update roi.settings set owner_lock_wait = interval '300 milliseconds'")
    with (
        ThreadPoolExecutor(max_workers=1) as pool,
        psycopg.connect(db_url) as holder,
    ):
        holder.execute("select pg_advisory_xact_lock(roi.owner_lock_key(%s))", (owner,))
        # The holder lets go only when this block ends, so the answer below came while it held the lock.
        answer = pool.submit(benchmark, db_url, owner).result(timeout=30)
    assert answer == {"status": "in_progress", "run_id": first["run_id"]}
    assert run_count(db_url, owner) == 1
