"""The database stopped with `pg_ctl stop -m immediate` (a crash) while judgments are queued and one
is in a worker's hands: after restart the same long-running worker reconnects, the run completes,
and every probe ends with exactly one verdict. On a cluster of its own, since it is crashed on purpose."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest

from tests.conftest import throwaway_cluster
from tests.support import (
    GENERATION_MODEL,
    GOOD_VERDICT,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    benchmark,
    question_for,
    wait_for,
)
from zm_roi import localdb
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.worker import Worker, WorkerConfig


@pytest.fixture
def crashable():
    with throwaway_cluster() as own:
        with psycopg.connect(own.url()) as conn:
            conn.execute("update roi.settings set extractor = 'llm', lease_duration = interval '2 seconds'")
        yield own


def test_a_crashed_database_loses_no_judgment_and_doubles_none(crashable, reliability):
    url = crashable.url()
    with psycopg.connect(url) as conn, conn.transaction():
        insert_memories(conn, [MemoryLine.model_validate(m) for m in KNOWLEDGE[:4]], Target("crash@example.test"))
        owner = conn.execute("select id from auth.users where email = 'crash@example.test'").fetchone()[0]

    in_flight, resume = threading.Event(), threading.Event()

    def answer(model: str, prompt: str) -> str:
        if model == GENERATION_MODEL:
            return question_for(prompt)
        if not in_flight.is_set():
            in_flight.set()  # the first judgment is in the worker's hands when the database dies
            resume.wait(timeout=60)
        return json.dumps(GOOD_VERDICT)

    config = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL, poll_seconds=0.2)
    worker = Worker(crashable.url(user="roi_worker", password=localdb.WORKER_PASSWORD), config, ScriptedModel(answer))
    assert benchmark(url, owner)["status"] == "generating"
    assert Worker(worker.db_url, config, ScriptedModel(answer)).run(once=True) == 4
    started = benchmark(url, owner)
    assert started["status"] == "started" and started["probes"] == 4

    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        assert in_flight.wait(timeout=30)
        crashable.stop("immediate")
        crashable.start()
        resume.set()

        def closed() -> bool:
            with psycopg.connect(url) as conn:
                return (
                    conn.execute(
                        "select count(*) from roi.run_closures where run_id = %s", (started["run_id"],)
                    ).fetchone()[0]
                    == 1
                )

        closed_in_time = wait_for(closed, fail=False)
    finally:
        resume.set()
        worker.stop()
        thread.join(timeout=30)

    with psycopg.connect(url) as conn:
        verdicts = conn.execute(
            "select probe_id, skipped from roi.verdicts where run_id = %s", (started["run_id"],)
        ).fetchall()
        closure = conn.execute("select reason from roi.run_closures where run_id = %s", (started["run_id"],)).fetchone()
    reason = closure[0] if closure else None
    # Measured before any assert: a probe with no verdict, a second verdict or a skipped one is a loss.
    judged = {probe for probe, skipped in verdicts if not skipped}
    reliability.record(
        "crashes",
        "database killed (immediate shutdown) with a judgment in hand",
        tried=4,
        lost=(4 - len(judged)) + (len(verdicts) - len({probe for probe, _ in verdicts})),
    )
    assert closed_in_time, "the run closed after the restart"
    assert len(verdicts) == 4 and len({probe for probe, _ in verdicts}) == 4, "one verdict per probe"
    assert [skipped for _, skipped in verdicts] == [False] * 4, "every probe judged, none lost to the crash"
    assert reason == "complete"
