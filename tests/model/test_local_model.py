"""LLM mode against a real model: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct
(tests/model/conftest.py starts it once per session), reached through litellm's `openai/...` route and
OPENAI_API_BASE exactly as a user's local server would be. As few cases as still prove the path:

- the worker writes a question and a verdict through the real server (JSON-schema constrained output),
  and every call is metered with the tokens the server reported;
- a reply that breaks the judgment's schema (the server constrained to another schema) never becomes a
  verdict: it is skipped and counted;
- `zm-roi judge-check` on a small set exits with a verdict, 0 or 1, never 2 (could not measure);
- a prompt longer than the server's context window is refused before the call: the server never sees it;
- `zm-roi model up | url | env | down` starts the server, hands out its URL and stops it by its pid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import (
    GENERATION_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    as_user,
    benchmark,
    default_answer,
    fetch,
    set_settings,
    wait_for,
)
from tests.worker.conftest import tile
from zm_roi import cli, judgecheck, llm, localmodel, worker
from zm_roi.judgecheck import load_cases
from zm_roi.worker import Worker, WorkerConfig

MODEL = f"openai/{localmodel.MODEL_NAME}"
# Replies of a 135M model take a second or two each on 2 cores; a lease this long never cuts one short.
LEASE = "3 minutes"


def config(endpoint: llm.Endpoint) -> WorkerConfig:
    return WorkerConfig(generation_model=MODEL, judge_model=MODEL, concurrency=1, endpoint=endpoint)


def drain(worker_url: str, endpoint: llm.Endpoint, done, timeout: float = 300) -> None:
    """Run the worker until `done()` holds: a failed attempt waits out its backoff before the next drain."""
    wait_for(lambda: Worker(worker_url, config(endpoint)).run(once=True) >= 0 and done(), timeout=timeout)


@pytest.fixture
def settings_restored(db_url):
    """No checks of the judge (their own tests cover them), a long lease; the settings as they were after."""
    before = fetch(
        db_url, "select withheld_source_checks, order_checks, lease_duration, max_attempts from roi.settings"
    )
    set_settings(db_url, withheld_source_checks=0, order_checks=0, lease_duration=LEASE)
    yield
    set_settings(db_url, **before[0])


def test_the_worker_writes_a_question_and_a_verdict_through_the_real_server(
    db_url, worker_url, llm_mode, owners, model_env, local_endpoint, settings_restored
):
    owner = owners.create(KNOWLEDGE[:1])
    assert benchmark(db_url, owner)["status"] == "generating", "LLM mode waits for the model's questions"

    def pool_ready():
        return fetch(
            db_url, "select question_origin from roi.probes where owner_id = %s and state = 'active'", (owner,)
        )

    drain(worker_url, local_endpoint, pool_ready)
    events = fetch(
        db_url,
        "select purpose, model, input_tokens, output_tokens from public.usage_events where owner_id = %s",
        (owner,),
    )
    generation = [e for e in events if e["purpose"] == "probe_generation"]
    assert generation, "the question writer made no call through the real server"
    assert all(e["model"] == MODEL and e["input_tokens"] > 100 and e["output_tokens"] > 0 for e in generation), (
        f"each generation call is metered with the tokens the server counted: {generation}"
    )
    origin = pool_ready()[0]["question_origin"]
    assert origin in ("model", "retry", "template"), f"the probe got a question ({origin})"

    started = benchmark(db_url, owner)
    assert started["status"] == "started", f"the next call starts a run: {started}"
    drain(worker_url, local_endpoint, lambda: tile(db_url, owner)["state"] != "judging")
    verdicts = fetch(
        db_url,
        "select skipped, judged_by, with_memory from roi.verdicts where run_id = %s",
        (started["run_id"],),
    )
    assert verdicts == [{"skipped": False, "judged_by": "llm", "with_memory": verdicts[0]["with_memory"]}], (
        f"the real model's constrained reply became the verdict: {verdicts}"
    )
    shown = tile(db_url, owner)
    assert shown["state"] == "ready" and shown["judged_count"] == 1, f"the tile shows the judged run: {shown}"
    judged = fetch(
        db_url,
        "select input_tokens, output_tokens from public.usage_events where run_id = %s and purpose = 'judgment'",
        (started["run_id"],),
    )
    assert judged and judged[0]["input_tokens"] > 100, f"the judgment call is metered as the server counted: {judged}"


def test_a_real_reply_that_breaks_the_schema_is_skipped_and_counted_never_a_verdict(
    db_url, worker_url, llm_mode, owners, model_env, local_endpoint, settings_restored, monkeypatch
):
    owner = owners.create(KNOWLEDGE[1:2])
    benchmark(db_url, owner)
    # The question comes from the scripted writer (the real one has its own test above): this test is
    # about the judge's reply.
    scripted = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=MODEL, concurrency=1)
    Worker(worker_url, scripted, ScriptedModel(default_answer)).run(once=True)
    assert fetch(db_url, "select 1 from roi.probes where owner_id = %s and state = 'active'", (owner,))
    # The server is held to another schema than the judgment's: its reply is real JSON that the judge's
    # parser must refuse. One attempt, so the judgment gives up at once.
    other = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    monkeypatch.setattr(worker, "JUDGMENT_SCHEMA", other)
    set_settings(db_url, max_attempts=1)
    started = benchmark(db_url, owner)
    assert started["status"] == "started", started
    drain(worker_url, local_endpoint, lambda: tile(db_url, owner)["state"] != "judging")

    verdicts = fetch(db_url, "select skipped, skip_reason from roi.verdicts where run_id = %s", (started["run_id"],))
    assert verdicts == [{"skipped": True, "skip_reason": "judge_failed"}], (
        f"a reply that is not the judgment's schema is skipped, never a verdict: {verdicts}"
    )
    run = as_user(
        db_url,
        owner,
        "select status, judged_count, skipped_count from public.roi_benchmark_runs where run_id = %s",
        (started["run_id"],),
    )
    assert run and run[0]["skipped_count"] == 1 and run[0]["judged_count"] == 0, f"the skip is counted: {run}"
    calls = fetch(db_url, "select count(*)::int as n from public.usage_events where run_id = %s", (started["run_id"],))[
        0
    ]["n"]
    assert calls == 1, "the one real call that came back is metered all the same"


def small_cases() -> list[judgecheck.Case]:
    """Six cases of the shipped set: three only memory answers, a vague and a wrong decoy, one a bare agent
    knows. Small enough for the tier; the full set's figures are in bench/results."""
    cases = load_cases()
    decoys = [c for c in cases if c.decoy == "vague"][:1] + [c for c in cases if c.decoy == "wrong"][:1]
    common = [c for c in cases if c.without_memory][:1]
    plain = [c for c in cases if not c.decoy and c.exclusive][:3]
    return plain + decoys + common


def test_judge_check_on_the_real_model_ends_with_a_verdict_never_could_not_measure(
    db_url, model_env, monkeypatch, capsys
):
    cases = small_cases()
    assert len(cases) == 6, "the small set holds every kind of case"
    monkeypatch.setattr(judgecheck, "load_cases", lambda *_: cases)
    monkeypatch.setenv("ZM_DB_URL", db_url)
    monkeypatch.setenv("ZM_OPERATOR_EMAIL", "operator-model-tier@zm-roi.invalid")
    code = cli.main(["judge-check", "--json"])
    printed = capsys.readouterr()
    assert code in (0, 1), f"judge-check gives a verdict (0 fit, 1 not fit), never 2: {code} {printed.err}"
    report = json.loads(printed.out)
    assert report["cases"] == 6 and report["calls"] >= report["judged"], report
    assert report["verdict"]["passed"] == (code == 0), "the exit status is the verdict"
    assert report["skipped"] == 0, f"every reply of the constrained server parsed: {report['skipped_cases']}"


def test_a_prompt_longer_than_the_servers_context_window_is_refused_before_the_call(local_model, local_endpoint):
    case = load_cases()[0]
    long_case = judgecheck.Case(
        **{**case.__dict__, "surfaced": [{"rank": n, "title": f"Note {n}", "body": "word " * 300} for n in range(40)]}
    )
    calls = []

    def complete(**kwargs):
        calls.append(kwargs)
        return llm.litellm.completion(**{**kwargs, "api_base": local_model.url, "api_key": "local"})

    judged = judgecheck.judge_case(complete, MODEL, long_case, timeout=60, endpoint=local_endpoint)
    assert judged.too_long and judged.verdict is None, "the case is skipped, not guessed"
    assert calls == [], "no call reached the server"
    assert "context window of 8,192" in judged.last_failure, judged.last_failure
    # The same case fits a prompt the server can take: the short one is answered by the real server.
    fits = judgecheck.judge_case(complete, MODEL, case, timeout=60, endpoint=local_endpoint)
    assert len(calls) == 1 and fits.replies and fits.replies[0].input_tokens > 0, "a prompt that fits is sent"


def test_zm_roi_model_starts_the_server_answers_and_stops_it_by_its_pid(tmp_path):
    env = {**os.environ, "ZM_MODEL_HOME": str(tmp_path), "NO_PROXY": "127.0.0.1,localhost"}

    def model(action: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "zm_roi.cli", "model", action],
            env=env,
            capture_output=True,
            text=True,
            timeout=localmodel.START_TIMEOUT + 30,
        )

    before = model("url")
    assert before.returncode == 2 and "run `zm-roi model up`" in before.stderr, before.stderr
    up = model("up")
    assert up.returncode == 0 and "ready: http://127.0.0.1:" in up.stdout, up.stdout + up.stderr
    url = model("url").stdout.strip()
    assert localmodel.answers(url), f"the server `up` left running answers at {url}"
    assert f"export OPENAI_API_BASE={url}\n" in model("env").stdout
    assert "already running" in model("up").stdout, "a second `up` finds the first server"
    written = sorted(path.name for path in tmp_path.iterdir())
    assert written == ["server.json", "server.log"], f"`up` writes only inside ZM_MODEL_HOME: {written}"
    pid = json.loads((tmp_path / "server.json").read_text())["pid"]
    down = model("down")
    assert down.returncode == 0 and f"(pid {pid})" in down.stdout, down.stdout + down.stderr
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=30)
    assert not localmodel.answers(url), "stopped by its pid"
    assert "not running" in model("down").stdout
    outputs = before.stderr + up.stderr + down.stderr
    assert "Traceback" not in outputs, outputs
