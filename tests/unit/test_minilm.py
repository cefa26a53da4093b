"""The second offline model: its files are checked against pinned sha256 before use, and it computes
sentence-transformers' recipe for all-MiniLM-L6-v2 (no 128-token padding or truncation)."""

from __future__ import annotations

import shutil
import tempfile

import numpy
import pytest

from zm_roi import embeddings
from zm_roi.errors import UserError


def test_a_model_file_that_differs_from_the_pinned_one_is_refused(tmp_path):
    """(Fails with the sha256 comparison removed from _MiniLM: the truncated file loads or crashes in
    onnxruntime instead of a UserError naming the file.)"""
    model, tokenizer = embeddings.minilm_files()
    wrong = tmp_path / "model.onnx"
    wrong.write_bytes(model.read_bytes()[:-1] + b"\0")
    with pytest.raises(UserError, match=r"model\.onnx has sha256 [0-9a-f]{64}, not the pinned 8199be6f"):
        embeddings._MiniLM(wrong, tokenizer)
    swapped = tmp_path / "tokenizer.json"
    shutil.copy(tokenizer, swapped)
    swapped.write_text(swapped.read_text() + " ")  # still valid JSON, another file
    with pytest.raises(UserError, match=r"tokenizer\.json has sha256 .* refusing"):
        embeddings._MiniLM(model, swapped)


def test_the_installed_files_load_and_give_unit_vectors_unpadded_beyond_128_tokens():
    """A long text is read past 128 tokens (the shipped tokenizer.json would cut it there), and a
    batch gives each text the vector it gets alone (padding to the call's longest is masked out)."""
    long_text = "retries " * 60 + "the decision is to pin the SDK"
    short = "pin the SDK"
    alone = numpy.array(embeddings.embed([short], as_query=True, model=embeddings.MINILM_MODEL).vectors[0])
    batch = numpy.array(embeddings.embed([long_text, short], as_query=False, model=embeddings.MINILM_MODEL).vectors)
    assert batch.shape == (2, 384)
    assert numpy.allclose(numpy.linalg.norm(batch, axis=1), 1.0)
    assert numpy.allclose(batch[1], alone, atol=1e-4)
    assert len(embeddings.minilm().tokenizer.encode(long_text).ids) > 128
    cut = numpy.array(embeddings.embed(["retries " * 60], as_query=False, model=embeddings.MINILM_MODEL).vectors[0])
    assert not numpy.allclose(batch[0], cut, atol=1e-3), "the words after token 128 change the vector"


def test_a_batch_runs_in_groups_of_similar_length_and_keeps_its_order(monkeypatch):
    """Short and long texts interleaved: the model is called on the short ones padded to their own
    length and the long ones to theirs, and each text still gets the vector it gets alone, in its place.
    (Fails without the sort by length: the first group then holds long texts and is padded to them.)"""
    model = embeddings.minilm()
    short = [f"pin the SDK version {i}" for i in range(embeddings.MINILM_GROUP)]
    long = [f"{'retries with backoff ' * 20} case {i}" for i in range(4)]
    texts = [t for pair in zip(short[:4], long, strict=True) for t in pair] + short[4:]
    widths = []
    run = model.session.run
    monkeypatch.setattr(
        model.session, "run", lambda names, feeds: widths.append(feeds["input_ids"].shape[1]) or run(names, feeds)
    )
    batch = numpy.array(model.embed(texts))
    short_width = max(len(model.tokenizer.encode(t).ids) for t in short)
    assert widths == [short_width, max(len(model.tokenizer.encode(t).ids) for t in long)]
    monkeypatch.setattr(model.session, "run", run)
    alone = numpy.array([model.embed([t])[0] for t in texts])
    assert numpy.allclose(batch, alone, atol=1e-4)


def test_longer_texts_run_in_smaller_groups():
    """Groups are cut at MINILM_GROUP texts or at the attention of 16 texts of 128 tokens, whichever
    comes first, shortest texts first (decision 0041). Values by hand: 16 x 128² = 262,144; four texts
    of 256 tokens are 4 x 65,536 = 262,144, a fifth is over; twelve of 147 are 12 x 21,609 = 259,308,
    a thirteenth is over. (Fails with fixed groups of 16: one group of the nine long texts.)"""
    assert embeddings._groups([256] * 9) == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    assert embeddings._groups([147] * 13) == [list(range(12)), [12]]
    assert embeddings._groups([64] * 20) == [list(range(16)), [16, 17, 18, 19]]
    assert embeddings._groups([300, 10, 256, 12]) == [[1, 3, 2], [0]]
    assert embeddings._groups([]) == []


# Vectors of the shipped graph as onnxruntime ran it before (weights folded into float32), computed
# once: the first six dimensions and the sum of every seventh. The int8 session must give the same
# vectors (measured 1.5e-7 apart at most over the ADR corpus; int8 activations would move them by 8e-3).
PINNED = {
    "How do we pin the SDK version?": ([-0.030732, 0.032542, 0.002194, -0.035761, 0.098251, 0.021492], -0.205146),
    "Use Postgres for the queue\nWe keep one work queue in the database: a row per job, claimed with SKIP LOCKED.": (
        [-0.102243, -0.035835, -0.079871, 0.0095, -0.061572, 0.000761],
        -0.451378,
    ),
    "retries " * 60 + "the decision is to pin the SDK": (
        [-0.075753, 0.015945, -0.076409, -0.033898, -0.00566, -0.029661],
        -0.44629,
    ),
}


def test_the_int8_session_gives_the_vectors_of_the_shipped_graph():
    """Stored vectors keep their meaning: the same model name, the same vectors to 1e-5. (Fails with
    accuracy_level 4 in _int8_graph: the activations are then rounded to int8 and the vectors move.)"""
    vectors = embeddings.minilm().embed(list(PINNED))
    for (text, (first, stride_sum)), vector in zip(PINNED.items(), vectors, strict=True):
        assert numpy.allclose(vector[:6], first, atol=1e-5), f"{text[:30]!r}: {vector[:6]} is not {first}"
        assert abs(sum(vector[:384:7]) - stride_sum) < 1e-5, f"{text[:30]!r}: another vector"


def test_the_session_runs_on_int8_weights_not_a_float32_copy():
    """What keeps the worker's memory down: every weight matrix of the graph the session runs stays int8
    (MatMulNBits), no float32 tensor the size of a weight matrix (147,456 values at least) is left for
    onnxruntime to fold, and the graph's bytes are the pinned ones. (Fails when _int8_graph returns the
    shipped graph unchanged: 36 Cast -> Mul dequantizations remain and the sha256 differs.)"""
    import hashlib

    import onnx
    from onnx import TensorProto

    model, _ = embeddings.minilm_files()
    graph = embeddings._int8_graph(model.read_bytes())
    assert hashlib.sha256(graph).hexdigest() == embeddings.MINILM_INT8_GRAPH_SHA256
    proto = onnx.load_from_string(graph)
    ops = [node.op_type for node in proto.graph.node]
    assert ops.count("MatMulNBits") == 36, "six layers of six weight matrices each"
    floats = [i for i in proto.graph.initializer if i.data_type == TensorProto.FLOAT]
    large = [i.name for i in floats if numpy.prod(i.dims) > 32_768]
    assert large == [], f"float32 weights left to fold: {large[:3]}"


def test_an_int8_graph_other_than_the_pinned_one_is_refused(monkeypatch):
    """Another onnx release writing other bytes is a UserError naming the fix, not an unmeasured graph."""
    monkeypatch.setattr(embeddings, "MINILM_INT8_GRAPH_SHA256", "0" * 64)
    with pytest.raises(UserError, match=r"int8 graph .* not the pinned 0{64} \(reinstall onnx"):
        embeddings._MiniLM(*embeddings.minilm_files())


def test_every_thread_s_offline_embedding_runs_on_the_models_own_thread(monkeypatch):
    """Eight threads asking at once (the worker's lanes) are served by one thread, and each gets its own
    texts' vectors. (Fails with `embed` calling the models in the asking thread: eight thread names.)"""
    import threading

    ran_on: set[str] = set()
    real = embeddings._MiniLM.embed

    def spied(self, texts):
        ran_on.add(threading.current_thread().name)
        return real(self, texts)

    monkeypatch.setattr(embeddings._MiniLM, "embed", spied)
    texts = [f"lane {n} pins the SDK to release {n}" for n in range(8)]
    alone = [embeddings.embed([t], as_query=True, model=embeddings.MINILM_MODEL).vectors[0] for t in texts]
    ran_on.clear()
    results: dict[int, list[float]] = {}

    def lane(n: int) -> None:
        results[n] = embeddings.embed([texts[n]], as_query=True, model=embeddings.MINILM_MODEL).vectors[0]

    lanes = [threading.Thread(target=lane, args=(n,)) for n in range(8)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    assert len(ran_on) == 1 and next(iter(ran_on)).startswith("zm-roi-embed")
    assert all(numpy.allclose(results[n], alone[n], atol=1e-6) for n in range(8))


def test_the_int8_graph_file_is_gone_once_the_session_exists(monkeypatch, tmp_path):
    """The rewritten graph reaches onnxruntime as a file (decision 0040) that does not outlive the
    session's creation. (Fails when the temporary folder is not removed.)"""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = embeddings._MiniLM(*embeddings.minilm_files())
    assert len(model.embed(["a file read once"])[0]) == embeddings.DIMENSIONS
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_temporary_folder_is_a_user_error(monkeypatch, tmp_path):
    """No traceback when TMPDIR cannot hold the graph: a UserError naming the folder and the fix."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(UserError, match=r"no temporary folder for its int8 graph .*missing.*set TMPDIR"):
        embeddings._MiniLM(*embeddings.minilm_files())
