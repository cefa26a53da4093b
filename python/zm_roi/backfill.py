"""`zm-roi embed`: embed the memories that have no embedding from the model in force (or an older
model's).

Memories written by other paths than `zm-roi import` (an agent, the Data API, SQL) arrive without an
embedding; the lexical leg finds them meanwhile. Connected as `roi_embedder`, which reads only the
memory text it embeds and writes only the embedding columns; each batch is one transaction, rows
locked with SKIP LOCKED so two backfills share the work, and every call is metered as a usage event
(purpose `embedding`) attributed to the memory's author. Probe questions are not read here:
roi_embedder never sees one. Questions not embedded by the model in force are queued as
embed_question work for `zm-roi worker`, the one role that reads them.
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
    questions_queued: int = 0


def _embed_batch(conn: psycopg.Connection, model: str) -> int:
    with conn.transaction():
        rows = conn.execute(query("memories_to_embed"), {"model": model, "batch": BATCH}).fetchall()
        if not rows:
            return 0
        embedded = embeddings.embed(
            [embeddings.memory_text(row[2], row[3]) for row in rows], as_query=False, model=model
        )
        tokens: dict[object, int] = defaultdict(int)
        share = embedded.input_tokens // len(rows)
        for row, vector in zip(rows, embedded.vectors, strict=True):
            conn.execute(
                query("store_memory_embedding"), {"id": row[0], "embedding": embeddings.literal(vector), "model": model}
            )
            tokens[row[1]] += share  # metered per author and batch
        for owner, count in tokens.items():
            conn.execute(query("record_embedding_usage"), {"owner_id": owner, "model": model, "input_tokens": count})
        return len(rows)


def backfill(db_url: str, model: str) -> Backfilled:
    """Embed every live memory not yet embedded by `model`, and queue the active probe questions not
    yet embedded by it for the worker."""
    done = Backfilled()
    with psycopg.connect(db_url) as conn:
        while count := _embed_batch(conn, model):
            done.memories += count
        with conn.transaction():
            done.questions_queued = conn.execute(query("queue_question_embeddings"), {"model": model}).fetchone()[0]
    return done
