"""The checks of the judge: the question gate (a question that quotes its source goes back to
the model once, then falls back to its template), the judge fingerprint (a run says who judged it; a
changed judge gives no paired p-value), and the checks queued on every LLM run: the same judgment with
the source withheld (leniency) and with the results in reverse order (position bias)."""

from __future__ import annotations

import json

import psycopg
from psycopg.rows import dict_row

from tests.support import (
    GENERATION_MODEL,
    GOOD_VERDICT,
    JUDGE_MODEL,
    KNOWLEDGE,
    QUESTION_BOUNDS,
    ScriptedModel,
    as_user,
    benchmark,
    default_answer,
    fetch,
    set_settings,
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
    assert prompts.gate_refusal(probe["question"], PIN["title"], PIN["body"], QUESTION_BOUNDS) is None, (
        "the kept one passes"
    )
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


# ---- the checks of the judge on every run: leniency and position bias ------------------------------

# Questions that name their source's own details (so recall ranks it first, among others) and still
# pass the question gate: no title words at all.
TOPICAL = {
    memory["title"]: question
    for memory, question in zip(
        KNOWLEDGE,
        [
            "Which release broke idempotent retries on refunds, and what do we stay on?",
            "When does the nightly export land, given that the scheduler ignores TZ?",
            "What may a schema change file never be called after, and what instead?",
            "What status does a write with a stale version answer?",
            "When does the billing provider change its signing keys, and what do we do on a 401?",
            "What must every toggle description name, or the linter rejects it?",
        ],
        strict=True,
    )
}


def source_title(prompt: str) -> str:
    return prompt.split("Title: ", 1)[1].split("\n", 1)[0]


def surfaced_titles(prompt: str) -> list[str]:
    """The titles of the results the judge was shown, in the order shown."""
    shown = prompt.split("What the memory system surfaced", 1)[1].split("\nDecide:", 1)[0]
    return [line.split("] ", 1)[1] for line in shown.splitlines() if line.startswith("[")]


def checked_judge(with_memory):
    """A generator of TOPICAL questions and a judge whose with_memory is `with_memory(source, shown)`."""

    def answer(model: str, prompt: str) -> str:
        if model == GENERATION_MODEL:
            title = next(m["title"] for m in KNOWLEDGE if f"Title: {m['title']}" in prompt)
            return json.dumps({"question": TOPICAL[title]})
        verdict = with_memory(source_title(prompt), surfaced_titles(prompt))
        return json.dumps({**GOOD_VERDICT, "with_memory": verdict})

    return answer


def checked_run(db_url, worker_url, owner, with_memory) -> tuple[dict, ScriptedModel]:
    """Two benchmark calls with the worker after each (the pool, then one run), every check on."""
    set_settings(db_url, withheld_source_checks=len(KNOWLEDGE), order_checks=len(KNOWLEDGE))
    model = ScriptedModel(checked_judge(with_memory))
    benchmark(db_url, owner)
    Worker(worker_url, CONFIG, model).run(once=True)
    assert benchmark(db_url, owner)["status"] == "started"
    Worker(worker_url, CONFIG, model).run(once=True)
    (run,) = runs(db_url, owner)
    return run, model


def test_a_lenient_judge_says_answerable_for_every_question_whose_source_was_withheld(
    db_url, worker_url, llm_mode, owners
):
    owner = owners.create(KNOWLEDGE)
    run, model = checked_run(db_url, worker_url, owner, lambda source, shown: True)
    assert run["withheld_checked"] > 0, "some sources surfaced, so they could be withheld"
    assert run["withheld_answered_count"] == run["withheld_checked"]
    withheld = [c["prompt"] for c in model.calls if c["model"] == JUDGE_MODEL]
    assert len(withheld) == run["judged_count"] + run["withheld_checked"] + run["order_checked"]
    purposes = fetch(
        db_url,
        "select purpose, count(*)::int as calls from public.usage_events where owner_id = %s and run_id = %s "
        "group by purpose order by purpose",
        (owner, run["run_id"]),
    )
    assert purposes == [
        {"purpose": "judge_reversed", "calls": run["order_checked"]},
        {"purpose": "judge_withheld", "calls": run["withheld_checked"]},
        {"purpose": "judgment", "calls": run["judged_count"]},
    ], "each check is metered under its own purpose, on the owner and the run"


def test_a_strict_judge_never_says_answerable_once_the_source_is_withheld(db_url, worker_url, llm_mode, owners):
    owner = owners.create(KNOWLEDGE)
    run, model = checked_run(db_url, worker_url, owner, lambda source, shown: source in shown)
    assert run["withheld_checked"] > 0
    assert run["withheld_answered_count"] == 0, "the judge never saw the source in a leniency check"
    assert run["with_memory_count"] == run["source_surfaced_count"] > 0, "with the source shown it did answer"
    assert run["order_agreement_count"] == run["order_checked"] > 0, "reversing the order moved nothing"


def test_a_judge_that_wants_the_source_first_disagrees_with_itself_in_reverse_order(
    db_url, worker_url, llm_mode, owners
):
    owner = owners.create(KNOWLEDGE)
    run, _ = checked_run(db_url, worker_url, owner, lambda source, shown: shown[:1] == [source])
    assert run["order_checked"] > 0
    assert run["order_agreement_count"] < run["order_checked"]


def test_the_checks_are_off_when_their_settings_are_zero(db_url, worker_url, llm_mode, owners):
    owner = owners.create(KNOWLEDGE[:2])
    set_settings(db_url, withheld_source_checks=0, order_checks=0)
    model = ScriptedModel(checked_judge(lambda source, shown: True))
    benchmark(db_url, owner)
    Worker(worker_url, CONFIG, model).run(once=True)
    benchmark(db_url, owner)
    Worker(worker_url, CONFIG, model).run(once=True)
    (run,) = runs(db_url, owner)
    assert (run["withheld_checked"], run["order_checked"]) == (0, 0)
    assert len([c for c in model.calls if c["model"] == JUDGE_MODEL]) == run["judged_count"] == 2
