"""Routes to fewer bytes per memory (issue 35, decisions 0021 and 0023), tried in place in a scratch database.

Run: `PYTHONPATH=bench .venv/bin/python -m zm_roi_bench.routes [--size 10000] [--adr-corpus PATH] [--out FILE]`.

One layer of real text written the import's way (pages.py's `write_layer`: rows by the importer, then
both vector columns by the backfill's UPDATE; random unit vectors, whose bytes are the models'), then,
in order, each layout measured with the bytes split of footprint.py (every part after a rewrite, so the
layouts compare without dead space):
- `today`: both vector columns halfvec(384), as the migrations define them (decision 0023), after
  `vacuum analyze` (the user's path), and after `vacuum full` (`today, rewritten`), with pages.py's
  pages per recall;
- `bit`: each vector's sign bits as a stored bit(384) column and the covering indexes holding those
  instead of the vectors; the heap keeps the halfvec vectors for the exact re-rank.
Besides: the average bytes of each column, one layer's HNSW index as pg_cron builds it, the pages one
semantic leg reads exactly from today's covering index and with the bit index plus a re-rank of its
best 80 from the heap, and the postings rebuilt in two compact layouts (lexemes as integer ids into a
lexicon, with and without a primary key) beside a plain copy, for their sizes. The postings in blocks are
blocks.py's (decision 0049).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import psycopg

from zm_roi_bench import footprint, pages
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.layers import EMAIL, real_memories
from zm_roi_bench.sql import bench_query

LEG_BUFFERS = ("routes_exact_leg_buffers", "routes_bq_leg_buffers")


def maintenance(conn: psycopg.Connection, *names: str) -> None:
    """Statements that cannot run in a transaction block (vacuum), one by one."""
    conn.commit()
    conn.autocommit = True
    for name in names:
        conn.execute(bench_query(name))
    conn.autocommit = False


def snapshot(conn: psycopg.Connection, recall: tuple | None = None) -> dict:
    """The bytes split now and, given (user id, project id, questions), pages.py's pages per recall."""
    cur = conn.execute(bench_query("routes_column_bytes"))
    columns = dict(zip([d.name for d in cur.description], cur.fetchone(), strict=True))
    storage = dict(conn.execute(bench_query("routes_storage"), {}).fetchall())
    figure = {"bytes": footprint.measure(conn), "columns": columns, "storage": storage}
    if recall:
        figure["recall"] = pages.measure(conn, *recall)
    conn.commit()
    return figure


def leg_buffers(
    conn: psycopg.Connection, name: str, project_id: str, questions: list[dict], index_only: bool = False
) -> dict:
    """p50 shared buffers and ms of one semantic leg; with `index_only`, sequential scans priced out (the
    planner scans the heap rather than the bit index for the Hamming order)."""
    conn.execute(bench_query("routes_seqscan"), {"setting": "off" if index_only else "on"})
    touched, ms = [], []
    for q in questions:
        plan = conn.execute(bench_query(name), {"project_id": project_id, "embedding": q["embedding"]}).fetchone()[0]
        touched.append(pages.buffers(plan))
        ms.append(plan[0]["Execution Time"])
    conn.commit()
    return {"buffers_p50": statistics.median(touched), "ms_p50": round(statistics.median(ms), 2)}


def hnsw_bytes(conn: psycopg.Connection, project_id: str) -> dict:
    statement = conn.execute(bench_query("routes_hnsw_statement"), {"project_id": project_id}).fetchone()[0]
    started = time.monotonic()
    maintenance_statement(conn, statement)
    seconds = round(time.monotonic() - started, 1)
    size = conn.execute(bench_query("routes_hnsw_bytes")).fetchone()[0]
    conn.execute(bench_query("routes_drop_hnsw"))
    conn.commit()
    return {"bytes": size, "seconds": seconds}


def maintenance_statement(conn: psycopg.Connection, statement: str) -> None:
    conn.execute(statement)
    conn.commit()


def bit_indexes(conn: psycopg.Connection, covering: list[tuple[str, str]]) -> None:
    """The covering vector indexes (name, definition) replaced by the same indexes over the bit columns."""
    for name, definition in covering:
        column = "embedding_minilm" if "embedding_minilm" in definition else "embedding"
        conn.execute(f"drop index {name}")
        short = name.split(".")[-1]
        conn.execute(definition.replace(f", {column})", f", {column}_bq)").replace(short, f"{short}_bq"))
    conn.commit()


def bit_route(conn: psycopg.Connection, project_id: str, questions: list[dict]) -> dict:
    """The bit columns and their covering indexes instead of the vectors', the table rewritten; its bytes
    and one leg's pages."""
    covering = conn.execute(bench_query("routes_covering_indexes")).fetchall()
    conn.execute(bench_query("routes_bq_columns"))
    bit_indexes(conn, covering)
    maintenance(conn, "routes_vacuum_full_memories", "routes_analyze")
    figure = snapshot(conn)
    figure["bq_leg"] = leg_buffers(conn, LEG_BUFFERS[1], project_id, questions)
    figure["bq_leg_from_index"] = leg_buffers(conn, LEG_BUFFERS[1], project_id, questions, index_only=True)
    conn.execute(bench_query("routes_seqscan"), {"setting": "on"})
    conn.commit()
    return figure


def run(size: int, seed: int, adr_corpus: Path, hnsw: bool, say=print) -> dict:
    os.environ["ZM_EMBEDDING_MODEL"] = "none"
    memories, paraphrases = real_memories(pages.ROOT, adr_corpus)
    questions = pages.random_questions(paraphrases, seed)
    figures: dict = {"machine": machine(), "size": size, "questions": len(questions), "routes": {}}
    routes = figures["routes"]
    with throwaway_cluster(pages.ROOT, say) as cluster, psycopg.connect(cluster.url()) as conn:
        figures["server"] = server(conn)["version"]
        conn.execute(bench_query("pages_autovacuum_off"))
        conn.commit()
        project_id = pages.write_layer(conn, memories, {}, size, seed, say)
        user_id = conn.execute(bench_query("layers_user_id"), {"email": EMAIL}).fetchone()[0]
        recall = (user_id, project_id, questions)
        maintenance(conn, "pages_vacuum_analyze")
        say("today, after vacuum analyze")
        routes["today"] = snapshot(conn, recall)
        maintenance(conn, "routes_vacuum_full_memories", "routes_vacuum_full_postings", "routes_analyze")
        say("today, rewritten")
        routes["today, rewritten"] = snapshot(conn, recall)
        routes["today, rewritten"]["exact_leg"] = leg_buffers(conn, LEG_BUFFERS[0], project_id, questions)
        if hnsw:
            say("one layer's HNSW index")
            figures["hnsw"] = hnsw_bytes(conn, project_id)
        say("bit covering indexes, halfvec in the heap")
        routes["bit"] = bit_route(conn, project_id, questions)
        say("compact postings")
        conn.execute(bench_query("routes_postings_lexicon"))
        conn.execute(bench_query("routes_postings_copy"))
        conn.commit()
        sizes = {"without primary key": dict_sizes(conn)}
        conn.execute(bench_query("routes_postings_lexicon_pkey"))
        conn.commit()
        sizes["with primary key"] = dict_sizes(conn)
        figures["postings_layouts"] = sizes
    return figures


def dict_sizes(conn: psycopg.Connection) -> dict:
    return {
        name: {"heap": heap, "indexes": indexes}
        for name, heap, indexes in conn.execute(bench_query("routes_scratch_sizes"))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--adr-corpus", type=Path, default=pages.ADR_CORPUS)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-hnsw", action="store_true", help="skip the HNSW index sizes (a minute or two each)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    figures = run(args.size, args.seed, args.adr_corpus, not args.no_hnsw)
    pages.print_json(figures, args.out)


if __name__ == "__main__":
    main()
