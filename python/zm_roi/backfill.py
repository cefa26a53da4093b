"""`zm-roi embed`: embed the memories that have no embedding from the model in force (or an older
model's).

Memories written by other paths than `zm-roi import` (an agent, the Data API, SQL) arrive without an
embedding; the lexical leg finds them meanwhile. `zm-roi import` embeds its own memories here too
(`embed_memories` with their ids), after they are written and searchable. Connected as `roi_embedder`,
which reads only the memory text it embeds and writes only the embedding columns; each batch is one
transaction and one call of the model's batch API (the offline model spreads a batch over every
core), rows locked with SKIP LOCKED so two backfills (or a backfill and an import) share the work and
an interrupted one resumes where it stopped, and every call is metered as a usage event (purpose
`embedding`) attributed to the memory's author. Offline, each leg is a pass of its own (MiniLM into
`embedding_minilm`, the faster model, then e5 into `embedding`, one metered call per batch and model),
so the first leg serves recall before the second starts. Probe questions are not read here: roi_embedder never
sees one. Questions not embedded by the model in force are queued as embed_question work for
`zm-roi worker`, the one role that reads them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import psycopg

from zm_roi import embeddings
from zm_roi.progress import Progress
from zm_roi.queries import query

# Rows per model call and transaction. 64 of the offline model take ~3.5 s on two cores: large enough
# that both cores stay busy, short enough that the rows' locks and the progress line move along.
BATCH = 64


# Which query names each leg's column uses (queries.sql).
_SUFFIX = {"embedding": "", "embedding_minilm": "_minilm"}


@dataclass
class Backfilled:
    memories: int = 0
    questions_queued: int = 0


def _embed_batch(conn: psycopg.Connection, model: str, select: str, store: str, ids=None) -> int:
    with conn.transaction():
        rows = conn.execute(query(select), {"model": model, "batch": BATCH, "ids": ids}).fetchall()
        if not rows:
            return 0
        embedded = embeddings.embed(
            [embeddings.memory_text(row[2], row[3]) for row in rows], as_query=False, model=model
        )
        with conn.cursor() as cur:
            stored = zip(rows, embedded.vectors, strict=True)
            cur.executemany(
                query(store),
                [{"id": row[0], "embedding": embeddings.literal(v), "model": model} for row, v in stored],
            )
        tokens: dict[object, int] = defaultdict(int)
        share = embedded.input_tokens // len(rows)
        for row in rows:
            tokens[row[1]] += share  # metered per author and batch
        for owner, count in tokens.items():
            conn.execute(query("record_embedding_usage"), {"owner_id": owner, "model": model, "input_tokens": count})
        return len(rows)


def embed_memories(
    conn: psycopg.Connection,
    model: str,
    ids: list | None = None,
    *,
    quiet: bool = False,
    leg: str = "embedding",
    step: str = "",
) -> int:
    """Embed the live memories not yet embedded by `model` in `leg`'s column (only those of `ids`
    when given), with a progress line (`step`, e.g. "1 of 2", says which pass it is, so that the
    time left of a first pass is not read as the whole import's); returns how many this call
    embedded. Each batch commits on an autocommit connection (inside an open transaction, as
    `insert_memories` calls it, each is a savepoint)."""
    suffix = _SUFFIX[leg]
    among = "" if ids is None else "_among"
    count_query, select = f"count_memories_to_embed{among}{suffix}", f"memories_to_embed{among}{suffix}"
    total = conn.execute(query(count_query), {"model": model, "ids": ids}).fetchone()[0]
    if not total:
        return 0
    label = f"embedding with {model}" + (f" (pass {step})" if step else "")
    progress = Progress(label, total, quiet=quiet)
    try:
        while count := _embed_batch(conn, model, select, f"store_memory_embedding{suffix}", ids):
            progress.advance(count)
    finally:
        progress.close()
    return progress.done


def embed_every_leg(
    conn: psycopg.Connection, models: dict[str, str], ids: list | None = None, *, quiet: bool = False
) -> int:
    """embed_memories for each leg in force (`embeddings.configured_models()`); returns how many
    memories the first leg embedded (the second embeds the same ones)."""
    legs = list(models.items())
    counts = [
        embed_memories(conn, model, ids, quiet=quiet, leg=leg, step=f"{n} of {len(legs)}" if len(legs) > 1 else "")
        for n, (leg, model) in enumerate(legs, 1)
    ]
    return max(counts, default=0)


def backfill(db_url: str, models: dict[str, str], *, quiet: bool = False) -> Backfilled:
    """Embed every live memory not yet embedded by each leg's model, and queue the active probe
    questions not yet embedded by them for the worker."""
    done = Backfilled()
    with psycopg.connect(db_url, autocommit=True) as conn:
        done.memories = embed_every_leg(conn, models, quiet=quiet)
        args = {"model": models["embedding"], "minilm_model": models.get("embedding_minilm")}
        done.questions_queued = conn.execute(query("queue_question_embeddings"), args).fetchone()[0]
    return done
