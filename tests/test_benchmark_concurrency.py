"""One run per owner, strictly: concurrent calls by one owner start exactly one run, while owners
never wait for each other. Each test names the interleaving it forces."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support import activate_pending_probes, benchmark, user_with_knowledge
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

    started = [a for a in answers if a["status"] == "started"]
    assert len(started) == 1, answers
    assert [a["status"] for a in answers].count("in_progress") == callers - 1
    assert {a["run_id"] for a in answers if a["status"] == "in_progress"} == {started[0]["run_id"]}
    assert run_count(db_url, owner) == 1
    reliability.record("concurrency", f"{callers} simultaneous calls by one owner", tried=callers, lost=0)


def test_fifty_owners_calling_at_once_each_get_their_run(db_url, email, deterministic_mode, reliability):
    owners = [user_with_knowledge(db_url, f"{n}-{email}", count=3) for n in range(50)]
    answers = concurrent_calls(db_url, owners)
    assert [a["status"] for a in answers] == ["started"] * 50
    with psycopg.connect(db_url) as conn:
        complete = conn.execute(
            """select count(*) from roi.runs r join roi.run_closures c on c.run_id = r.id
               where r.owner_id = any(%s) and c.reason = 'complete'""",
            (owners,),
        ).fetchone()[0]
    assert complete == 50
    reliability.record("concurrency", "50 owners calling at once", tried=50, lost=50 - complete)


def test_calls_queued_behind_a_held_lock_still_start_one_run(db_url, email, llm_mode):
    # c0 holds the owner's lock; c1..c10 all block; c0 releases; one starts, nine answer in_progress
    # with the id of the run the first one created while they waited.
    owner = user_with_knowledge(db_url, email, count=3)
    benchmark(db_url, owner)
    activate_pending_probes(db_url, owner)
    with psycopg.connect(db_url) as holder:
        holder.execute("select pg_advisory_xact_lock(roi.owner_lock_key(%s))", (owner,))
        with ThreadPoolExecutor(max_workers=10) as pool:
            futures = [pool.submit(benchmark, db_url, owner) for _ in range(10)]
            holder.commit()
            answers = [f.result(timeout=60) for f in futures]
    assert sorted(a["status"] for a in answers) == ["in_progress"] * 9 + ["started"]
    assert run_count(db_url, owner) == 1


def test_deterministic_runs_by_one_owner_never_overlap(db_url, email, deterministic_mode):
    # c1..c10 race in deterministic mode, where a run completes inside its call: later calls may start
    # their own run, but each begins only after the previous one closed.
    owner = user_with_knowledge(db_url, email, count=5)
    answers = concurrent_calls(db_url, [owner] * 10)
    assert all(a["status"] in ("started", "in_progress") for a in answers), answers
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            """select r.started_at, c.closed_at from roi.runs r join roi.run_closures c on c.run_id = r.id
               where r.owner_id = %s order by r.started_at""",
            (owner,),
        ).fetchall()
    assert len(rows) == sum(a["status"] == "started" for a in answers)
    for (_, closed), (next_start, _) in zip(rows, rows[1:], strict=False):
        assert closed <= next_start


def test_two_owners_calling_at_once_both_start(db_url, email, llm_mode):
    # Owner A's lock is held by c0 the whole time; owner B's call still starts: locks are per owner.
    owner_a = user_with_knowledge(db_url, "a-" + email, count=2)
    owner_b = user_with_knowledge(db_url, "b-" + email, count=2)
    for owner in (owner_a, owner_b):
        benchmark(db_url, owner)
        activate_pending_probes(db_url, owner)
    with psycopg.connect(db_url) as holder:
        holder.execute("select pg_advisory_xact_lock(roi.owner_lock_key(%s))", (owner_a,))
        with ThreadPoolExecutor(max_workers=2) as pool:
            call_a = pool.submit(benchmark, db_url, owner_a)
            assert pool.submit(benchmark, db_url, owner_b).result(timeout=30)["status"] == "started"
            assert not call_a.done(), "owner A waits for their own lock only"
            holder.commit()
            assert call_a.result(timeout=30)["status"] == "started"
