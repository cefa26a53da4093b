"""The LLM path end to end, with litellm's `mock_response` standing in for the provider (no network):
the worker writes the questions, the benchmark runs, the worker judges, the tile shows the rate, and
every model call left a usage event for the right owner. Failures are retried with backoff in SQL and
end as skipped probes, never as a failed run."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import psycopg
import pytest

from tests.support import (
    GENERATION_MODEL,
    GOOD_VERDICT,
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
from tests.worker.conftest import EPISODE, tile
from zm_roi import llm
from zm_roi.worker import Worker, WorkerConfig

CONFIG = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)
COMMON_KNOWLEDGE = KNOWLEDGE[3]["title"]  # "Version conflicts answer 409": a bare agent knows HTTP


def judge_by_source(model: str, prompt: str) -> str:
    if model == GENERATION_MODEL:
        return question_for(prompt)
    return json.dumps({**GOOD_VERDICT, "without_memory": f"Title: {COMMON_KNOWLEDGE}" in prompt})


def usage_by_owner(db_url, owner) -> list[dict]:
    return fetch(
        db_url,
        """select purpose, model, input_tokens, output_tokens, byok, run_id, probe_id from public.usage_events
           where owner_id = %s order by id""",
        (owner,),
    )


def test_llm_mode_end_to_end(db_url, worker_url, llm_mode, owners):
    # Every call is counted below; the checks of the judge (on by default) have their own tests.
    set_settings(db_url, withheld_source_checks=0, order_checks=0)
    alice = owners.create([*KNOWLEDGE[:4], EPISODE])
    bob = owners.create(KNOWLEDGE[4:6])

    # First call: the pool is being written. The episode is not knowledge and is never probed.
    assert benchmark(db_url, alice) == {"status": "generating", "ready": 0, "target": 4}
    assert benchmark(db_url, bob) == {"status": "generating", "ready": 0, "target": 2}

    model = ScriptedModel(judge_by_source)
    assert Worker(worker_url, CONFIG, model).run(once=True) == 6
    questions = fetch(db_url, "select source_title, state, question from roi.probes where owner_id = %s", (alice,))
    assert {q["state"] for q in questions} == {"active"}
    for probe in questions:
        number = next(i for i, m in enumerate(KNOWLEDGE) if m["title"] == probe["source_title"])
        assert probe["question"] == f"What did the team settle on for topic number {number}?"

    # Next call: a run starts; its judgments are queued for the worker.
    started = benchmark(db_url, alice)
    assert started["status"] == "started" and started["probes"] == 4
    assert benchmark(db_url, bob)["status"] == "started"
    assert tile(db_url, alice)["state"] == "judging"

    assert Worker(worker_url, CONFIG, model).run(once=True) == 6
    shown = tile(db_url, alice)
    assert shown["state"] == "ready"
    assert shown["judged_count"] == 4 and shown["exclusive_count"] == 3
    assert float(shown["exclusive_rate"]) == 0.75
    assert shown["hint"] == "3 of 4 questions only memory answered"
    assert float(tile(db_url, bob)["exclusive_rate"]) == 1.0

    # Every call is metered, for the owner whose corpus it measured, with the tokens litellm reported.
    assert len(model.calls) == 12
    reported = {call["usage"] for call in model.calls}
    assert len(reported) == 1
    input_tokens, output_tokens = reported.pop()
    for owner, probes in ((alice, 4), (bob, 2)):
        events = usage_by_owner(db_url, owner)
        assert [e["purpose"] for e in events] == ["probe_generation"] * probes + ["judgment"] * probes
        assert {e["model"] for e in events if e["purpose"] == "probe_generation"} == {GENERATION_MODEL}
        assert {e["model"] for e in events if e["purpose"] == "judgment"} == {JUDGE_MODEL}
        assert all((e["input_tokens"], e["output_tokens"]) == (input_tokens, output_tokens) for e in events)
        assert not any(e["byok"] for e in events)
        owned = {r["id"] for r in fetch(db_url, "select id from roi.probes where owner_id = %s", (owner,))}
        assert {e["probe_id"] for e in events} == owned
        assert all(e["run_id"] is not None for e in events if e["purpose"] == "judgment")

    # The judge's reasons are memory-derived text: kept, but out of the owner's reach.
    notes = fetch(db_url, "select note from roi.verdict_notes where owner_id = %s", (alice,))
    assert [n["note"] for n in notes] == [GOOD_VERDICT["reason"]] * 4
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_user(db_url, alice, "select * from roi.verdict_notes")

    # The worker closed the run; upkeep (as the owner) rotates the pool and tops it up from new knowledge.
    owners.add_memories(alice, [{**EPISODE, "kind": "decision", "title": "Queue leases, not statuses"}])
    fetch(db_url, "select roi.upkeep()")
    states = fetch(
        db_url,
        "select state, retired_reason, count(*)::int as n from roi.probes where owner_id = %s group by 1, 2 order by 1",
        (alice,),
    )
    assert states == [
        {"state": "active", "retired_reason": None, "n": 3},
        {"state": "pending", "retired_reason": None, "n": 1},
        {"state": "retired", "retired_reason": "rotated", "n": 1},
    ]


def test_malformed_judge_output_is_retried_then_skipped(db_url, worker_url, llm_mode, owners):
    # The flaky probe's checks would draw on the scripted failures; they have their own tests.
    set_settings(db_url, max_attempts=3, withheld_source_checks=0, order_checks=0)
    carol = owners.create(KNOWLEDGE[:3])
    flaky = f"Title: {KNOWLEDGE[1]['title']}"
    failures = iter(['{"with_memory": tru', json.dumps({**GOOD_VERDICT, "with_memory": "yes"}), RuntimeError("503")])

    def answer(model: str, prompt: str):
        if model == JUDGE_MODEL and flaky in prompt:
            return next(failures)
        return default_answer(model, prompt)

    model = ScriptedModel(answer)
    benchmark(db_url, carol)
    Worker(worker_url, CONFIG, model).run(once=True)
    run_id = benchmark(db_url, carol)["run_id"]

    def flaky_row() -> dict:
        rows = fetch(
            db_url,
            """select j.attempts, j.last_error, j.run_after from roi.work j join roi.probes p on p.id = j.probe_id
               where j.kind = 'judge' and j.run_id = %s and p.source_title = %s""",
            (run_id, KNOWLEDGE[1]["title"]),
        )
        return rows[0] if rows else {}

    def database_now():
        return fetch(db_url, "select clock_timestamp() as t")[0]["t"]

    def assert_backoff(row: dict, before, after, seconds: float) -> None:
        """The release happened between `before` and `after` (database clock) and set the row's next
        try e^attempts seconds after it: no wall-clock window, only the two observed instants."""
        wait = timedelta(seconds=seconds)
        assert before + wait <= row["run_after"] <= after + wait, (before, row["run_after"], after)

    def fast_forward() -> None:
        fetch(db_url, "update roi.work set run_after = now() where run_id = %s returning 1", (run_id,))

    # Attempt 1: not JSON. The other two are judged; the flaky one waits e¹ seconds.
    before = database_now()
    assert Worker(worker_url, CONFIG, model).run(once=True) == 3
    after = database_now()
    row = flaky_row()
    assert row["attempts"] == 1 and "not valid JSON" in row["last_error"]
    assert_backoff(row, before, after, math.exp(1))
    assert Worker(worker_url, CONFIG, model).run(once=True) == 0, "backing off: nothing is claimable yet"
    assert tile(db_url, carol)["state"] == "judging"

    # Attempt 2: JSON of the wrong shape ("yes" is not a boolean). The wait grows to e² seconds.
    fast_forward()
    before = database_now()
    assert Worker(worker_url, CONFIG, model).run(once=True) == 1
    after = database_now()
    row = flaky_row()
    assert row["attempts"] == 2 and "with_memory" in row["last_error"]
    assert_backoff(row, before, after, math.exp(2))

    # Attempt 3, the last: a provider error. The probe is recorded as skipped and the run completes.
    fast_forward()
    assert Worker(worker_url, CONFIG, model).run(once=True) == 1
    assert flaky_row() == {}
    [run] = as_user(db_url, carol, "select * from public.roi_benchmark_runs")
    assert run["status"] == "complete"
    assert (run["judged_count"], run["skipped_count"], run["exclusive_count"]) == (2, 1, 2)
    assert float(run["exclusive_rate"]) == 1.0, "the rate counts judged probes only"
    skipped = fetch(
        db_url,
        """select v.skip_reason, v.judged_by, n.note from roi.verdicts v
           join roi.verdict_notes n using (run_id, probe_id) where v.run_id = %s and v.skipped""",
        (run_id,),
    )
    assert len(skipped) == 1 and skipped[0]["skip_reason"] == "judge_failed" and skipped[0]["judged_by"] == "llm"
    assert "503" in skipped[0]["note"], "the last error is kept, in the gated notes"

    # Metered: every call that came back, malformed or not (the provider error returned nothing).
    judgments = [e for e in usage_by_owner(db_url, carol) if e["purpose"] == "judgment"]
    assert len(model.calls) == 3 + 5 and len(judgments) == 4


def test_generation_that_never_validates_retires_the_probe(db_url, worker_url, llm_mode, owners):
    set_settings(db_url, max_attempts=3)
    dave = owners.create(KNOWLEDGE[:1])
    # (A question that quotes its memory is the gate's: tests/worker/test_worker_judge_checks.py.)
    bad = iter(
        [
            json.dumps({"question": "Why " + "really " * 60 + "?"}),  # longer than 300 characters
            json.dumps({"question": "What SDK version do we pin"}),  # not a question
            '{"question": "Which SDK version do we keep?"} {"question": "Which one do we avoid?"}',  # two answers
        ]
    )
    model = ScriptedModel(lambda model, prompt: next(bad))
    assert benchmark(db_url, dave)["status"] == "generating"
    errors = []
    for _ in range(3):
        assert Worker(worker_url, CONFIG, model).run(once=True) == 1
        # Retrying, the error is on the queue row; given up, on the retired probe (its row is gone).
        [probe] = fetch(
            db_url,
            """select p.state, p.retired_reason, p.question, coalesce(w.last_error, p.last_error) as last_error
               from roi.probes p left join roi.work w on w.probe_id = p.id where p.owner_id = %s""",
            (dave,),
        )
        errors.append(probe["last_error"])
        fetch(db_url, "update roi.work set run_after = now() where owner_id = %s returning 1", (dave,))
    assert "at most 300 characters" in errors[0]
    assert "question mark" in errors[1]
    assert "2 JSON objects" in errors[2]
    assert (probe["state"], probe["retired_reason"], probe["question"]) == ("retired", "generation_failed", None)
    assert [e["purpose"] for e in usage_by_owner(db_url, dave)] == ["probe_generation"] * 3


def test_a_judge_prompt_longer_than_the_models_context_window_is_refused_before_the_call(
    db_url, worker_url, llm_mode, owners, caplog
):
    before = fetch(db_url, "select max_attempts, withheld_source_checks, order_checks from roi.settings")[0]
    set_settings(db_url, max_attempts=1, withheld_source_checks=0, order_checks=0)
    try:
        owner = owners.create(KNOWLEDGE[:1])
        model = ScriptedModel(default_answer)
        benchmark(db_url, owner)
        Worker(worker_url, CONFIG, model).run(once=True)
        run_id = benchmark(db_url, owner)["run_id"]
        # A self-hosted judge whose context window cannot hold the judge prompt and the reply's room.
        small = WorkerConfig(
            generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL, endpoint=llm.Endpoint(context_tokens=600)
        )
        with caplog.at_level("INFO", logger="zm_roi.worker"):
            Worker(worker_url, small, model).run(once=True)
        assert [c["model"] for c in model.calls] == [GENERATION_MODEL], "no judge call was made"
        verdicts = fetch(db_url, "select skipped, skip_reason from roi.verdicts where run_id = %s", (run_id,))
        assert verdicts == [{"skipped": True, "skip_reason": "judge_failed"}], f"skipped and counted: {verdicts}"
        assert "context window of 600 (ZM_MODEL_CONTEXT_TOKENS): no call made" in caplog.text, caplog.text
        assert not fetch(db_url, "select 1 from public.usage_events where run_id = %s", (run_id,)), "nothing metered"
    finally:
        set_settings(db_url, **before)
