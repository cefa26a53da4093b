"""python -m zm_roi_bench.blocks — the postings as blocks in impact order beside the real ones (issue 44:
the bytes a memory and the lexical leg's buffers; the route of decision 0027).

One project of real-text memories written the import's way on a throwaway cluster (pages.write_layer: the
importer's statements, so the postings are the triggers' own), then `vacuum analyze`. From its postings,
blocks are built as a compaction would leave them: one row per layer, lexeme and block number, holding
`block_size` memory ids and their impacts, each list's highest impact in block 0. A list's best 1,500
postings (roi.recall_lexical_leg's per_term) are then its first blocks, sliced at the count: no band is
read whole and nothing is sorted again (the two costs 0027 found in its band prototype). No trigger,
policy or recall reads the blocks: only their bytes and the read of each question's lists are measured,
as the superuser on both sides, against the real postings read as the lexical leg reads them (an
index-only scan per lexeme, in impact order, cut at 1,500). Per layout: bytes (heap, TOAST and indexes)
a memory; shared buffers of EXPLAIN (ANALYZE, BUFFERS) and client ms of each question's lists, p50 over
the paraphrased questions, the layouts taking turns question by question; and the total of the summed
impacts and of the memories listed, which equal the postings' when the lists do.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
from pathlib import Path

import psycopg

from zm_roi.localdb import project_root
from zm_roi_bench import layers, pages, report
from zm_roi_bench.cluster import machine, throwaway_cluster
from zm_roi_bench.sql import bench_query

PER_TERM = 1500  # roi.recall_lexical_leg's per_term
BLOCK_SIZES = (64, 128, 256)
ROUNDS = 3
# Two ways to read a list's first blocks (queries.sql): unnested in FROM and cut by position, or sliced and
# unnested in the select list.
READS = {"blocks_read": "unnest in from", "blocks_read_sliced": "sliced"}


def block_table(block_size: int) -> tuple[str, str]:
    """The name of the layer's blocks of `block_size` and the statements that build them (queries.sql)."""
    name = f"ordered_{block_size}"
    return name, bench_query("blocks_build").replace("{name}", name).replace("{block}", str(block_size))


def block_reads(name: str, block_size: int) -> dict[str, str]:
    """Each way of reading a question's lists from the blocks `name`, by its layout's label."""
    return {
        f"{name}, {label}": bench_query(read).replace("{name}", name).replace("{block}", str(block_size))
        for read, label in READS.items()
    }


def vacuum_analyze(conn: psycopg.Connection, table: str = "") -> None:
    """vacuum analyze, which refuses a transaction block (the visibility map for index-only scans)."""
    conn.commit()
    conn.autocommit = True
    conn.execute(f"vacuum analyze {table}")
    conn.autocommit = False


def read_lists(conn: psycopg.Connection, text: str, params: dict) -> tuple[int, float, tuple]:
    """One question's lists: the plan's shared buffers, the client ms of the read itself, its totals."""
    plan = conn.execute(f"explain (analyze, buffers, timing off, format json) {text}", params).fetchone()[0]
    started = time.perf_counter()
    totals = conn.execute(text, params).fetchone()
    took = (time.perf_counter() - started) * 1000
    return pages.buffers(plan), took, (round(float(totals[0] or 0), 3), totals[1])


def measure(conn: psycopg.Connection, layouts: dict[str, str], layer: str, questions: list[dict]) -> dict:
    """Per layout: p50 buffers and ms of each question's lists, the layouts' order turning by question and
    round; and the lists' totals summed over the questions."""
    touched: dict = {name: [] for name in layouts}
    ms: dict = {name: [] for name in layouts}
    totals: dict = {name: [0.0, 0] for name in layouts}
    names = list(layouts)
    for r in range(ROUNDS):
        for i, q in enumerate(questions):
            turn = (r + i) % len(names)
            for name in names[turn:] + names[:turn]:
                buffers, took, (impact, listed) = read_lists(
                    conn, layouts[name], {"question": q["question"], "layer": layer, "per_term": PER_TERM}
                )
                touched[name].append(buffers)
                ms[name].append(took)
                if r == 0:
                    totals[name][0] += impact
                    totals[name][1] += listed
    conn.commit()
    return {
        name: {
            "buffers_p50": statistics.median(touched[name]),
            "buffers_max": max(touched[name]),
            "ms_p50": round(statistics.median(ms[name]), 2),
            "impact_total": round(totals[name][0], 3),
            "memories_listed": totals[name][1],
        }
        for name in names
    }


def sizes(conn: psycopg.Connection, size: int) -> dict:
    """Bytes a memory of the real postings and of each block table: heap (TOAST included) and indexes."""
    rows = conn.execute(bench_query("blocks_sizes")).fetchall()
    return {
        ("postings" if name == "memory_postings" else name): {
            "rows": n,
            "heap": round(heap / size),
            "indexes": round(indexes / size),
        }
        for name, n, heap, indexes in rows
    }


def run(root: Path, adr_corpus: Path, size: int, seed: int, say) -> dict:
    os.environ["ZM_EMBEDDING_MODEL"] = "none"  # the rows and their postings alone: no vector is read here
    memories, paraphrases = layers.real_memories(root, adr_corpus)
    started, at_start = time.monotonic(), machine()
    with throwaway_cluster(root, say=say) as cluster, psycopg.connect(cluster.url()) as conn:
        conn.execute(bench_query("pages_autovacuum_off"))
        conn.commit()
        layer = pages.write_layer(conn, memories, {}, size, seed, say, fill_vectors=False)
        vacuum_analyze(conn)
        conn.execute("create schema blocks_scratch")
        conn.commit()
        layouts = {"postings": bench_query("blocks_postings_read")}
        for block_size in BLOCK_SIZES:
            say(f"blocks of {block_size}")
            name, statements = block_table(block_size)
            conn.execute(statements)
            vacuum_analyze(conn, f"blocks_scratch.{name}")
            layouts.update(block_reads(name, block_size))
        say(f"reading {len(paraphrases)} questions' lists, {ROUNDS} rounds")
        figures = measure(conn, layouts, layer, paraphrases)
        stored = sizes(conn, size)
        postings = conn.execute("select count(*) from public.memory_postings").fetchone()[0]
    return {
        "label": f"blocks-{size // 1000}k",
        "date": datetime.date.today().isoformat(),
        "machine": at_start,
        "size": size,
        "seed": seed,
        "postings": postings,
        "per_term": PER_TERM,
        "questions": len(paraphrases),
        "rounds": ROUNDS,
        "bytes_a_memory": stored,
        "lists": figures,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.monotonic() - started, 1),
    }


def render(results: dict) -> str:
    m = results["machine"]
    lines = [
        f"# The postings as blocks in impact order, {results['size']:,} rows ({results['date']})",
        "",
        f"`python -m zm_roi_bench.blocks --size {results['size']}` (seed {results['seed']}): one project written the "
        f"import's way ({results['postings']:,} postings), vacuumed; each block table built from its postings. "
        f"Each of {results['questions']} paraphrased questions' lists read to {results['per_term']:,} postings a "
        f"lexeme, {results['rounds']} rounds, the layouts taking turns; as the superuser on every side. "
        "How it works: the module's docstring.",
        "",
        f"Machine: {m['cpu_model']}, {m['cores']} cores, load average at start {m['load_average_at_start']}, "
        f"at end {results['load_average_at_end']}.",
        "",
        "| layout | rows | bytes a memory: heap | indexes | all | lists: buffers p50 (max) | ms p50 "
        "| impacts summed | memories listed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, read in results["lists"].items():
        b = results["bytes_a_memory"][name.split(",")[0]]
        lines.append(
            f"| {name} | {b['rows']:,} | {b['heap']:,} | {b['indexes']:,} | {b['heap'] + b['indexes']:,} | "
            f"{read['buffers_p50']:g} ({read['buffers_max']}) | {read['ms_p50']} | {read['impact_total']} | "
            f"{read['memories_listed']:,} |"
        )
    lines += ["", f"Took {results['seconds']} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.blocks", description=__doc__)
    layers.one_layer_arguments(parser, root)
    args = parser.parse_args(argv)
    results = run(root, Path(args.adr_corpus), args.size, args.seed, lambda text: print(text, flush=True))
    return report.publish(results, Path(args.out), render)


if __name__ == "__main__":
    raise SystemExit(main())
