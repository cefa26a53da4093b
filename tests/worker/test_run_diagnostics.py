"""A run's cost and the closed-book spot-check, end to end through litellm against a local
OpenAI-compatible endpoint: a priced model (openai/gpt-4o-mini) that reports 100 + 20 tokens per call,
so every call costs what litellm's local price map says, worked out by hand below. The spot-check's
answering call sees the question and nothing else; its grading call sees the ground truth; both are
metered under their own purposes and on the owner's own key when they stored one."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support import (
    GENERATION_MODEL,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    as_user,
    benchmark,
    default_answer,
    fetch,
    question_for,
    set_settings,
)
from zm_roi import llm
from zm_roi.llm import litellm
from zm_roi.queries import query
from zm_roi.worker import Worker, WorkerConfig

MODEL = "openai/gpt-4o-mini"
TOKENS = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
# litellm's local price map for gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output.
PER_CALL = Decimal("100") * Decimal("0.15") / 10**6 + Decimal("20") * Decimal("0.60") / 10**6  # $0.000027
COMMON = KNOWLEDGE[3]  # "Version conflicts answer 409": a bare model knows HTTP
OVERRATED = KNOWLEDGE[1]  # the judge calls it common knowledge; the bare model does not know it
KEY_PASSPHRASE = "diagnostics-passphrase"


class LocalModel(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint that answers each kind of prompt the worker sends, keeping every
    request (prompt and key) for the assertions."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.requests: list[dict] = []


def reply_to(prompt: str) -> dict:
    if prompt.startswith("You are the judge"):
        common = any(f"Title: {m['title']}" in prompt for m in (COMMON, OVERRATED))
        return {"with_memory": True, "without_memory": common, "confidence": 0.9, "reason": "Result 1 says so."}
    if prompt.startswith("Answer the question below from general knowledge alone"):
        return {"answer": "409 Conflict." if "topic number 3" in prompt else "I do not know."}
    if prompt.startswith("You grade an answer"):
        return {"correct": "409 Conflict." in prompt, "reason": "Compared with the ground truth."}
    return json.loads(question_for(prompt))


class _Answer(BaseHTTPRequestHandler):
    server: LocalModel

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        self.server.requests.append({"model": body["model"], "key": self.headers["Authorization"], "prompt": prompt})
        data = json.dumps(
            {
                "id": "chatcmpl-local",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": json.dumps(reply_to(prompt))},
                        "finish_reason": "stop",
                    }
                ],
                "usage": TOKENS,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def local_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-deployment")
    server = LocalModel()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def through(server: LocalModel):
    """litellm.completion, sent to the local endpoint: a real HTTP call, a real litellm response."""
    return lambda **kwargs: litellm.completion(**kwargs, api_base=server.url)


def test_an_unpriced_model_costs_nothing_known(local_model):
    reply = llm.call(
        through(local_model), model="openai/zm-unpriced", prompt="Hi", temperature=0, api_key=None, timeout=10
    )
    assert (reply.input_tokens, reply.output_tokens, reply.cost_usd) == (100, 20, None)
    priced = llm.call(through(local_model), model=MODEL, prompt="Hi", temperature=0, api_key=None, timeout=10)
    assert Decimal(str(priced.cost_usd)) == PER_CALL == Decimal("0.000027")


def test_cost_per_run_and_the_closed_book_spot_check(db_url, worker_url, llm_mode, owners, local_model):
    config = WorkerConfig(generation_model=MODEL, judge_model=MODEL, key_encryption_key=KEY_PASSPHRASE)
    alice = owners.create(KNOWLEDGE[:4])
    bob = owners.create(KNOWLEDGE[4:6])
    fetch(
        db_url,
        query("store_provider_key"),
        {"owner_id": bob, "provider": "openai", "api_key": "sk-bob", "passphrase": KEY_PASSPHRASE},
    )

    # Off by default: a run judged with the setting at 0 asks nothing closed-book.
    assert fetch(db_url, "select closed_book_checks from roi.settings")[0]["closed_book_checks"] == 0
    assert benchmark(db_url, alice)["status"] == "generating"
    assert benchmark(db_url, bob)["status"] == "generating"
    Worker(worker_url, config, through(local_model)).run(once=True)

    # The checks of the judge (on by default) would add calls to the count; they have their own tests.
    set_settings(db_url, closed_book_checks=4, withheld_source_checks=0, order_checks=0)
    assert benchmark(db_url, alice)["status"] == "started"
    assert benchmark(db_url, bob)["status"] == "started"
    handled = Worker(worker_url, config, through(local_model)).run(once=True)
    assert handled == 6 + 6, "6 judgments and 6 spot-checks (every probe: the setting exceeds the pool)"

    # The answering call saw the question and nothing else: no ground truth, no recalled memory.
    answering = [r for r in local_model.requests if r["prompt"].startswith("Answer the question below")]
    grading = [r for r in local_model.requests if r["prompt"].startswith("You grade an answer")]
    assert len(answering) == len(grading) == 6
    for request in answering:
        assert not any(m["title"] in request["prompt"] or m["body"] in request["prompt"] for m in KNOWLEDGE)
        assert "What did the team settle on for topic number" in request["prompt"]
    assert sum(COMMON["body"] in r["prompt"] and "409 Conflict." in r["prompt"] for r in grading) == 1, (
        "the grading call compares the bare answer with the ground truth"
    )

    # Metered: each call under its purpose, 100 + 20 tokens, priced by the local map; Bob's on his key.
    events = fetch(
        db_url,
        """select owner_id, purpose, input_tokens, output_tokens, cost_usd, byok, run_id from public.usage_events
           where owner_id = any(%s) order by id""",
        ([alice, bob],),
    )
    purposes = [e["purpose"] for e in events if e["owner_id"] == alice]
    assert sorted(purposes) == sorted(
        ["probe_generation"] * 4 + ["judgment"] * 4 + ["closed_book_answer"] * 4 + ["closed_book_grade"] * 4
    )
    assert {(e["input_tokens"], e["output_tokens"], e["cost_usd"]) for e in events} == {(100, 20, PER_CALL)}
    assert all(e["byok"] == (e["owner_id"] == bob) for e in events)
    assert {r["key"] for r in local_model.requests if "topic number 4" in r["prompt"]} == {"Bearer sk-bob"}
    assert all(e["run_id"] is not None for e in events if e["purpose"] != "probe_generation")

    # The run reports its cost (judging and spot-check calls: 4 + 4 + 4 = 12 × $0.000027) and the spot-check.
    [run] = as_user(db_url, alice, "select * from public.roi_benchmark_runs")
    assert run["status"] == "complete"
    assert (run["input_tokens"], run["output_tokens"], run["own_key_calls"]) == (1200, 240, 0)
    assert run["cost_usd"] == 12 * PER_CALL == Decimal("0.000324")
    # The bare model got only the 409 question right; the judge thought two were common knowledge.
    assert (run["closed_book_checked"], run["closed_book_correct"], run["closed_book_agreement_count"]) == (4, 1, 3)
    assert run["without_memory_count"] == 2
    [bobs] = as_user(db_url, bob, "select * from public.roi_benchmark_runs")
    assert (bobs["own_key_calls"], bobs["cost_usd"], bobs["closed_book_checked"]) == (6, 6 * PER_CALL, 2)
    assert (
        fetch(
            db_url,
            "select count(*)::int as n from roi.work where kind = 'closed_book' and owner_id = any(%s)",
            ([alice, bob],),
        )[0]["n"]
        == 0
    )


def test_a_spot_check_whose_grade_fails_is_retried_and_both_calls_are_metered(db_url, worker_url, llm_mode, owners):
    config = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)
    grades = iter(['{"correct": "yes"}', json.dumps({"correct": False, "reason": "It does not know."})])

    def answer(model: str, prompt: str) -> str:
        if prompt.startswith("Answer the question below"):
            return json.dumps({"answer": "I do not know."})
        if prompt.startswith("You grade an answer"):
            return next(grades)
        return default_answer(model, prompt)

    carol = owners.create(KNOWLEDGE[:1])
    model = ScriptedModel(answer)
    benchmark(db_url, carol)
    Worker(worker_url, config, model).run(once=True)
    set_settings(db_url, closed_book_checks=1)
    run_id = benchmark(db_url, carol)["run_id"]

    # The judgment, then the spot-check: the grade is not a boolean, so the row goes back to the queue.
    assert Worker(worker_url, config, model).run(once=True) == 2
    [queued] = fetch(
        db_url, "select attempts, last_error from roi.work where kind = 'closed_book' and run_id = %s", (run_id,)
    )
    assert queued["attempts"] == 1 and "correct" in queued["last_error"]
    assert "I do not know" not in queued["last_error"], "the bare answer is never kept"
    fetch(db_url, "update roi.work set run_after = now() where run_id = %s returning 1", (run_id,))
    assert Worker(worker_url, config, model).run(once=True) == 1

    events = fetch(db_url, "select purpose, cost_usd from public.usage_events where run_id = %s order by id", (run_id,))
    # The worker's lanes run the judgment and the spot-check at once, so only the count per purpose is fixed.
    assert sorted(e["purpose"] for e in events) == sorted(
        ["judgment"] + ["closed_book_answer", "closed_book_grade"] * 2
    )
    assert {e["cost_usd"] for e in events} == {None}, "a model the local price map does not know has no cost"
    [run] = as_user(db_url, carol, "select * from public.roi_benchmark_runs")
    assert (run["closed_book_checked"], run["closed_book_correct"], run["closed_book_agreement_count"]) == (1, 0, 1)
    assert run["cost_usd"] is None and run["input_tokens"] > 0


def test_the_bare_answer_is_metered_even_when_grading_it_crashes_the_worker(db_url, worker_url, llm_mode, owners):
    config = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)

    def answer(model: str, prompt: str) -> str:
        if prompt.startswith("You grade an answer"):
            raise TypeError("a bug while grading")
        if prompt.startswith("Answer the question below"):
            return json.dumps({"answer": "I do not know."})
        return default_answer(model, prompt)

    dora = owners.create(KNOWLEDGE[:1])
    benchmark(db_url, dora)
    Worker(worker_url, config, ScriptedModel(answer)).run(once=True)
    set_settings(db_url, closed_book_checks=1)
    run_id = benchmark(db_url, dora)["run_id"]
    with pytest.raises(TypeError, match="while grading"):
        Worker(worker_url, config, ScriptedModel(answer)).run(once=True)
    purposes = fetch(
        db_url, "select purpose from public.usage_events where owner_id = %s and run_id = %s", (dora, run_id)
    )
    assert "closed_book_answer" in [p["purpose"] for p in purposes], "the answering call came back and is metered"
