"""python -m zm_roi_bench.centres — each offline model's centre, as roi.embedding_centre holds it.

The centre is the mean of the model's passage embeddings of the demo corpus
(python/zm_roi/data/demo_corpus.jsonl, shipped in the package), rounded to 4 decimals; recall's sign bits
are taken around it (supabase/schemas/10_memory_core.sql, docs/decisions/0030). Prints the `when` arms
of the function's `case`, to paste into a NEW migration with the same change in the schema file, and
only with a new model name: the stored bits of the vectors already written were taken around the old
centre, and a centre that moved under them would compare them with the question's against another.
"""

from __future__ import annotations

import json
import sys
from importlib import resources

from zm_roi import embeddings

COLUMNS_PER_LINE = 16


def centre(texts: list[str], model: str) -> list[float]:
    vectors = embeddings.embed(texts, as_query=False, model=model).vectors
    return [round(sum(column) / len(vectors), 4) for column in zip(*vectors, strict=True)]


def case_arm(model: str, values: list[float]) -> str:
    numbers = [f"{x:.4f}".replace("-0.0000", "0.0000") for x in values]
    lines = [", ".join(numbers[i : i + COLUMNS_PER_LINE]) for i in range(0, len(numbers), COLUMNS_PER_LINE)]
    body = ",\n".join("      " + line for line in lines)
    return f"    when '{model}' then '[\n{body}]'::extensions.halfvec(384)"


def main() -> int:
    corpus = resources.files("zm_roi").joinpath("data/demo_corpus.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in corpus.splitlines()]
    texts = [embeddings.memory_text(r["title"], r["body"]) for r in rows]
    for model in (embeddings.OFFLINE_MODEL, embeddings.MINILM_MODEL):
        print(case_arm(model, centre(texts, model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
