"""The second offline model: its files are checked against pinned sha256 before use, and it computes
sentence-transformers' recipe for all-MiniLM-L6-v2 (no 128-token padding or truncation)."""

from __future__ import annotations

import shutil

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
