"""The HNSW-m bench's rewrite of an index definition and its summary of one build, by hand."""

from __future__ import annotations

import pytest

from zm_roi_bench import graph_m

DEFINITION = (
    "CREATE INDEX hnsw_c86135c335c340d0ba27b6f676dec627_bits ON public.memories USING hnsw "
    "(embedding_bits extensions.bit_hamming_ops) WITH (m='32', ef_construction='200') "
    "WHERE ((project_id = 'c86135c3-35c3-40d0-ba27-b6f676dec627'::uuid) AND (scope = 'project'::text) "
    "AND (invalidated_at IS NULL))"
)


def test_only_m_changes_in_the_definition():
    rewritten = graph_m.with_m(DEFINITION, 16)
    assert rewritten == DEFINITION.replace("m='32'", "m='16'")
    assert "ef_construction='200'" in rewritten


def test_a_definition_that_does_not_state_m_once_is_refused():
    with pytest.raises(RuntimeError, match="no longer states its m once"):
        graph_m.with_m(DEFINITION.replace("m='32', ", ""), 16)


def test_a_builds_row_adds_both_indexes_and_takes_medians_over_the_questions():
    questions = [{"set": "paraphrased"}, {"set": "paraphrased"}, {"set": "templated"}]
    arm = {
        "m": 16,
        "build": 2,
        "indexes": {
            "bits": {"seconds": 40.2, "bytes": 30_000_000},
            "minilm_bits": {"seconds": 39.9, "bytes": 29_000_000},
        },
        "hybrid": [3000, 5000, 4000],
        "hybrid_ms": [9.0, 12.5, 10.0],
        "embedding": [1300, 1500, 1400],
        "embedding_minilm": [600, 700, 650],
        "ranks": [1, None, 2],
    }
    row = graph_m.summarise(arm, questions, 100_000)
    # (30,000,000 + 29,000,000) / 100,000 = 590 bytes a row; 40.2 + 39.9 = 80.1 s.
    assert row["index_bytes_a_row"] == 590
    assert row["build_seconds"] == 80.1
    assert (row["hybrid_buffers_p50"], row["e5_leg_buffers_p50"], row["minilm_leg_buffers_p50"]) == (4000, 1400, 650)
    assert row["hybrid_execution_ms_p50"] == 10.0
    # Paraphrased ranks 1 and none: hit@1 1, hit@10 1, MRR (1 + 0) / 2; templated rank 2: MRR 0.5.
    assert row["quality"]["paraphrased"] == {"n": 2, "hit10": 1, "hit1": 1, "mrr": 0.5}
    assert row["quality"]["templated"] == {"n": 1, "hit10": 1, "hit1": 0, "mrr": 0.5}
