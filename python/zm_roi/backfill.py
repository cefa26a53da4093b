"""`zm-roi embed`: embed what has no embedding from the model in force (or an older model's).

Memories written by other paths than `zm-roi import` (an agent, the Data API, SQL) arrive without an
embedding; the lexical leg finds them meanwhile. Templated probe questions (deterministic mode) are
written in SQL and embedded here too. Connected as `roi_embedder`, which reads only the text it
embeds and writes only the embedding columns; each batch is one transaction, rows locked with SKIP
LOCKED so two backfills share the work, and every call is metered as a usage event (purpose
`embedding`) attributed to the memory's author or the probe's owner.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import psycopg

from zm_roi import embeddings
from zm_roi.queries import query

BATCH = 32


@dataclass
class Backfilled:
    memories: int = 0
    questions: int = 0


def _embed_batch(conn: psycopg.Connection, model: str, select: str, store: str, as_query: bool) -> int:
    with conn.transaction():
        rows = conn.execute(query(select), {"model": model, "batch": BATCH}).fetchall()
        if not rows:
            return 0
        texts = [row[2] if as_query else embeddings.memory_text(row[2], row[3]) for row in rows]
        embedded = embeddings.embed(texts, as_query=as_query, model=model)
        tokens: dict[tuple, int] = defaultdict(int)
        share = embedded.input_tokens // len(rows)
        for row, vector in zip(rows, embedded.vectors, strict=True):
            conn.execute(query(store), {"id": row[0], "embedding": embeddings.literal(vector), "model": model})
            # Questions are metered per probe, memories per author and batch.
            tokens[(row[1], row[0] if as_query else None)] += share
        for (owner, probe), count in tokens.items():
            conn.execute(
                query("record_embedding_usage"),
                {"owner_id": owner, "model": model, "probe_id": probe, "input_tokens": count},
            )
        return len(rows)


def backfill(db_url: str, model: str) -> Backfilled:
    """Embed every live memory and active probe question not yet embedded by `model`."""
    done = Backfilled()
    with psycopg.connect(db_url) as conn:
        while count := _embed_batch(conn, model, "memories_to_embed", "store_memory_embedding", False):
            done.memories += count
        while count := _embed_batch(conn, model, "questions_to_embed", "store_question_embedding", True):
            done.questions += count
    return done
