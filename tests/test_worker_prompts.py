"""The prompts say what the model needs and nothing more; replies are validated strictly, and a
rejection never repeats the reply (it is derived from memory text and ends up in logs)."""

from __future__ import annotations

import json

import pytest

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
    text = prompts.generation_prompt("gotcha", "Cron runs in UTC", "The scheduler ignores TZ.")
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
    assert prompts.parse_question(reply, "Pin the SDK", "We pin at 4.2.") == (
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
        (json.dumps({"question": "So we pin the payments SDK at 4.2 because 4.3 broke retries?"}), "quotes its source"),
    ],
)
def test_a_question_that_does_not_fit_is_rejected_without_repeating_it(reply, problem):
    with pytest.raises(OutputError, match=problem) as caught:
        prompts.parse_question(reply, "Pin the SDK", "We pin the payments SDK at 4.2 because 4.3 broke retries.")
    assert "stay on" not in str(caught.value) and "4.3" not in str(caught.value)


def test_a_question_of_exactly_300_characters_is_fine():
    question = "W" * 299 + "?"
    assert prompts.parse_question(json.dumps({"question": question}), "T", "B") == question


def test_a_judgment_needs_real_booleans_and_a_confidence_in_range():
    good = {"with_memory": True, "without_memory": False, "confidence": 0.8, "reason": "It says so."}
    verdict = prompts.parse_judgment(json.dumps(good))
    assert (verdict.with_memory, verdict.without_memory, verdict.confidence) == (True, False, 0.8)
    assert prompts.parse_judgment(json.dumps({k: v for k, v in good.items() if k != "reason"})).reason == ""
    for bad, problem in [
        ({**good, "with_memory": "yes"}, "with_memory"),
        ({**good, "without_memory": 0}, "without_memory"),
        ({**good, "confidence": 1.5}, "confidence"),
        ({k: v for k, v in good.items() if k != "without_memory"}, "without_memory: Field required"),
    ]:
        with pytest.raises(OutputError, match=problem):
            prompts.parse_judgment(json.dumps(bad))
    with pytest.raises(OutputError, match="not valid JSON"):
        prompts.parse_judgment("with_memory: true")
