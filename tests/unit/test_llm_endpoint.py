"""What llm.py adds for a self-hosted model (llm.Endpoint): a prompt that does not fit the context window
is refused before any call, the JSON schema goes out in the form the server takes, and a call to a model
whose window is known is bounded by max_tokens. No server and no database: the call is a stand-in that
records what it was asked."""

from __future__ import annotations

import re

import pytest

from zm_roi import judgecheck, llm, prompts, settings
from zm_roi.errors import UserError
from zm_roi.worker import JUDGMENT_SCHEMA

MODEL = "openai/local-test-model"


class Recorder:
    """litellm.completion's place: records each call and answers with litellm's mock response."""

    def __init__(self, reply: str = '{"with_memory": true, "without_memory": false, "confidence": 1, "reason": "x"}'):
        self.reply = reply
        self.calls: list[dict] = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return llm.litellm.completion(**kwargs, mock_response=self.reply)


def ask(recorder: Recorder, prompt: str, endpoint: llm.Endpoint, schema: dict | None = JUDGMENT_SCHEMA) -> llm.Reply:
    return llm.call(
        recorder, model=MODEL, prompt=prompt, temperature=0, api_key="k", timeout=5, schema=schema, endpoint=endpoint
    )


def test_a_prompt_longer_than_the_context_window_is_refused_before_any_call():
    recorder = Recorder()
    window = 1000
    # 3 characters a token is the estimate's floor: 1,500 characters need at least 500 + the template's 32.
    fits = "a" * ((window - llm.REPLY_TOKENS - llm.CHAT_OVERHEAD_TOKENS) * 3)
    ask(recorder, fits, llm.Endpoint(context_tokens=window))
    assert len(recorder.calls) == 1, "a prompt that fits with the reply's room is sent"
    with pytest.raises(llm.TooLong, match=r"context window of 1,000 \(ZM_MODEL_CONTEXT_TOKENS\): no call made"):
        ask(recorder, fits + "a" * 30, llm.Endpoint(context_tokens=window))
    assert len(recorder.calls) == 1, "the prompt that does not fit never reaches the model"


def test_without_a_known_window_nothing_is_refused_and_no_max_tokens_is_sent():
    recorder = Recorder()
    ask(recorder, "a" * 100_000, llm.Endpoint())
    assert "max_tokens" not in recorder.calls[0], "a hosted model's reply is not cut (estimate only)"
    ask(recorder, "short", llm.Endpoint(context_tokens=8192))
    assert recorder.calls[1]["max_tokens"] == llm.REPLY_TOKENS, "a local model's reply is bounded"


def test_the_schema_goes_out_in_the_form_the_endpoint_takes():
    recorder = Recorder()
    ask(recorder, "p", llm.Endpoint(schema_form="json_object"))
    assert recorder.calls[-1]["response_format"] == {"type": "json_object", "schema": JUDGMENT_SCHEMA}
    ask(recorder, "p", llm.Endpoint(schema_form="json_schema"))
    assert recorder.calls[-1]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Judgment", "schema": JUDGMENT_SCHEMA},
    }
    ask(recorder, "p", llm.Endpoint())
    assert recorder.calls[-1]["response_format"] == {"type": "json_object"}, "off: plain JSON mode, as before"


def test_the_judgment_schema_is_the_parsers_own_fields_and_nothing_else():
    assert JUDGMENT_SCHEMA["required"] == ["with_memory", "without_memory", "confidence", "reason"]
    assert JUDGMENT_SCHEMA["additionalProperties"] is False, "a second verdict in another key is refused"
    question = prompts.question_schema(prompts.QuestionBounds(10, 300))["properties"]["question"]
    assert "maxLength" not in question, "no counted repetition: it slows a grammar-constrained model"
    one_line = re.compile(question["pattern"])
    assert one_line.match("Which SDK version do we pin?"), "a question of the bounds' length fits"
    for broken in ("Two? Questions?", "Line one\nline two?", "No question mark.", 'A "quoted" one?'):
        assert not one_line.match(broken), f"the schema rules out {broken[:30]!r}"


def test_judge_check_skips_and_counts_a_case_whose_prompt_does_not_fit():
    case = judgecheck.load_cases()[0]
    recorder = Recorder()
    judged = judgecheck.judge_case(recorder, MODEL, case, timeout=5, endpoint=llm.Endpoint(context_tokens=600))
    assert judged.verdict is None and judged.too_long, "the case is skipped, never guessed"
    assert recorder.calls == [], "one refusal, no call, no retry"
    report = judgecheck.summarise(MODEL, [judged])
    assert report["too_long_cases"] == [case.id] and report["skipped"] == 1


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ZM_MODEL_SCHEMA": "grammar"}, "ZM_MODEL_SCHEMA must be one of off, json_object, json_schema"),
        ({"ZM_MODEL_CONTEXT_TOKENS": "8k"}, "ZM_MODEL_CONTEXT_TOKENS must be a whole number"),
        ({"ZM_MODEL_CONTEXT_TOKENS": "0"}, "ZM_MODEL_CONTEXT_TOKENS must be a whole number"),
    ],
)
def test_the_local_model_settings_refuse_what_they_cannot_use(env, message):
    with pytest.raises(UserError, match=message):
        settings.load(env)


def test_the_local_model_settings_default_to_what_a_hosted_model_needs():
    loaded = settings.load({})
    assert (loaded.model_context_tokens, loaded.model_schema) == (None, "off")
    loaded = settings.load({"ZM_MODEL_CONTEXT_TOKENS": "8192", "ZM_MODEL_SCHEMA": "JSON_Schema"})
    assert (loaded.model_context_tokens, loaded.model_schema) == (8192, "json_schema")
    assert llm.SCHEMA_FORMS == settings.MODEL_SCHEMA_FORMS


def test_claudes_prompts_are_counted_by_its_tokenizer_after_the_parsed_copy_is_dropped():
    # llm.py drops litellm's parsed copy of Claude's tokenizer (13.7 MB the worker never reads); the
    # string litellm's Claude counter builds the tokenizer from stays. 200 one-letter words are ~200
    # tokens by that tokenizer, where the four-characters-a-token fallback says 101.
    assert "json_data" not in vars(llm.litellm.utils)
    assert llm.prompt_tokens("claude-opus-4-6", "a " * 200) > 200
