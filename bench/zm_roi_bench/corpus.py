"""Build the synthetic corpus on the bench cluster (the generator itself is corpus.sql, beside this file).

A bulk load, done the way one loads a big table: the secondary indexes of public.memories are
dropped and recreated from their own definitions afterwards (so the schema ends exactly as the
migrations made it), foreign-key triggers are skipped (`session_replication_role = replica`: the
generator only draws ids that exist), chunks are generated on two connections, then ANALYZE.
"""

from __future__ import annotations

import queue
import threading
import time

import psycopg
from psycopg.rows import dict_row

from zm_roi_bench.sql import CORPUS, bench_query

CHUNK = 10_000  # bench.chunk_size(): fixed, so a corpus of any size is a prefix of a larger one
LOAD_CONNECTIONS = 2
INDEX_BUILD_MEMORY = "1GB"


def _chunks(size: int) -> list[tuple[int, int]]:
    full, rest = divmod(size, CHUNK)
    return [(chunk, CHUNK) for chunk in range(full)] + ([(full, rest)] if rest else [])


def build(url: str, size: int, seed: int, say=print, owners: int | None = None) -> dict:
    """Population (`owners` users, default 1,000), `size` memories and ANALYZE. Returns how long each
    phase took (seconds)."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(CORPUS.read_text())
        if owners is None:
            conn.execute(bench_query("build_population"), {"seed": seed})
        else:
            conn.execute(bench_query("build_population_for_owners"), {"seed": seed, "owners": owners})
        indexes = conn.execute(bench_query("memories_secondary_indexes")).fetchall()
        for name, _ in indexes:
            conn.execute(f"drop index {name}")  # names come from pg_index, not from input
    timings["population"] = time.monotonic() - started

    started = time.monotonic()
    work: queue.Queue = queue.Queue()
    for item in _chunks(size):
        work.put(item)
    failures: list[BaseException] = []
    done = [0]

    def load() -> None:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("set session_replication_role = replica")
                while True:
                    try:
                        chunk, count = work.get_nowait()
                    except queue.Empty:
                        return
                    conn.execute(bench_query("add_memories"), {"chunk": chunk, "count": count})
                    done[0] += count
                    if chunk % 10 == 9:
                        say(f"  {done[0]:,} memories")
        except BaseException as exc:  # surfaced after join
            failures.append(exc)

    threads = [threading.Thread(target=load) for _ in range(LOAD_CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    timings["memories"] = time.monotonic() - started

    started = time.monotonic()
    say(f"  recreating {len(indexes)} indexes")

    def build_indexes(definitions: list[str]) -> None:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"set maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
                for definition in definitions:
                    conn.execute(definition)
        except BaseException as exc:
            failures.append(exc)

    # Two connections, one per core, each building every other index.
    definitions = [d for _, d in indexes]
    threads = [threading.Thread(target=build_indexes, args=(part,)) for part in (definitions[0::2], definitions[1::2])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    timings["indexes"] = time.monotonic() - started

    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        # The load skipped the triggers; no owner has a pool yet, so there is nothing to mark.
        conn.execute("vacuum analyze")
    timings["analyze"] = time.monotonic() - started
    return {key: round(value, 1) for key, value in timings.items()}


def shape(url: str) -> dict:
    """What the corpus looks like: counts, mixes, lengths, skew and sizes."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return dict(conn.execute(bench_query("corpus_shape")).fetchone())
