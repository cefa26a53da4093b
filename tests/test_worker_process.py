"""`zm-roi worker` as a real process, against a local OpenAI-compatible endpoint given by the standard
environment variables (as a self-hosted model would be): killed with SIGKILL mid-judgment it loses
nothing and doubles nothing once its lease runs out; SIGTERM lets it finish the row in hand.

The endpoint is a small HTTP server in this test: it reports its own token counts (so the meter is
seen to record what the provider said) and can hold a judge call open until the test lets it go."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT
from tests.support import as_user
from tests.worker_support import (
    GENERATION_MODEL,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    benchmark,
    default_answer,
    fetch,
    set_settings,
)
from zm_roi.worker import Worker, WorkerConfig

CONFIG = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)


def worker_env(worker_url: str, base_url_variable: str, base_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_BASE", "OPENAI_BASE_URL")}
    env.update(
        {
            "ZM_WORKER_DB_URL": worker_url,
            "ZM_GENERATION_MODEL": GENERATION_MODEL,
            "ZM_JUDGE_MODEL": JUDGE_MODEL,
            "ZM_WORKER_POLL_SECONDS": "1",
            "OPENAI_API_KEY": "sk-local-endpoint",
            base_url_variable: base_url,
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    return env


def start_worker(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "zm_roi.cli", "worker", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_with_questions(db_url: str, worker_url: str, owner) -> str:
    """Questions written (in-process, mocked), then a run started: its judgments are queued."""
    assert benchmark(db_url, owner)["status"] == "generating"
    Worker(worker_url, CONFIG, ScriptedModel(default_answer)).run(once=True)
    started = benchmark(db_url, owner)
    assert started["status"] == "started"
    return started["run_id"]


def leased_rows(db_url: str, run_id: str) -> list[dict]:
    return fetch(
        db_url,
        """select probe_id, attempts, lease_until > now() as leased from roi.judgments
           where run_id = %s and lease_until is not null""",
        (run_id,),
    )


def test_a_worker_killed_mid_judgment_loses_nothing_and_doubles_nothing(
    db_url, worker_url, llm_mode, owners, fake_openai, reliability
):
    set_settings(db_url, lease_duration="15 seconds")
    owner = owners.create(KNOWLEDGE[:2])
    run_id = run_with_questions(db_url, worker_url, owner)
    env = worker_env(worker_url, "OPENAI_API_BASE", fake_openai.url)

    fake_openai.hold_next_judgment()
    victim = start_worker(env)
    try:
        assert fake_openai.held.wait(120), "the worker never asked the endpoint"
        [held] = leased_rows(db_url, run_id)
        assert held["attempts"] == 1 and held["leased"]
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    finally:
        victim.kill()
        victim.communicate()
    assert victim.returncode == -signal.SIGKILL

    # While the dead worker's lease runs, another worker leaves that row alone and judges the other.
    assert leased_rows(db_url, run_id)[0]["leased"], "the lease must still run for this step to mean anything"
    assert Worker(worker_url, CONFIG, ScriptedModel(default_answer)).run(once=True) == 1
    assert [(r["probe_id"], r["attempts"]) for r in leased_rows(db_url, run_id)] == [(held["probe_id"], 1)]

    # Once the lease has run out, a fresh worker process finishes it, through the same endpoint.
    deadline = time.monotonic() + 30
    while leased_rows(db_url, run_id)[0]["leased"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    finisher = subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", "worker", "--once"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finisher.returncode == 0, finisher.stderr
    rows = [line for line in finisher.stderr.splitlines() if " judgment run=" in line]
    assert len(rows) == 1, finisher.stderr
    assert f"probe={held['probe_id']}" in rows[0] and "attempt=2: verdict recorded" in rows[0]

    verdicts = fetch(
        db_url, "select probe_id, count(*)::int as n from roi.verdicts where run_id = %s group by 1", (run_id,)
    )
    # Measured before any assert: a probe without a verdict is lost, a second verdict is a duplicate.
    reliability.record(
        "crashes",
        "worker killed with SIGKILL mid-judgment",
        tried=2,
        lost=(2 - len(verdicts)) + sum(v["n"] - 1 for v in verdicts),
    )
    assert len(verdicts) == 2 and {v["n"] for v in verdicts} == {1}, "one verdict per probe, none twice"
    assert as_user(db_url, owner, "select status from public.roi_benchmark_runs")[0]["status"] == "complete"

    # The endpoint's own token counts were recorded for the call it answered; the killed call never
    # came back, so it had nothing to report.
    [event] = fetch(
        db_url,
        "select model, input_tokens, output_tokens from public.usage_events "
        "where probe_id = %s and purpose = 'judgment'",
        (held["probe_id"],),
    )
    assert event == {"model": JUDGE_MODEL, "input_tokens": 123, "output_tokens": 45}
    judged = [r for r in fake_openai.requests if r["model"] == "zm-test-judge"]
    assert len(judged) == 2 and judged[0]["path"].endswith("/chat/completions")
    assert {r["auth"] for r in judged} == {"Bearer sk-local-endpoint"}


def test_sigterm_finishes_the_row_in_hand_then_exits(db_url, worker_url, llm_mode, owners, fake_openai):
    owner = owners.create(KNOWLEDGE[:1])
    run_id = run_with_questions(db_url, worker_url, owner)
    fake_openai.hold_next_judgment()
    worker = start_worker(worker_env(worker_url, "OPENAI_BASE_URL", fake_openai.url))
    try:
        assert fake_openai.held.wait(120), "the worker never asked the endpoint"
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert worker.poll() is None, "it waits for the model's answer to the row in hand"
        fake_openai.let_go.set()
        _, stderr = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, stderr
    assert "stopping after the row in hand" in stderr
    assert "attempt=1: verdict recorded" in stderr
    assert leased_rows(db_url, run_id) == []
    assert as_user(db_url, owner, "select status from public.roi_benchmark_runs")[0]["status"] == "complete"
