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
    batch gives each text the vector it gets alone (padding to the batch's longest is masked out)."""
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
