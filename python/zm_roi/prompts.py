"""The prompts (jinja2 templates in `prompts/`) and the pydantic models that validate what the
model answers. A reply that does not validate is a failed attempt, retried by the queue."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "prompts"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # noqa: S701 - prompts are plain text for a model, not HTML
    keep_trailing_newline=True,
)

# A question that repeats this many consecutive words of its source quotes it: recall would find the
# memory by its own words, and the benchmark would flatter itself.
QUOTE_WORDS = 8


class OutputError(ValueError):
    """The model's reply is not what was asked for. The message never repeats the reply, which is
    derived from memory text and ends up in logs."""


class GeneratedQuestion(BaseModel):
    """The generation reply: one real question of sensible length."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    question: str = Field(min_length=10, max_length=300)

    @field_validator("question")
    @classmethod
    def one_question(cls, value: str) -> str:
        if not value.endswith("?"):
            raise ValueError("must end with a question mark")
        if "\n" in value:
            raise ValueError("must be one line")
        return value


class Judgment(BaseModel):
    """The judge's reply. Booleans must be JSON booleans: "yes" or 1 is a malformed answer, not a vote."""

    model_config = ConfigDict(extra="ignore")

    with_memory: StrictBool
    without_memory: StrictBool
    confidence: float = Field(ge=0, le=1)
    reason: str = ""


class BareAnswer(BaseModel):
    """The closed-book reply: whatever the model answers with the question alone."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    answer: str = Field(min_length=1)


class Grade(BaseModel):
    """The grading reply: does the bare answer match the ground truth."""

    model_config = ConfigDict(extra="ignore")

    correct: StrictBool
    reason: str = ""


def generation_prompt(kind: str, title: str, body: str) -> str:
    return _templates.get_template("generate_question.j2").render(kind=kind, title=title, body=body)


def judge_prompt(question: str, kind: str, title: str, body: str, surfaced: list[dict[str, Any]]) -> str:
    return _templates.get_template("judge.j2").render(
        question=question, kind=kind, title=title, body=body, surfaced=surfaced
    )


def closed_book_prompt(question: str) -> str:
    """The spot-check's answering call: the question and nothing else (no memory, no ground truth)."""
    return _templates.get_template("closed_book_answer.j2").render(question=question)


def closed_book_grade_prompt(question: str, kind: str, title: str, body: str, answer: str) -> str:
    return _templates.get_template("closed_book_grade.j2").render(
        question=question, kind=kind, title=title, body=body, answer=answer
    )


def _json_object(text: str) -> Any:
    """The JSON object in a reply, tolerating a Markdown fence around it."""
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, flags=re.DOTALL)
    if fenced:
        stripped = fenced.group(1)
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise OutputError(f"the reply is not valid JSON ({exc.msg} at character {exc.pos})") from None


def _validated(model: type[BaseModel], text: str) -> Any:
    payload = _json_object(text)
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        error = exc.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "reply"
        raise OutputError(f"the reply does not fit: {where}: {error['msg']}") from None


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def quotes(question: str, source: str, span: int = QUOTE_WORDS) -> bool:
    """Whether the question repeats `span` consecutive words of the source."""
    words = _words(source)
    shingles = {tuple(words[i : i + span]) for i in range(len(words) - span + 1)}
    asked = _words(question)
    return any(tuple(asked[i : i + span]) in shingles for i in range(len(asked) - span + 1))


def parse_question(text: str, title: str, body: str) -> str:
    """The question in a generation reply, or OutputError."""
    question = _validated(GeneratedQuestion, text).question
    if quotes(question, f"{title}\n{body}"):
        raise OutputError(f"the question quotes its source ({QUOTE_WORDS} or more words in a row)")
    return question


def parse_judgment(text: str) -> Judgment:
    """The verdict in a judge reply, or OutputError."""
    return _validated(Judgment, text)


def parse_bare_answer(text: str) -> str:
    """The answer in a closed-book reply, or OutputError."""
    return _validated(BareAnswer, text).answer


def parse_grade(text: str) -> Grade:
    """The grade of a closed-book answer, or OutputError."""
    return _validated(Grade, text)
