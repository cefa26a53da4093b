"""The prompts (jinja2 templates in `prompts/`) and the pydantic models that validate what the
model answers. A reply that does not validate is a failed attempt, retried by the queue."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import jinja2
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

PROMPTS = Path(__file__).parent / "prompts"

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(PROMPTS),
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # noqa: S701 - prompts are plain text for a model, not HTML
    keep_trailing_newline=True,
)

# The question gate (issue 20, item 1). A question that repeats its source's words lets recall find the
# memory by those words, and the benchmark would flatter itself: so a question may not repeat a run of
# TITLE_RUN title words or BODY_RUN body words, nor TITLE_SHARE or more of the title's content words.
TITLE_RUN = 4
BODY_RUN = 8
TITLE_SHARE = 0.6
# Words too common to say a question copied its title ("the", "for", …): left out of TITLE_SHARE.
STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "has", "have", "how",
     "in", "into", "is", "it", "its", "of", "on", "or", "our", "so", "that", "the", "their", "them", "then",
     "there", "these", "this", "to", "us", "was", "we", "were", "what", "when", "where", "which", "who", "why",
     "will", "with", "you", "your"}
)  # fmt: skip
# A model reply is a short JSON object; scanning a longer one for objects could take quadratic time.
MAX_REPLY_CHARS = 20_000


class OutputError(ValueError):
    """The model's reply is not what was asked for. The message never repeats the reply, which is
    derived from memory text and ends up in logs."""


class QuestionBounds(NamedTuple):
    """A question's shortest and longest length in characters. Written once, as the check constraint
    probes_question_length on roi.probes; the worker reads it from the database (the named query
    question_length_bounds, roi.question_length_bounds()) and hands it to parse_question_shape,
    gate_refusal and parse_question, so no copy of the two numbers lives here."""

    min_chars: int
    max_chars: int


class GeneratedQuestion(BaseModel):
    """The generation reply: one real question (its length is checked against QuestionBounds)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    question: str

    @field_validator("question")
    @classmethod
    def one_question(cls, value: str) -> str:
        if not value.endswith("?"):
            raise ValueError("must end with a question mark")
        if "\n" in value:
            raise ValueError("must be one line")
        return value


class Judgment(BaseModel):
    """The judge's reply, failing closed: every field the prompt asks for is required, booleans must be
    JSON booleans ("yes" or 1 is a malformed answer, not a vote), and a key the prompt did not ask for
    is refused (it could carry a second verdict)."""

    model_config = ConfigDict(extra="forbid")

    with_memory: StrictBool
    without_memory: StrictBool
    confidence: Annotated[float, Field(strict=True, ge=0, le=1)]
    reason: str = Field(strict=True)


class BareAnswer(BaseModel):
    """The closed-book reply: whatever the model answers with the question alone."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    answer: str = Field(min_length=1)


class Grade(BaseModel):
    """The grading reply: does the bare answer match the ground truth. Fails closed like Judgment."""

    model_config = ConfigDict(extra="forbid")

    correct: StrictBool
    reason: str = Field(strict=True)


def reply_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a reply, for a server that constrains its output to one (llm.SCHEMA_FORMS). The
    parser checks every reply all the same: a constrained reply can still be cut short."""
    return model.model_json_schema()


def question_schema(bounds: QuestionBounds) -> dict[str, Any]:
    """The generation reply's schema: one line with one question mark, at its end. A pattern, because
    llama-cpp-python's grammar lets a plain JSON string hold raw line breaks (invalid JSON, which the parser
    refuses). No length in it: a counted repetition (minLength, maxLength, `{9,299}`) makes a grammar that
    slowed generation on SmolLM2-135M to 2.4 tokens a second; the parser checks `bounds` on every reply."""
    schema = reply_schema(GeneratedQuestion)
    schema["properties"]["question"]["pattern"] = r'^[^"\\\n\r?]+[?]$'
    return schema


def generation_prompt(kind: str, title: str, body: str, bounds: QuestionBounds, refused: str | None = None) -> str:
    """The question-writing prompt, telling the model the longest question the gate takes; `refused` is
    why the gate turned the model's first question down, for the one retry it gets."""
    return _templates.get_template("generate_question.j2").render(
        kind=kind, title=title, body=body, max_chars=bounds.max_chars, refused=refused
    )


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


def fingerprint(model: str, template: str, folder: Path = PROMPTS) -> str:
    """Which model read which prompt: `MODEL#TEMPLATE@` and the first 12 hex digits of the template
    file's SHA-256. Two runs whose judge fingerprints differ were judged differently, so their scores
    are not comparable question by question. Read afresh on every call, not cached: jinja2 reloads a
    template whose file changed, so the fingerprint follows the very bytes the prompt was rendered from."""
    digest = hashlib.sha256((folder / template).read_bytes()).hexdigest()[:12]
    return f"{model}#{template}@{digest}"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        # json.loads would keep the last of two "with_memory" keys: a second answer, silently chosen.
        raise OutputError("the reply names a field twice")
    return dict(pairs)


_decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)


def _json_object(text: str, fields: list[str]) -> Any:
    """The one JSON object in a reply, failing closed. Prose around it ("Sure, here is my verdict: {…}
    Hope this helps.", a Markdown fence) is tolerated; a second object, or prose that itself gives one of
    the `fields` a value ("without_memory: true") or names a field with an underscore, could be a second
    answer, and is refused rather than guessed between."""
    if len(text) > MAX_REPLY_CHARS:
        raise OutputError(f"the reply is longer than {MAX_REPLY_CHARS:,} characters")
    found: list[Any] = []
    prose: list[str] = []
    position = 0
    start = text.find("{")
    while start != -1:
        try:
            value, end = _decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            start = text.find("{", start + 1)
            continue
        found.append(value)
        prose.append(text[position:start])
        position = end
        start = text.find("{", end)
    prose.append(text[position:])
    if not found:
        raise OutputError("the reply is not valid JSON: it holds no JSON object")
    if len(found) > 1:
        raise OutputError(f"the reply holds {len(found)} JSON objects: refusing to pick one")
    around = " ".join(prose)
    for field in fields:
        named = rf"\b{re.escape(field)}\b"
        if ("_" in field and re.search(named, around, re.IGNORECASE)) or re.search(
            named + r"[\"']?\s*[:=]\s*(?:true|false|yes|no|null|-?\d|[\"'])", around, re.IGNORECASE
        ):
            raise OutputError(f"the text around the JSON object mentions {field}: it could be a second answer")
    return found[0]


def _validated(model: type[BaseModel], text: str) -> Any:
    payload = _json_object(text, list(model.model_fields))
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        error = exc.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "reply"
        raise OutputError(f"the reply does not fit: {where}: {error['msg']}") from None


def _words(text: str) -> list[str]:
    """Lower-cased words, punctuation dropped (a hyphen or an apostrophe splits words)."""
    return re.sub(r"[^\w\s]|_", " ", text.lower()).split()


def _repeats_run(asked: list[str], source: list[str], span: int) -> bool:
    shingles = {tuple(source[i : i + span]) for i in range(len(source) - span + 1)}
    return any(tuple(asked[i : i + span]) in shingles for i in range(len(asked) - span + 1))


def gate_refusal(question: str, title: str, body: str, bounds: QuestionBounds) -> str | None:
    """Why the question may not join the pool, or None when it passes the gate: one question of at most
    bounds.max_chars characters that does not quote its source (see TITLE_RUN, BODY_RUN, TITLE_SHARE).
    The reason is given back to the model for its one retry, so it names the rule, never the words."""
    if len(question) > bounds.max_chars:
        return f"it is longer than {bounds.max_chars} characters"
    if question.count("?") != 1 or not question.endswith("?") or "\n" in question:
        return "it is not exactly one question (one line, one question mark, at the end)"
    asked = _words(question)
    if _repeats_run(asked, _words(title), TITLE_RUN):
        return f"it repeats {TITLE_RUN} or more consecutive words of the title"
    if _repeats_run(asked, _words(body), BODY_RUN):
        return f"it repeats {BODY_RUN} or more consecutive words of the body"
    content = {word for word in _words(title) if word not in STOPWORDS}
    if content and len(content & set(asked)) / len(content) >= TITLE_SHARE:
        return f"it uses {round(TITLE_SHARE * 100)}% or more of the title's content words"
    return None


def parse_question_shape(text: str, bounds: QuestionBounds) -> str:
    """The question in a generation reply, checked for its shape and length only (the gate is
    gate_refusal), or OutputError."""
    question = _validated(GeneratedQuestion, text).question
    if len(question) < bounds.min_chars:
        raise OutputError(f"the reply does not fit: question: should have at least {bounds.min_chars} characters")
    if len(question) > bounds.max_chars:
        raise OutputError(f"the reply does not fit: question: should have at most {bounds.max_chars} characters")
    return question


def parse_question(text: str, title: str, body: str, bounds: QuestionBounds) -> str:
    """The question in a generation reply that also passes the gate, or OutputError saying why not."""
    question = parse_question_shape(text, bounds)
    refusal = gate_refusal(question, title, body, bounds)
    if refusal is not None:
        raise OutputError(f"the question does not pass the gate: {refusal}")
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
