"""The prompts say what the model needs and nothing more; replies are validated strictly, and a
rejection never repeats the reply (it is derived from memory text and ends up in logs)."""

from __future__ import annotations

import json

import pytest

from tests.support import QUESTION_BOUNDS
from zm_roi import prompts
from zm_roi.prompts import OutputError

SURFACED = [
    {"rank": 1, "memory_id": "m1", "kind": "decision", "scope": "personal", "title": "Pin the SDK", "body": "At 4.2."},
    {"rank": 2, "memory_id": "m2", "kind": "gotcha", "scope": "project", "title": "Retries", "body": "x" * 5000},
]


def test_the_judge_sees_question_ground_truth_and_every_surfaced_result():
    text = prompts.judge_prompt("Which SDK version?", "decision", "Pin the SDK", "We pin at 4.2.", SURFACED)
    assert "Question: Which SDK version?" in text
    assert "Title: Pin the SDK\nWe pin at 4.2." in text
    assert "[1] Pin the SDK\nAt 4.2." in text and "[2] Retries" in text
    assert "x" * 1500 not in text and "x" * 1499 + "…" in text, "long bodies are cut to bound the tokens"
    assert '"with_memory"' in text and '"without_memory"' in text and '"confidence"' in text
    assert "(nothing)" in prompts.judge_prompt("Q?", "gotcha", "T", "B", [])


def test_the_generation_prompt_carries_the_source_and_asks_for_json():
    text = prompts.generation_prompt("gotcha", "Cron runs in UTC", "The scheduler ignores TZ.", QUESTION_BOUNDS)
    assert "Title: Cron runs in UTC\nThe scheduler ignores TZ." in text
    assert '{"question": "…"}' in text and "Do not quote it" in text


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps({"question": "Which version of the payments SDK do we stay on?"}),
        '```json\n{"question": "Which version of the payments SDK do we stay on?"}\n```',
        json.dumps({"question": "  Which version of the payments SDK do we stay on?  ", "extra": 1}),
    ],
)
def test_a_real_question_is_accepted(reply):
    assert prompts.parse_question(reply, "Pin the SDK", "We pin at 4.2.", QUESTION_BOUNDS) == (
        "Which version of the payments SDK do we stay on?"
    )


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("Which version do we stay on?", "not valid JSON"),
        (json.dumps({"question": "Why?"}), "at least 10 characters"),
        (json.dumps({"question": "W" * 300 + "?"}), "at most 300 characters"),
        (json.dumps({"question": "Which version do we stay on"}), "question mark"),
        (json.dumps({"question": "Which version\ndo we stay on?"}), "one line"),
        (json.dumps({"text": "Which version do we stay on?"}), "question: Field required"),
        (
            json.dumps({"question": "So we pin the payments SDK at 4.2 because 4.3 broke retries?"}),
            "8 or more consecutive words of the body",
        ),
    ],
)
def test_a_question_that_does_not_fit_is_rejected_without_repeating_it(reply, problem):
    with pytest.raises(OutputError, match=problem) as caught:
        prompts.parse_question(
            reply, "Pin the SDK", "We pin the payments SDK at 4.2 because 4.3 broke retries.", QUESTION_BOUNDS
        )
    assert "stay on" not in str(caught.value) and "4.3" not in str(caught.value)


def test_a_question_of_exactly_300_characters_is_fine():
    question = "W" * 299 + "?"
    assert prompts.parse_question(json.dumps({"question": question}), "T", "B", QUESTION_BOUNDS) == question


def test_a_judgment_needs_real_booleans_and_a_confidence_in_range():
    good = {"with_memory": True, "without_memory": False, "confidence": 0.8, "reason": "It says so."}
    verdict = prompts.parse_judgment(json.dumps(good))
    assert (verdict.with_memory, verdict.without_memory, verdict.confidence) == (True, False, 0.8)
    for bad, problem in [
        ({**good, "with_memory": "yes"}, "with_memory"),
        ({**good, "without_memory": 0}, "without_memory"),
        ({**good, "confidence": 1.5}, "confidence"),
        ({k: v for k, v in good.items() if k != "without_memory"}, "without_memory: Field required"),
        # Failing closed: a field the prompt asks for is never defaulted, a string is not a number.
        ({k: v for k, v in good.items() if k != "reason"}, "reason: Field required"),
        ({k: v for k, v in good.items() if k != "confidence"}, "confidence: Field required"),
        ({**good, "confidence": "0.8"}, "confidence"),
        ({**good, "final_answer": {"with_memory": False}}, "final_answer: Extra inputs are not permitted"),
    ]:
        with pytest.raises(OutputError, match=problem):
            prompts.parse_judgment(json.dumps(bad))
    with pytest.raises(OutputError, match="not valid JSON"):
        prompts.parse_judgment("with_memory: true")


# ---- failing closed: a reply that could hide a second answer is refused ---------------------------

VERDICT = '{"with_memory": true, "without_memory": false, "confidence": 0.9, "reason": "Result 1 says so."}'


@pytest.mark.parametrize(
    "reply",
    [
        VERDICT,
        f"```json\n{VERDICT}\n```",
        f"Sure, here is my verdict: {VERDICT} Hope this helps.",
        f"Verdict:\n{VERDICT}\n(The question asks about the SDK.)",
    ],
    ids=["bare", "fenced", "prose-around", "prose-lines"],
)
def test_one_json_object_surrounded_by_prose_is_accepted(reply):
    verdict = prompts.parse_judgment(reply)
    assert (verdict.with_memory, verdict.without_memory) == (True, False)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (f"{VERDICT} On reflection: {VERDICT.replace('true', 'false')}", "2 JSON objects"),
        (f"{VERDICT}\nCorrection: without_memory is true.", "mentions without_memory"),
        (f'{VERDICT} "confidence": 0.1', "mentions confidence"),
        ('{"with_memory": true, "with_memory": false, "without_memory": false, "confidence": 1, "reason": "r"}',
         "names a field twice"),
        ('[{"with_memory": true}, {"with_memory": false}]', "2 JSON objects"),
        ("with_memory: true, without_memory: false", "no JSON object"),
        ("", "no JSON object"),
        ("x" * 20_001, "longer than"),
    ],
    ids=["two-objects", "prose-second-answer", "prose-field-value", "duplicate-key", "array-of-two", "no-json",
         "empty", "too-long"],
)  # fmt: skip
def test_a_reply_that_could_hide_a_second_answer_is_refused(reply, problem):
    with pytest.raises(OutputError, match=problem):
        prompts.parse_judgment(reply)


def test_a_grade_fails_closed_too():
    with pytest.raises(OutputError, match="reason: Field required"):
        prompts.parse_grade('{"correct": true}')
    with pytest.raises(OutputError, match="correct"):
        prompts.parse_grade('{"correct": "yes", "reason": "r"}')
    assert prompts.parse_grade('Grade: {"correct": false, "reason": "It hedges."}').correct is False


def test_json_output_is_asked_for_where_the_provider_takes_it():
    from zm_roi import llm

    sent = []

    def complete(**kwargs):
        sent.append(kwargs)
        return llm.litellm.completion(**kwargs, mock_response=VERDICT)

    for model in ("openai/zm-test-judge", "replicate/zm-test-judge"):
        llm.call(complete, model=model, prompt="Judge.", temperature=0, api_key="k", timeout=5)
    assert sent[0]["response_format"] == {"type": "json_object"}, "an OpenAI-compatible endpoint takes it"
    assert "response_format" not in sent[1], "litellm says replicate does not: the prompt alone asks for JSON"


# ---- the question gate: a question may not quote its source ---------------------------------------

TITLE = "Pin the payments SDK at 4.2"
BODY = "We pin the payments SDK at 4.2 because 4.3 broke idempotent retries on refunds in the billing service."


@pytest.mark.parametrize(
    ("question", "rule"),
    [
        ("Which SDK version do we keep for card payments, and what went wrong with the newer one?", None),
        ("Why do we pin the payments SDK?", "4 or more consecutive words of the title"),
        ("Why: pin, the PAYMENTS-sdk?", "4 or more consecutive words of the title"),
        ("Do we pin the SDK, and at 4.2 or something else?", "60% or more of the title's content words"),
        ("What broke idempotent retries on refunds in the billing service?", "8 or more consecutive words of the body"),
        ("Which SDK? And which version?", "exactly one question"),
        ("Which SDK version do we keep " + "really " * 50 + "?", "longer than 300"),
    ],
    ids=["passes", "title-run", "title-run-after-punctuation", "title-share", "body-run", "two-questions", "long"],
)
def test_the_gate_refuses_questions_that_quote_their_source(question, rule):
    refusal = prompts.gate_refusal(question, TITLE, BODY, QUESTION_BOUNDS)
    assert refusal == rule if rule is None else rule in refusal
    if rule is not None:
        assert "payments" not in refusal and "4.2" not in refusal, "the reason names the rule, never the words"


def test_three_title_words_in_a_row_and_half_its_content_words_pass():
    # Title content words: pin, payments, sdk, 4, 2. The question uses payments and sdk (2 of 5 = 40%, under
    # 60%) and at most 3 title words in a row ("the payments sdk").
    assert (
        prompts.gate_refusal("Do we keep the payments SDK on an old release, and why?", TITLE, BODY, QUESTION_BOUNDS)
        is None
    )


def test_the_retry_prompt_carries_the_reason_and_the_first_does_not():
    first = prompts.generation_prompt("decision", TITLE, BODY, QUESTION_BOUNDS)
    again = prompts.generation_prompt(
        "decision", TITLE, BODY, QUESTION_BOUNDS, refused="it repeats 4 or more consecutive words of the title"
    )
    assert "refused" not in first
    assert "Your previous question was refused because it repeats 4 or more consecutive words of the title." in again


def test_a_fingerprint_names_the_model_and_the_prompt_it_read():
    fingerprint = prompts.fingerprint("openai/gpt-4o-mini", "judge.j2")
    assert fingerprint.startswith("openai/gpt-4o-mini#judge.j2@") and len(fingerprint.split("@")[1]) == 12
    assert prompts.fingerprint("openai/gpt-4o", "judge.j2") != fingerprint
    assert prompts.fingerprint("openai/gpt-4o-mini", "generate_question.j2") != fingerprint


# ---- the fingerprint follows the prompt ---------------------------------------------------------


def test_the_fingerprint_digest_is_the_template_files_own_hash():
    import hashlib

    for template in ("judge.j2", "generate_question.j2"):
        digest = hashlib.sha256((prompts.PROMPTS / template).read_bytes()).hexdigest()[:12]
        assert prompts.fingerprint("openai/gpt-4o-mini", template) == f"openai/gpt-4o-mini#{template}@{digest}"


def test_a_one_byte_edit_of_the_template_changes_the_fingerprint(tmp_path):
    scratch = tmp_path / "judge.j2"
    text = (prompts.PROMPTS / "judge.j2").read_bytes()
    scratch.write_bytes(text)
    before = prompts.fingerprint("m", "judge.j2", tmp_path)
    assert before == prompts.fingerprint("m", "judge.j2"), "the same bytes, the same fingerprint"
    scratch.write_bytes(text[:-1] + bytes([text[-1] ^ 1]))
    after = prompts.fingerprint("m", "judge.j2", tmp_path)
    assert after != before, "one byte changed in the template: the judge is not the same judge"
    scratch.write_bytes(text)
    assert prompts.fingerprint("m", "judge.j2", tmp_path) == before, "read afresh, not remembered"


# ---- fail closed on every coercion --------------------------------------------------------------

GOOD_JUDGMENT = {"with_memory": True, "without_memory": False, "confidence": 0.8, "reason": "It says so."}
# What a lenient parser would turn into a boolean: JSON strings, numbers, null, containers.
NOT_A_BOOLEAN = ["true", "false", "True", "yes", "1", 1, 0, 1.0, None, [], {}, [True]]


@pytest.mark.parametrize("field", ["with_memory", "without_memory"])
@pytest.mark.parametrize("value", NOT_A_BOOLEAN, ids=repr)
def test_a_judgment_boolean_that_is_not_a_json_boolean_is_refused(field, value):
    with pytest.raises(OutputError, match=field):
        prompts.parse_judgment(json.dumps({**GOOD_JUDGMENT, field: value}))


@pytest.mark.parametrize("value", NOT_A_BOOLEAN, ids=repr)
def test_a_grade_that_is_not_a_json_boolean_is_refused(value):
    with pytest.raises(OutputError, match="correct"):
        prompts.parse_grade(json.dumps({"correct": value, "reason": "r"}))


@pytest.mark.parametrize(
    ("field", "value"),
    [("confidence", "0.8"), ("confidence", True), ("confidence", None), ("confidence", [0.8]),
     ("reason", 1), ("reason", None), ("reason", True), ("reason", ["r"])],
    ids=repr,
)  # fmt: skip
def test_a_judgment_number_or_text_of_another_type_is_refused(field, value):
    with pytest.raises(OutputError, match=field):
        prompts.parse_judgment(json.dumps({**GOOD_JUDGMENT, field: value}))


@pytest.mark.parametrize("value", [12345678901, None, True, ["Which version do we stay on?"]], ids=repr)
def test_a_question_or_bare_answer_that_is_not_text_is_refused(value):
    with pytest.raises(OutputError, match="question"):
        prompts.parse_question_shape(json.dumps({"question": value}), QUESTION_BOUNDS)
    with pytest.raises(OutputError, match="answer"):
        prompts.parse_bare_answer(json.dumps({"answer": value}))


def test_the_refused_values_were_accepted_as_json_booleans():
    """The check above can fail: the same reply with JSON booleans is accepted, so each refusal is the type."""
    verdict = prompts.parse_judgment(json.dumps({**GOOD_JUDGMENT, "with_memory": False, "without_memory": True}))
    assert (verdict.with_memory, verdict.without_memory) == (False, True)
    assert prompts.parse_grade(json.dumps({"correct": True, "reason": "r"})).correct is True
