"""The sign bits' centres (roi.embedding_centre, 10_memory_core.sql) belong to the offline models by
name: a model renamed in embeddings.py without a centre would silently lose its bits, and recall would
rank its memories exactly from covering indexes that a hosted model's vectors alone are meant to fill."""

from __future__ import annotations

import re

from zm_roi import embeddings
from zm_roi.localdb import project_root

SCHEMAS = project_root() / "supabase" / "schemas"


def _centres() -> dict[str, list[float]]:
    sql = (SCHEMAS / "10_memory_core.sql").read_text()
    body = sql[sql.index("create function roi.embedding_centre") :]
    body = body[: body.index("\n$$;\n")]
    return {
        model: [float(x) for x in numbers.replace("\n", " ").split(",")]
        for model, numbers in re.findall(r"when '([^']+)' then '\[([^\]]*)\]'", body)
    }


def test_each_offline_model_has_a_centre_of_384_dimensions():
    centres = _centres()
    assert sorted(centres) == sorted([embeddings.OFFLINE_MODEL, embeddings.MINILM_MODEL]), centres.keys()
    for model, values in centres.items():
        assert len(values) == embeddings.DIMENSIONS, f"{model}: {len(values)} dimensions"
        assert 0.1 < sum(x * x for x in values) ** 0.5 < 1.0, f"{model}: not a mean of unit vectors"


def test_the_semantic_leg_takes_the_question_bits_around_the_column_model_centre():
    sql = (SCHEMAS / "20_recall.sql").read_text()
    leg = sql[sql.index("create function roi.recall_semantic_leg") :]
    assert f"when 'embedding' then '{embeddings.OFFLINE_MODEL}'" in leg
    assert f"when 'embedding_minilm' then '{embeddings.MINILM_MODEL}'" in leg
