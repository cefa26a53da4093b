"""The judge checks the worker makes without a queue of their own (issue 20, items 1 and 4): the question
gate (a question that quotes its source goes back to the model once, then falls back to its template),
and the judge fingerprint (a run says who judged it; a changed judge gives no paired p-value)."""

from __future__ import annotations

import json

import psycopg
from psycopg.rows import dict_row

from tests.worker_support import (
    GENERATION_MODEL,
    GOOD_VERDICT,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    as_user,
    benchmark,
    default_answer,
    fetch,
)
from zm_roi import prompts
from zm_roi.queries import query
from zm_roi.worker import Worker, WorkerConfig

CONFIG = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)
PIN = KNOWLEDGE[0]  # "Pin the payments SDK"
PARAPHRASE = "Which release of the card-processing library do we hold back on, and what broke after it?"


def runs(db_url, owner) -> list[dict]:
    return as_user(db_url, owner, "select * from public.roi_benchmark_runs order by started_at")


def copies_the_title_first(retry_answer: str):
    """A generator whose first question quotes the title; on the retry (its prompt says why) it answers
    `retry_answer`."""

    def answer(model: str, prompt: str) -> str:
        if model != GENERATION_MODEL:
            return json.dumps(GOOD_VERDICT)
        if "Your previous question was refused" in prompt:
            return retry_answer
        return json.dumps({"question": f"What about {PIN['title'].lower()}?"})

    return answer


def test_a_question_that_copies_its_title_is_rewritten_once_and_counted(db_url, worker_url, llm_mode, owners):
    owner = owners.create([PIN])
    benchmark(db_url, owner)
    model = ScriptedModel(copies_the_title_first(json.dumps({"question": PARAPHRASE})))
    Worker(worker_url, CONFIG, model).run(once=True)
    probe = fetch(db_url, "select * from roi.probes where owner_id = %s", (owner,))[0]
    assert (probe["question"], probe["question_origin"]) == (PARAPHRASE, "retry")
    assert prompts.gate_refusal(probe["question"], PIN["title"], PIN["body"]) is None, "the kept one passes"
    assert probe["generator_fingerprint"] == prompts.fingerprint(GENERATION_MODEL, "generate_question.j2")
    refusal = "it repeats 4 or more consecutive words of the title"
    assert f"refused because {refusal}" in model.calls[1]["prompt"], "the retry says why"
    purposes = fetch(db_url, "select purpose from public.usage_events where owner_id = %s", (owner,))
    assert [p["purpose"] for p in purposes] == ["probe_generation", "probe_generation"], "the retry is metered"

    benchmark(db_url, owner)
    Worker(worker_url, CONFIG, model).run(once=True)
    (run,) = runs(db_url, owner)
    assert (run["questions_regenerated"], run["template_questions"]) == (1, 0)


def test_a_question_that_fails_twice_takes_its_template_and_is_marked(db_url, worker_url, llm_mode, owners):
    owner = owners.create([PIN])
    benchmark(db_url, owner)
    still_copying = json.dumps({"question": f"So why do we {PIN['title'].lower()}?"})
    Worker(worker_url, CONFIG, ScriptedModel(copies_the_title_first(still_copying))).run(once=True)
    probe = fetch(db_url, "select question, question_origin, state from roi.probes where owner_id = %s", (owner,))[0]
    assert probe == {
        "question": f'What did we decide about "{PIN["title"]}", and why?',
        "question_origin": "template",
        "state": "active",
    }
    benchmark(db_url, owner)
    Worker(worker_url, CONFIG, ScriptedModel(default_answer)).run(once=True)
    (run,) = runs(db_url, owner)
    assert (run["questions_regenerated"], run["template_questions"]) == (0, 1)


def test_a_question_that_passes_is_kept_at_once(db_url, worker_url, llm_mode, owners):
    owner = owners.create([PIN])
    benchmark(db_url, owner)
    model = ScriptedModel(default_answer)
    Worker(worker_url, CONFIG, model).run(once=True)
    assert len(model.calls) == 1
    origin = fetch(db_url, "select question_origin from roi.probes where owner_id = %s", (owner,))[0]
    assert origin == {"question_origin": "model"}


def test_changing_the_judge_model_marks_the_run_and_withholds_the_p_value(db_url, worker_url, llm_mode, owners):
    owner = owners.create(KNOWLEDGE[:4])
    benchmark(db_url, owner)
    Worker(worker_url, CONFIG, ScriptedModel(default_answer)).run(once=True)
    other_judge = "openai/zm-test-judge-two"
    other = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=other_judge)
    # Verdicts flip from run to run, so each paired comparison has discordant pairs and a p-value to give.
    for config, answered in ((CONFIG, True), (CONFIG, False), (other, True)):
        verdict = json.dumps({**GOOD_VERDICT, "with_memory": answered})
        assert benchmark(db_url, owner)["status"] == "started"
        Worker(worker_url, config, ScriptedModel(lambda model, prompt, v=verdict: v)).run(once=True)
    first, same, changed = runs(db_url, owner)
    fingerprint = prompts.fingerprint(JUDGE_MODEL, "judge.j2")
    assert (first["judge_fingerprint"], first["judge_changed"]) == (fingerprint, False)
    assert (same["judge_fingerprint"], same["judge_changed"]) == (fingerprint, False)
    assert same["paired_count"] == 4 and same["paired_p_value"] is not None, "same judge: comparable"
    assert changed["judge_fingerprint"] == prompts.fingerprint(other_judge, "judge.j2")
    assert changed["judge_changed"] is True
    assert changed["paired_count"] == 4 and changed["paired_p_value"] is None, "not comparable: no p-value"

    # Who judged is the owner's to read, as verdicts are, and nobody else's.
    stranger = owners.create(KNOWLEDGE[4:5])
    assert len(as_user(db_url, owner, "select * from roi.run_judges")) == 3
    assert as_user(db_url, stranger, "select * from roi.run_judges") == []
    assert as_user(db_url, stranger, "select * from public.roi_benchmark_runs") == []


def test_a_deterministic_run_says_so_in_its_fingerprint(db_url, deterministic_mode, owners):
    owner = owners.create(KNOWLEDGE[:2])
    benchmark(db_url, owner)
    benchmark(db_url, owner)
    first, second = runs(db_url, owner)
    assert first["judge_fingerprint"] == second["judge_fingerprint"] == "deterministic:retrieval-check"
    assert second["previous_run_id"] == first["run_id"] and second["judge_changed"] is False


def test_a_template_question_for_a_probe_no_longer_pending_is_dropped(db_url, worker_url, llm_mode, owners):
    owner = owners.create([PIN])
    benchmark(db_url, owner)
    probe = fetch(db_url, "select id from roi.probes where owner_id = %s", (owner,))[0]["id"]
    fetch(
        db_url,
        "update roi.probes set state = 'retired', retired_reason = 'source_invalidated', retired_at = now() "
        "where id = %s returning 1",
        (probe,),
    )
    with psycopg.connect(worker_url, row_factory=dict_row) as conn:
        recorded = conn.execute(
            query("record_question"), {"probe_id": probe, "question": None, "origin": "template", "generator": "g"}
        ).fetchone()
    assert recorded == {"record_question": False}, "dropped, as a model's question would be, not an error"
