"""The worker tells the truth: deterministic mode needs no model key, handled and failed rows are
reported apart and a run where every row failed exits non-zero, `set-key` takes only providers litellm
knows, and a bug in the worker crashes it loudly with the row released instead of burning attempts."""

from __future__ import annotations

import re

import psycopg
import pytest

from tests.support import (
    GENERATION_MODEL,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    benchmark,
    default_answer,
    fetch,
    set_settings,
)
from tests.worker.conftest import seed_queued_judgments
from zm_roi import embeddings
from zm_roi.cli import main
from zm_roi.worker import Worker, WorkerConfig

CONFIG = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)


def worker_cli(monkeypatch, worker_url: str, *, key: str | None) -> int:
    monkeypatch.setenv("ZM_WORKER_DB_URL", worker_url)
    monkeypatch.setenv("ZM_GENERATION_MODEL", GENERATION_MODEL)
    monkeypatch.setenv("ZM_JUDGE_MODEL", JUDGE_MODEL)
    monkeypatch.setenv("ZM_WORKER_CONCURRENCY", "2")
    if key is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    # Nothing listens here: a call that reaches the network fails at once, as a provider outage would.
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return main(["worker", "--once"])


def test_worker_once_in_deterministic_mode_needs_no_key(worker_url, deterministic_mode, monkeypatch, caplog):
    caplog.set_level("INFO", logger="zm_roi")
    assert worker_cli(monkeypatch, worker_url, key=None) == 0
    assert "no row needs a model" in caplog.text
    assert "0 rows handled: 0 succeeded, 0 failed" in caplog.text


def test_the_worker_embeds_templated_questions_with_no_model_key(
    db_url, worker_url, deterministic_mode, owners, monkeypatch, caplog
):
    """Deterministic mode queues each templated question's embedding for the worker, the one role that
    reads questions; embedding needs no provider key, so the keyless worker does it and exits 0."""
    caplog.set_level("INFO", logger="zm_roi")
    owner = owners.create(KNOWLEDGE[:2])
    assert benchmark(db_url, owner)["status"] == "started"
    monkeypatch.setenv("ZM_EMBEDDING_MODEL", embeddings.OFFLINE_MODEL)
    assert worker_cli(monkeypatch, worker_url, key=None) == 0
    assert "2 rows handled: 2 succeeded, 0 failed" in caplog.text
    probes = fetch(
        db_url,
        """select question_embedding_model, question_embedding_minilm_model, question_embedding_minilm is not null
                  as has_minilm from roi.probes where owner_id = %s""",
        (owner,),
    )
    both = {
        "question_embedding_model": embeddings.OFFLINE_MODEL,
        "question_embedding_minilm_model": embeddings.MINILM_MODEL,
        "has_minilm": True,
    }
    assert probes == [both] * 2, "each question gets both offline embeddings"
    assert fetch(db_url, "select count(*)::int as n from roi.work where owner_id = %s", (owner,)) == [{"n": 0}]
    metered = fetch(
        db_url,
        """select model, count(*)::int as calls from public.usage_events
           where owner_id = %s and purpose = 'embedding' and probe_id is not null group by 1 order by 1""",
        (owner,),
    )
    assert metered == sorted(
        [{"model": embeddings.MINILM_MODEL, "calls": 2}, {"model": embeddings.OFFLINE_MODEL, "calls": 2}],
        key=lambda row: row["model"],
    ), "one usage event per model call"


def test_a_worker_whose_every_row_failed_says_so_and_exits_non_zero(
    db_url, worker_url, llm_mode, owners, monkeypatch, capsys, caplog
):
    caplog.set_level("INFO", logger="zm_roi")
    owner = owners.create(KNOWLEDGE[:2])
    assert benchmark(db_url, owner)["status"] == "generating"
    assert worker_cli(monkeypatch, worker_url, key="sk-nobody-answers") == 2
    assert "2 rows handled: 0 succeeded, 2 failed" in caplog.text
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("zm-roi: every row failed (2 of 2); 2 still queued will be retried"), err
    pending = fetch(db_url, "select attempts, last_error from roi.work where owner_id = %s", (owner,))
    assert [p["attempts"] for p in pending] == [1, 1] and all("Connection" in p["last_error"] for p in pending)


def test_a_worker_whose_every_row_was_given_up_on_does_not_promise_a_retry(
    db_url, worker_url, llm_mode, owners, monkeypatch, capsys
):
    """Before: "every row failed (2 of 2; they will be retried)" when both judgments were recorded as skipped."""
    owner = owners.create(KNOWLEDGE[:2])
    run_id = seed_queued_judgments(db_url, owner, 2)
    set_settings(db_url, max_attempts=1)
    assert worker_cli(monkeypatch, worker_url, key="sk-nobody-answers") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("zm-roi: every row failed (2 of 2) and none is queued again"), err
    assert "will be retried" not in err[-1]
    skipped = fetch(db_url, "select count(*) as n from roi.verdicts where run_id = %s and skipped", (run_id,))
    assert skipped == [{"n": 2}]


@pytest.mark.parametrize(
    ("provider", "expected"),
    [("openia", "did you mean openai?"), ("made_up_provider", "such as openai or anthropic")],
)
def test_set_key_accepts_only_providers_litellm_knows(db_url, owners, monkeypatch, capsys, provider, expected):
    owner = owners.create(KNOWLEDGE[:1])
    monkeypatch.setenv("ZM_DB_URL", db_url)
    monkeypatch.setenv("ZM_KEY_ENCRYPTION_KEY", "a passphrase")
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("sk-some-key\n"))
    assert main(["set-key", "--user", owners.email(owner), "--provider", provider]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err
    assert fetch(db_url, "select 1 from roi.provider_keys where owner_id = %s", (owner,)) == []


def test_a_bug_in_the_worker_crashes_it_with_the_row_released(db_url, worker_url, llm_mode, owners):
    owner = owners.create(KNOWLEDGE[:1])
    assert benchmark(db_url, owner)["status"] == "generating"

    def buggy(model: str, prompt: str):
        raise TypeError("an argument this code should never pass")

    model = ScriptedModel(buggy)
    worker = Worker(worker_url, CONFIG, model)
    with pytest.raises(TypeError, match="should never pass"):
        worker.run(once=True)
    [probe] = fetch(
        db_url,
        """select p.state, w.attempts, w.lease_until, w.last_error from roi.probes p
           join roi.work w on w.probe_id = p.id where p.owner_id = %s""",
        (owner,),
    )
    assert probe["state"] == "pending" and probe["attempts"] == 1
    assert probe["lease_until"] is None, "released at once, not left for its lease to run out"
    assert probe["last_error"].startswith("worker bug: TypeError"), probe["last_error"]
    assert worker.failed == 0, "a bug is not a model failure"

    # A retryable failure (the provider's) is still a row failure the queue retries, not a crash.
    fetch(db_url, "update roi.work set run_after = now() where owner_id = %s returning 1", (owner,))
    flaky = Worker(worker_url, CONFIG, ScriptedModel(lambda model, prompt: RuntimeError("503 from the provider")))
    assert flaky.run(once=True) == 1 and flaky.failed == 1
    fetch(db_url, "update roi.work set run_after = now() where owner_id = %s returning 1", (owner,))
    assert Worker(worker_url, CONFIG, ScriptedModel(default_answer)).run(once=True) == 1
    [probe] = fetch(db_url, "select state from roi.probes where owner_id = %s", (owner,))
    assert probe["state"] == "active"


def test_a_reply_with_no_choice_is_metered_and_retried(db_url, worker_url, llm_mode, owners):
    """A content filter can answer with no choice at all; the provider billed the call all the same."""
    owner = owners.create(KNOWLEDGE[:1])
    assert benchmark(db_url, owner)["status"] == "generating"
    scripted = ScriptedModel(default_answer)

    def filtered(**kwargs):
        response = scripted(**kwargs)
        response.choices = []
        return response

    worker = Worker(worker_url, CONFIG, filtered)
    assert worker.run(once=True) == 1 and worker.failed == 1
    [probe] = fetch(
        db_url,
        """select p.state, w.attempts, w.last_error from roi.probes p
           join roi.work w on w.probe_id = p.id where p.owner_id = %s""",
        (owner,),
    )
    assert probe["state"] == "pending" and probe["attempts"] == 1 and probe["last_error"], probe
    events = fetch(db_url, "select purpose, input_tokens from public.usage_events where owner_id = %s", (owner,))
    assert [e["purpose"] for e in events] == ["probe_generation"] and events[0]["input_tokens"] > 0


@pytest.mark.parametrize("value", ["0", "-2", "eight", "65"])
def test_a_bad_worker_concurrency_is_one_clear_error(monkeypatch, capsys, value):
    monkeypatch.setenv("ZM_WORKER_CONCURRENCY", value)
    assert main(["worker", "--once"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ZM_WORKER_CONCURRENCY must be a whole number from 1 to 64" in err


def test_worker_once_counts_rows_not_attempts(db_url, worker_url, llm_mode, owners):
    """Before: every attempt counted as a row ("40 rows handled" for 9 rows). Two rows whose model calls
    fail after 3 s: each is due again (backoff e^1 ≈ 2.7 s) while the lane is busy with the other, so
    the one drain makes four attempts on two rows."""
    import time

    owner = owners.create(KNOWLEDGE[:1])
    seed_queued_judgments(db_url, owner, 2)

    def slow_outage(**kwargs):
        time.sleep(3)
        raise OSError("the provider is down")

    worker = Worker(worker_url, WorkerConfig(GENERATION_MODEL, JUDGE_MODEL, concurrency=1), complete=slow_outage)
    worker.run(once=True)
    attempts = fetch(db_url, "select sum(attempts)::int as n from roi.work where owner_id = %s", (owner,))[0]["n"]
    assert attempts >= 3, "the scenario needs a row attempted twice in one drain"
    assert (worker.handled, worker.attempts) == (2, attempts)
    assert (worker.succeeded, worker.failed) == (0, 2)


def test_worker_once_says_what_waits_out_its_backoff_and_when_it_is_next_due(
    db_url, worker_url, llm_mode, owners, monkeypatch, caplog
):
    """Before: "0 rows handled" and exit 0, not a word about the rows waiting while the tile says judging."""
    caplog.set_level("INFO", logger="zm_roi")
    owner = owners.create(KNOWLEDGE[:1])
    seed_queued_judgments(db_url, owner, 3)
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "update roi.work set attempts = 1, run_after = now() + interval '90 seconds' where owner_id = %s", (owner,)
        )
    assert worker_cli(monkeypatch, worker_url, key="sk-unused") == 0
    assert "0 rows handled: 0 succeeded, 0 failed" in caplog.text
    waiting = re.search(
        r"3 rows wait out their backoff; the next is due in (\d+) s \(at \d\d:\d\d:\d\d UTC\)", caplog.text
    )
    assert waiting, caplog.text
    assert 60 <= int(waiting.group(1)) <= 90
