"""The one door to litellm: kept off the network except for the model calls themselves, provider keys
checked once at start, and every reply reduced to its text and the usage the provider reported."""

from __future__ import annotations

import os
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

# Before litellm is imported: otherwise it downloads a model price list from the internet on import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# litellm's own TypedDicts make pydantic warn on first use; the worker's stderr is for its rows.
warnings.filterwarnings("ignore", message=r"Items? .* the `ReadOnly` qualifier", category=UserWarning)

import litellm  # noqa: E402
import pydantic  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402

from zm_roi.errors import UserError  # noqa: E402
from zm_roi.settings import MODEL_SCHEMA_FORMS  # noqa: E402

# No "Give Feedback / Get Help" banner on stdout for every provider error: the worker logs one line.
litellm.suppress_debug_info = True

# litellm's import parses Claude's tokenizer file and keeps both the parsed objects (`json_data`, 13.7
# MB of dicts and strings) and the string made from them (`claude_json_str`, which its Claude token
# counter reads). Nothing reads the parsed copy again (litellm 1.110.2): dropped, the worker's peak falls
# by about 14 MB (docs/decisions/0046-litellm-parsed-tokenizer-dropped.md). pop, not del: a litellm
# that no longer keeps it must still import.
vars(litellm.utils).pop("json_data", None)


def _models_in(annotation: object) -> Iterator[type[pydantic.BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _models_in(argument)


def _build_schemas(model: type[pydantic.BaseModel], built: set[type]) -> None:
    if model in built:
        return
    built.add(model)
    model.model_rebuild()
    for field in model.model_fields.values():
        for nested in _models_in(field.annotation):
            _build_schemas(nested, built)


# The openai SDK (litellm parses replies with it) builds each reply model's pydantic schema on first
# use. Worker lanes whose first replies arrive together can catch a schema half-built, and the call
# fails with "Pydantic models should inherit from BaseModel" (it failed a CI run; 3 processes in 15
# reproduced it with 8 replies released at once). So the chat-completion models are built here, once,
# by the importing thread (~1 MB; building every openai model eagerly would cost 30 MB).
_build_schemas(ChatCompletion, set())

# litellm.completion's signature. Tests pass a wrapper that adds `mock_response` to each call.
Complete = Callable[..., Any]


@dataclass(frozen=True)
class Reply:
    """What a model call returned: its text, the tokens the provider reported for it, and what it cost by
    litellm's local price map (None when the model has no price there)."""

    text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None


@cache
def provider_of(model: str) -> str:
    """litellm's provider name for a model string (`gpt-4o-mini` → `openai`), as owners store keys."""
    try:
        return litellm.get_llm_provider(model=model)[1]
    except Exception:
        raise UserError(f"unknown model {model!r}: give a litellm model string such as openai/gpt-4o-mini") from None


def check_keys(models: Iterable[str]) -> None:
    """One clear error at start when a model's provider key is missing from the environment."""
    problems = []
    for model in dict.fromkeys(models):
        provider_of(model)
        missing = litellm.validate_environment(model=model).get("missing_keys") or []
        if missing:
            problems.append(f"{model} needs {' and '.join(missing)}")
    if problems:
        raise UserError(
            "missing provider key: "
            + "; ".join(problems)
            + " in the environment (a self-hosted endpoint that takes no key: set it to any value)"
        )


@cache
def json_mode(model: str) -> dict | None:
    """The `response_format` that asks the provider for a JSON object, where litellm says the provider
    takes one (an OpenAI-compatible endpoint, Anthropic, Ollama, …); None where it does not, and the
    prompt's own instruction has to do. Either way the parser fails closed on anything but one object."""
    try:
        supported = litellm.get_supported_openai_params(model=model) or []
    except Exception:
        return None
    return {"type": "json_object"} if "response_format" in supported else None


# How a call hands the reply's JSON schema to the server (ZM_MODEL_SCHEMA): `off` sends none (the plain
# JSON mode of json_mode); `json_object` sends {"type": "json_object", "schema": …}, the form llama.cpp's
# servers (llama-server, llama-cpp-python) turn into a grammar; `json_schema` sends OpenAI's structured-output
# form {"type": "json_schema", "json_schema": {"name": …, "schema": …}} (Ollama, LM Studio, vLLM, llama-server).
SCHEMA_FORMS = MODEL_SCHEMA_FORMS
# The reply's room in the context window, and the most a call asks for when the window is known
# (max_tokens): every reply is one small JSON object (EXPECTED_OUTPUT_TOKENS, below, is the same figure),
# and a small model caught repeating itself stops here instead of filling the window: on SmolLM2-135M under
# a grammar, at about 4 tokens a second, 512 tokens took two minutes a call.
REPLY_TOKENS = 256
# A chat template wraps the prompt in a few role and turn tokens.
CHAT_OVERHEAD_TOKENS = 32


@dataclass(frozen=True)
class Endpoint:
    """What litellm's model string does not say about a self-hosted model: its context window in tokens
    (ZM_MODEL_CONTEXT_TOKENS; None: unknown, nothing is checked) and how it takes a JSON schema
    (ZM_MODEL_SCHEMA, one of SCHEMA_FORMS)."""

    context_tokens: int | None = None
    schema_form: str = "off"


class TooLong(Exception):  # noqa: N818 - reads as what it is: the prompt is too long
    """The prompt does not fit the model's context window: refused before the call, never truncated."""


def estimated_tokens(model: str, prompt: str) -> int:
    """A safe (high) estimate of the prompt's tokens on any tokenizer: the larger of litellm's count and one
    token per three characters (English runs about four a token), plus the chat template's tokens."""
    return max(prompt_tokens(model, prompt), -(-len(prompt) // 3)) + CHAT_OVERHEAD_TOKENS


def check_fits(model: str, prompt: str, endpoint: Endpoint) -> None:
    """Raise TooLong when the prompt and the reply's room exceed the context window (when it is known)."""
    if endpoint.context_tokens is None:
        return
    needed = estimated_tokens(model, prompt)
    if needed + REPLY_TOKENS > endpoint.context_tokens:
        raise TooLong(
            f"the prompt needs about {needed:,} tokens and the reply {REPLY_TOKENS}, more than {model}'s context "
            f"window of {endpoint.context_tokens:,} (ZM_MODEL_CONTEXT_TOKENS): no call made; serve the model with a "
            "larger context or use a model with a larger one"
        )


def response_format(model: str, schema: dict | None, endpoint: Endpoint) -> dict | None:
    """The `response_format` of a call: the schema in the endpoint's form, or plain JSON mode (json_mode)."""
    if schema is None or endpoint.schema_form == "off":
        return json_mode(model)
    if endpoint.schema_form == "json_object":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": schema.get("title", "reply"), "schema": schema}}


def call(
    complete: Complete,
    *,
    model: str,
    prompt: str,
    temperature: float,
    api_key: str | None,
    timeout: float,
    schema: dict | None = None,
    endpoint: Endpoint = Endpoint(),  # noqa: B008 - frozen, never mutated
) -> Reply:
    """One chat completion asking for a JSON object (through `response_format` where the provider takes
    it, see json_mode; constrained to `schema` where the endpoint takes one, see SCHEMA_FORMS). A prompt
    that does not fit the endpoint's context window raises TooLong before any call. Retries are ours
    (backoff in SQL), not the SDK's, so every attempt is a call we see and meter."""
    check_fits(model, prompt, endpoint)
    json_format = response_format(model, schema, endpoint)
    response = complete(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        temperature=temperature,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        drop_params=True,
        **({"response_format": json_format} if json_format else {}),
        **({"max_tokens": REPLY_TOKENS} if endpoint.context_tokens is not None else {}),
    )
    usage = getattr(response, "usage", None)
    # A reply with no choice (a content filter, a truncated body) is still a call the provider billed:
    # it comes back as empty text, which the parser refuses, so the call is metered and the row retried.
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    return Reply(
        text=getattr(message, "content", None) or "",
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=cost_of(response),
    )


# The output side of the spending cap's estimate (worker.py checks it before each call): every reply
# is one small JSON object (a question; or two booleans, a confidence and a one-sentence reason), some
# 30 to 80 tokens; 256 leaves room for a wordy model. An estimate, not a bound: only a call to a model
# whose context window is known (Endpoint.context_tokens) sets max_tokens, to REPLY_TOKENS.
EXPECTED_OUTPUT_TOKENS = 256


def prompt_tokens(model: str, prompt: str) -> int:
    """The prompt's tokens by the model's tokenizer where litellm has it offline, else by the usual
    four characters a token."""
    try:
        return int(litellm.token_counter(model=model, messages=[{"role": "user", "content": prompt}]))
    except Exception:
        return len(prompt) // 4 + 1


def estimate_cost(model: str, prompt: str) -> float | None:
    """What a call of `prompt` to `model` should cost in US dollars by litellm's local price map: the
    prompt's tokens and EXPECTED_OUTPUT_TOKENS at the model's prices. None when the map has no price
    for the model (a spending cap then refuses the call: nothing could bound it)."""
    try:
        info = litellm.get_model_info(model=model)
    except Exception:
        return None
    per_input, per_output = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if per_input is None or per_output is None:
        return None
    return prompt_tokens(model, prompt) * float(per_input) + EXPECTED_OUTPUT_TOKENS * float(per_output)


def cost_of(response: Any) -> float | None:
    """The call's cost in US dollars from litellm's local price map (LITELLM_LOCAL_MODEL_COST_MAP, set
    above: never fetched from the network), or None when the model is not priced there."""
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:
        cost = hidden["response_cost"]
    else:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:
            return None
    return None if cost is None else float(cost)
