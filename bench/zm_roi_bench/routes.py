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
lexicon, with and without the primary key) beside a plain copy, for their sizes; and in blocks (decision
0027's prototype: arrays of memory ids and impacts per layer, lexeme and impact band, one block per write
statement or merged), their sizes and the pages and ms of reading a question's lists from them against the
real postings (`--postings-only` measures just these, after `today`).
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
PER_TERM = 1500  # roi.recall_lexical_leg's per_term
# The blocks of the prototype: per write statement of the importer's batch, and merged up to 256 a block.
BLOCKS = {"blocks_per_statement": {"statement": 500, "block": 0}, "blocks_merged": {"statement": 0, "block": 256}}


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


def lists_read(conn: psycopg.Connection, name: str, params: dict, questions: list[dict]) -> dict:
    """p50 shared buffers and ms of reading each question's lists (real postings, or the blocks `name`), and
    the total of their summed impacts and their memories, which equal the real postings' if the lists do."""
    text = bench_query(name).replace("{name}", params.get("name", ""))
    touched, ms, totals = [], [], [0.0, 0]
    for q in questions:
        values = {**params, "question": q["question"]}
        plan = conn.execute(text, values).fetchone()[0]
        touched.append(pages.buffers(plan))
        ms.append(plan[0]["Execution Time"])
        rows = conn.execute(text.split("\n", 1)[1], values).fetchall()
        totals[0] += sum(r[1] for r in rows)
        totals[1] += len(rows)
    conn.commit()
    return {
        "buffers_p50": statistics.median(touched),
        "ms_p50": round(statistics.median(ms), 2),
        "impact_total": round(totals[0], 3),
        "memories": totals[1],
    }


def blocks_route(conn: psycopg.Connection, project_id: str, questions: list[dict]) -> dict:
    """The postings in blocks beside the real ones: sizes, and the lists read from each."""
    conn.execute("create schema if not exists routes_scratch")
    params = {"layer": project_id, "per_term": PER_TERM}
    figure = {"postings": lists_read(conn, "routes_postings_read", params, questions)}
    for name, shape in BLOCKS.items():
        text = bench_query("routes_postings_blocks").replace("{name}", name)
        conn.execute(text.replace("{statement}", str(shape["statement"])).replace("{block}", str(shape["block"])))
        conn.commit()
        conn.autocommit = True
        conn.execute(f"vacuum analyze routes_scratch.{name}")
        conn.autocommit = False
        rows = conn.execute(f"select count(*), sum(n) from routes_scratch.{name}").fetchone()
        figure[name] = {
            **shape,
            "rows": rows[0],
            "postings": int(rows[1]),
            **lists_read(conn, "routes_blocks_read", {**params, "name": name}, questions),
        }
    figure["sizes"] = dict_sizes(conn)
    figure["writes"] = write_seconds(conn)
    return figure


# The postings' indexes besides the impact index, one set per layout: today's primary key, and the
# deduplicated index on memory_id that replaced it.
WRITE_LAYOUTS = {
    "primary key (memory_id, lexeme)": "alter table routes_scratch.{name} add primary key (memory_id, lexeme)",
    "index on memory_id": "create index on routes_scratch.{name} (memory_id)",
}


def write_seconds(conn: psycopg.Connection, rounds: int = 4) -> dict:
    """Seconds to write the real postings again in statements of 500 memories, each layout's indexes in
    place, the layouts taking turns (which goes first alternates by round); p50 over the rounds."""
    conn.execute(bench_query("routes_postings_write_staged"))
    batches = conn.execute("select max(batch) + 1 from routes_scratch.staged").fetchone()[0]
    seconds: dict = {layout: [] for layout in WRITE_LAYOUTS}
    for r in range(rounds):
        order = list(WRITE_LAYOUTS) if r % 2 == 0 else list(reversed(WRITE_LAYOUTS))
        for i, layout in enumerate(order):
            name = f"write_{i}"
            conn.execute(bench_query("routes_postings_write_table").replace("{name}", name))
            conn.execute(WRITE_LAYOUTS[layout].replace("{name}", name))
            conn.commit()
            started = time.monotonic()
            for batch in range(batches):
                conn.execute(bench_query("routes_postings_write_batch").replace("{name}", name), {"batch": batch})
                conn.commit()
            seconds[layout].append(round(time.monotonic() - started, 2))
    return {layout: {"seconds": s, "p50": statistics.median(s)} for layout, s in seconds.items()}


def run(size: int, seed: int, adr_corpus: Path, hnsw: bool, say=print, postings_only: bool = False) -> dict:
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
        if postings_only:
            say("postings in blocks")
            figures["postings_blocks"] = blocks_route(conn, project_id, questions)
            return figures
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
    parser.add_argument("--postings-only", action="store_true", help="after `today`, only the postings in blocks")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    figures = run(args.size, args.seed, args.adr_corpus, not args.no_hnsw, postings_only=args.postings_only)
    pages.print_json(figures, args.out)


if __name__ == "__main__":
    main()
