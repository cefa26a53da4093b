"""`zm-roi worker` as a real process, against a local OpenAI-compatible endpoint given by the standard
environment variables (as a self-hosted model would be): killed with SIGKILL holding eight judgments
it loses nothing and doubles nothing once the leases run out; SIGTERM lets it finish every row in hand.

The endpoint is a small HTTP server in this test: it reports its own token counts (so the meter is
seen to record what the provider said) and can hold a judge call open until the test lets it go."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from tests.conftest import ROOT
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
from zm_roi.settings import DEFAULT_WORKER_CONCURRENCY
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


def leased_rows(db_url: str, run_id: str) -> list[dict]:
    return fetch(
        db_url,
        """select probe_id, attempts, lease_until > now() as leased from roi.work
           where kind = 'judge' and run_id = %s and lease_until is not null""",
        (run_id,),
    )


IN_HAND = DEFAULT_WORKER_CONCURRENCY  # one process holds this many rows at once


def verdict_counts(db_url: str, run_id) -> list[int]:
    rows = fetch(db_url, "select count(*)::int as n from roi.verdicts where run_id = %s group by probe_id", (run_id,))
    return sorted(r["n"] for r in rows)


def judgment_events(db_url: str, run_id) -> list[dict]:
    return fetch(
        db_url,
        """select probe_id, model, input_tokens, output_tokens from public.usage_events
           where run_id = %s and purpose = 'judgment'""",
        (run_id,),
    )


class StderrLines:
    """The worker's log lines as they come, read by a thread, so a test can wait for one."""

    def __init__(self, process: subprocess.Popen):
        self.lines: list[str] = []
        self.seen = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            with self.seen:
                self.lines.append(line)
                self.seen.notify_all()

    def wait_for_line(self, text: str, timeout: float = 60) -> bool:
        with self.seen:
            return self.seen.wait_for(lambda: any(text in line for line in self.lines), timeout)

    def text(self) -> str:
        self.thread.join(30)
        return "".join(self.lines)


def test_a_worker_killed_with_eight_rows_in_hand_loses_none_and_doubles_none(
    db_url, worker_url, llm_mode, owners, fake_openai, reliability
):
    set_settings(db_url, lease_duration="15 seconds")
    owner = owners.create([])
    run_id = seed_queued_judgments(db_url, owner, IN_HAND + 2)
    env = worker_env(worker_url, "OPENAI_API_BASE", fake_openai.url)

    fake_openai.hold_next_judgment(IN_HAND)
    victim = start_worker(env)
    try:
        assert fake_openai.wait_until_held(IN_HAND), f"the worker never had {IN_HAND} calls in flight"
        held = leased_rows(db_url, run_id)
        assert len(held) == IN_HAND and all(r["attempts"] == 1 and r["leased"] for r in held)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    finally:
        victim.kill()
        victim.communicate()
    assert victim.returncode == -signal.SIGKILL
    held_ids = {r["probe_id"] for r in held}

    # While the dead worker's leases run, another worker leaves those rows alone and judges the rest.
    assert all(r["leased"] for r in leased_rows(db_url, run_id)), "the leases must still run for this to mean anything"
    assert Worker(worker_url, CONFIG, ScriptedModel(default_answer)).run(once=True) == 2
    assert {(r["probe_id"], r["attempts"]) for r in leased_rows(db_url, run_id)} == {(p, 1) for p in held_ids}

    # Once the leases have run out, a fresh worker process finishes them, through the same endpoint.
    wait_for(lambda: not any(r["leased"] for r in leased_rows(db_url, run_id)), timeout=60)
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
    assert len(rows) == IN_HAND, finisher.stderr
    assert all("attempt=2: verdict recorded" in row for row in rows), finisher.stderr
    assert {row.split("probe=")[1].split()[0] for row in rows} == {str(p) for p in held_ids}

    counts = verdict_counts(db_url, run_id)
    queued = IN_HAND + 2
    # Measured before any assert on it: a probe without a verdict is lost, a second verdict a duplicate.
    reliability.record(
        "crashes",
        "worker killed with SIGKILL holding eight judgments",
        tried=queued,
        lost=(queued - len(counts)) + sum(c - 1 for c in counts),
    )
    assert counts == [1] * (IN_HAND + 2), "one verdict per probe, none twice"
    assert as_user(db_url, owner, "select status from public.roi_benchmark_runs")[0]["status"] == "complete"

    # Each call that came back was metered once, with the endpoint's own token counts; the eight
    # killed calls never came back, so they had nothing to report.
    events = judgment_events(db_url, run_id)
    assert len(events) == IN_HAND + 2 and len({e["probe_id"] for e in events}) == IN_HAND + 2
    endpoint_events = [e for e in events if e["probe_id"] in held_ids]
    assert {(e["model"], e["input_tokens"], e["output_tokens"]) for e in endpoint_events} == {(JUDGE_MODEL, 123, 45)}
    judged = [r for r in fake_openai.requests if r["model"] == "zm-test-judge"]
    assert len(judged) == 2 * IN_HAND and judged[0]["path"].endswith("/chat/completions")
    assert {r["auth"] for r in judged} == {"Bearer sk-local-endpoint"}


def test_sigterm_with_eight_rows_in_hand_finishes_them_then_exits(db_url, worker_url, llm_mode, owners, fake_openai):
    owner = owners.create([])
    run_id = seed_queued_judgments(db_url, owner, IN_HAND)
    fake_openai.hold_next_judgment(IN_HAND)
    worker = start_worker(worker_env(worker_url, "OPENAI_BASE_URL", fake_openai.url))
    log = StderrLines(worker)
    try:
        assert fake_openai.wait_until_held(IN_HAND), f"the worker never had {IN_HAND} calls in flight"
        worker.send_signal(signal.SIGTERM)
        assert log.wait_for_line("stopping after the rows in hand"), log.text()
        assert worker.poll() is None, "it waits for the model's answers to the rows in hand"
        assert len(leased_rows(db_url, run_id)) == IN_HAND
        fake_openai.let_go.set()
        assert worker.wait(60) == 0, log.text()
    finally:
        worker.kill()
    stderr = log.text()
    assert stderr.count("attempt=1: verdict recorded") == IN_HAND, stderr
    assert f"{IN_HAND} rows handled: {IN_HAND} succeeded, 0 failed" in stderr
    assert leased_rows(db_url, run_id) == []
    assert verdict_counts(db_url, run_id) == [1] * IN_HAND
    assert len(judgment_events(db_url, run_id)) == IN_HAND
    assert as_user(db_url, owner, "select status from public.roi_benchmark_runs")[0]["status"] == "complete"


# Every pydantic model a chat-completion reply is parsed into, and whether its schema is built yet.
REPLY_MODELS_BUILT = """
import typing, pydantic, zm_roi.worker
from openai.types.chat import ChatCompletion
def walk(model, seen):
    if model not in seen:
        seen[model] = model.__pydantic_complete__
        for field in model.model_fields.values():
            stack = [field.annotation]
            while stack:
                kind = stack.pop()
                stack += typing.get_args(kind)
                if isinstance(kind, type) and issubclass(kind, pydantic.BaseModel):
                    walk(kind, seen)
    return seen
built = walk(ChatCompletion, {})
print(len(built), sorted(m.__name__ for m, done in built.items() if not done))
"""


def test_a_worker_process_builds_its_reply_models_before_the_lanes_parse_replies():
    # The openai SDK defers each model's schema to its first use; eight lanes parsing their first
    # replies at once caught one half-built and failed the call (a CI run of the SIGTERM test above).
    probe = subprocess.run(
        [sys.executable, "-c", REPLY_MODELS_BUILT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert probe.returncode == 0, probe.stderr
    count, unbuilt = probe.stdout.split(" ", 1)
    assert int(count) > 10 and unbuilt.strip() == "[]", probe.stdout


def one_queued_judgment(db_url: str, worker_url: str, owners) -> object:
    """An owner with one probe whose judgment is queued, through the real path: benchmark_memory()
    queues the probe, a worker writes its question, the next call starts the run."""
    owner = owners.create(KNOWLEDGE[:1])
    assert benchmark(db_url, owner)["status"] == "generating"
    Worker(worker_url, CONFIG, ScriptedModel(default_answer)).run(once=True)
    assert benchmark(db_url, owner)["status"] == "started"
    return owner


def test_the_lease_bounds_a_model_call(db_url, worker_url, llm_mode, owners, fake_openai):
    owner = one_queued_judgment(db_url, worker_url, owners)
    # A 4-second lease: the call may take what is left of it less a second (worker.call_timeout).
    set_settings(db_url, lease_duration="4 seconds")
    fake_openai.hold_next_judgment()  # held open for 120 s unless the worker gives up first
    # ZM_MODEL_TIMEOUT_SECONDS is judge-check's: the worker's call follows its lease, not this.
    env = {**worker_env(worker_url, "OPENAI_BASE_URL", fake_openai.url), "ZM_MODEL_TIMEOUT_SECONDS": "600"}
    started = time.monotonic()
    worker = start_worker(env, "--once")
    try:
        _, stderr = worker.communicate(timeout=60)
    finally:
        worker.kill()
    took = time.monotonic() - started
    assert fake_openai.held.is_set(), "the judge call reached the model and was held"
    assert took < 30, f"the worker gave up on the call after about 3 s, not after the model's 120 ({took:.0f} s)"
    assert "Timeout" in stderr, stderr
    assert worker.returncode == 2 and "every row failed (1 of 1" in stderr, stderr
    assert as_user(db_url, owner, "select status from public.roi_benchmark_runs")[0]["status"] == "judging"


# `zm-roi worker --once` whose model call hits a bug (not a provider, network or parse failure).
WORKER_WITH_A_BUG = """
import sys
from zm_roi import llm, cli
def buggy(**kwargs):
    raise ZeroDivisionError("a bug in the worker")
llm.litellm.completion = buggy
sys.exit(cli.main(["worker", "--once"]))
"""


def test_a_worker_stopped_by_a_bug_exits_non_zero_and_releases_the_row(db_url, worker_url, llm_mode, owners):
    owner = one_queued_judgment(db_url, worker_url, owners)
    env = {**worker_env(worker_url, "OPENAI_BASE_URL", "http://127.0.0.1:9/v1"), "ZM_WORKER_CONCURRENCY": "1"}
    done = subprocess.run(
        [sys.executable, "-c", WORKER_WITH_A_BUG], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "worker bug: ZeroDivisionError: a bug in the worker" in done.stderr
    assert "row released" in done.stderr
    assert done.stderr.rstrip().endswith("ZeroDivisionError: a bug in the worker"), "it stops loudly: the traceback"
    assert as_user(db_url, owner, "select status from public.roi_benchmark_runs")[0]["status"] == "judging"
