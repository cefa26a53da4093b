"""python -m zm_roi_bench.blocks — the postings as blocks in impact order beside the real ones (issue 44:
the bytes a memory and the lexical leg's buffers; decision 0049, after 0027's band prototype).

One project of real-text memories written the import's way on a throwaway cluster (pages.write_layer: the
importer's statements, so the postings are the triggers' own), then `vacuum analyze`. From its postings,
blocks are built as a compaction would leave them: one row per layer, lexeme and block number, holding
`block_size` memory ids and their impacts, each list's highest impact in block 0. A list's best 1,500
postings (roi.recall_lexical_leg's per_term) are then its first blocks, sliced at the count: no band is
read whole and nothing is sorted again (the two costs 0027 found in its band prototype). Here no trigger,
policy or recall reads the blocks: only their bytes and the read of each question's lists are measured,
as the superuser on both sides, against the real postings read as the lexical leg reads them (an
index-only scan per lexeme, in impact order, cut at 1,500). Per layout: bytes (heap, TOAST and indexes)
a memory; shared buffers of EXPLAIN (ANALYZE, BUFFERS) and client ms of each question's lists, p50 over
the paraphrased questions, the layouts taking turns question by question; and the total of the summed
impacts and of the memories listed, which equal the postings' when the lists do.

`--hybrid`: the recall itself, end to end. One layer is built as `make bench SIZE=anchor-100k` builds it
(real text and its varied copies, both offline embeddings, the layer's HNSW indexes, vacuumed) and measured
as the project's member on the anchor bench's questions, as postings_order measures it (the hybrid's and
each leg's buffers, p50 of EXPLAIN (ANALYZE, BUFFERS); the hybrid's quality and top 10s). Then blocks of 128
are built from its postings, readable under the postings' own policy, and roi.recall_lexical_leg is
replaced, on this cluster only, by a copy whose two reads of the postings read the blocks instead
(`leg_reading_blocks`); measured again.
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
from zm_roi_bench import anchor, layers, pages, pool, postings_order, report
from zm_roi_bench.cluster import machine, throwaway_cluster
from zm_roi_bench.sql import bench_query

PER_TERM = 1500  # roi.recall_lexical_leg's per_term
BLOCK_SIZES = (64, 128, 256)
ROUNDS = 3
# Two ways to read a list's first blocks (queries.sql): unnested in FROM and cut by position, or sliced and
# unnested in the select list.
READS = {"blocks_read": "unnest in from", "blocks_read_sliced": "sliced"}
# The block size the recall is measured with (decision 0049).
HYBRID_BLOCK = 128


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


# roi.recall_lexical_leg's two reads of the postings (20_recall.sql), and the same reads from blocks: a
# list's first blocks sliced at per_term, and a list cut where its per_term-th posting exists. `offset 0`
# keeps that probe one per list, as the postings' `offset` does: without it the planner joined every list's
# block number per_term / 128 of the whole table to the question's lexemes (800 more buffers at 100,000 rows).
LEG_READS = (
    (
        """        select p.memory_id, p.impact from public.memory_postings p
        where p.layer_id = l.id and p.lexeme = t and p.layer_kind = l.kind
        order by p.impact desc
        limit per_term
""",
        """        select unnest(b.memory_ids[1:per_term - b.block * {block}]) as memory_id,
               unnest(b.impacts[1:per_term - b.block * {block}]) as impact
        from blocks_scratch.{name} b
        where b.layer_id = l.id and b.lexeme = t and b.layer_kind = l.kind
          and b.block < (per_term + {block} - 1) / {block}
""",
    ),
    (
        """        where exists (select from public.memory_postings p
                      where p.layer_id = l.id and p.lexeme = t and p.layer_kind = l.kind
                      order by p.impact desc
                      offset per_term - 1)) as list
""",
        """        where exists (select from blocks_scratch.{name} b
                      where b.layer_id = l.id and b.lexeme = t and b.layer_kind = l.kind
                        and b.block = (per_term - 1) / {block}
                        and cardinality(b.memory_ids) > (per_term - 1) % {block}
                      offset 0)) as list
""",
    ),
)


def leg_reading_blocks(definition: str, name: str, block_size: int) -> str:
    """roi.recall_lexical_leg's `definition` with its reads of the postings made reads of the blocks `name`."""
    instead = tuple(
        (shipped, blocks.replace("{name}", name).replace("{block}", str(block_size))) for shipped, blocks in LEG_READS
    )
    return pool.replaced(definition, instead)


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


def run_hybrid(root: Path, adr_corpus: Path, size: int, seed: int, say) -> dict:
    started, at_start = time.monotonic(), machine()
    memories, paraphrases, vectors = layers.embedded_corpus(root, adr_corpus, say)
    with throwaway_cluster(root, say=say) as cluster, psycopg.connect(cluster.url()) as conn:
        built, _ = layers.prepare(conn, memories, vectors, (size,), seed, say, before=False)
        questions = layers.questions_for(conn, memories, paraphrases)
        conn.commit()
        say("measuring the recall on the postings")
        arms = {"postings": postings_order.measure(conn, built, questions)}
        say(f"blocks of {HYBRID_BLOCK}, and the lexical leg reading them")
        conn.execute("create schema blocks_scratch")
        name, statements = block_table(HYBRID_BLOCK)
        building = time.monotonic()
        conn.execute(statements)
        conn.commit()
        build_seconds = round(time.monotonic() - building, 1)
        conn.execute(bench_query("blocks_member_reads").replace("{name}", name))
        conn.execute(leg_reading_blocks(pool.leg_definition(conn), name, HYBRID_BLOCK))
        vacuum_analyze(conn, f"blocks_scratch.{name}")
        say("measuring the recall on the blocks")
        arms["blocks"] = postings_order.measure(conn, built, questions)
        stored = sizes(conn, size)
    return {
        "label": f"blocks-hybrid-{size // 1000}k",
        "date": datetime.date.today().isoformat(),
        "size": size,
        "seed": seed,
        "block_size": HYBRID_BLOCK,
        "blocks_built_seconds": build_seconds,
        "bytes_a_memory": {"postings": stored["postings"], "blocks": stored[name]},
        "questions": {s: sum(q["set"] == s for q in questions) for s in anchor.SETS},
        "arms": postings_order.summary(arms, questions),
        "raw": {arm: {k: a[k] for k in ("hybrid", "hybrid_ms", "lexical")} for arm, a in arms.items()},
        "machine": dict(at_start, load_average_at_end=[round(x, 2) for x in os.getloadavg()]),
        "seconds": round(time.monotonic() - started, 1),
    }


def render_hybrid(results: dict) -> str:
    n = results["questions"]
    b = results["bytes_a_memory"]
    lines = [
        f"# The recall on blocks in impact order, {results['size']:,} rows ({results['date']})",
        "",
        f"`python -m zm_roi_bench.blocks --hybrid --size {results['size']}` (seed {results['seed']}): one project "
        "built as `make bench SIZE=anchor-100k` builds it, measured as the member on "
        f"{n['paraphrased']} paraphrased and {n['templated']} templated questions with its lexical leg reading the "
        f"postings, then reading blocks of {results['block_size']} built from them "
        f"({results['blocks_built_seconds']} s to build). Buffers: p50 of EXPLAIN (ANALYZE, BUFFERS), the hybrid "
        f"and each leg alone at depth 20. Took {results['seconds']:.0f} s.",
        "",
        report.machine_line(results["machine"]),
        "",
        f"Bytes a memory: postings {b['postings']['heap'] + b['postings']['indexes']:,}, blocks "
        f"{b['blocks']['heap'] + b['blocks']['indexes']:,} (heap with TOAST, and indexes).",
        "",
        "| lexical leg reads | hybrid buffers p50 | ms p50 | lexical leg | e5 leg | MiniLM leg "
        "| hybrid top 10 unchanged | paraphrased hit@1 / hit@10 / MRR | templated |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    total = sum(n.values())
    for arm, a in results["arms"].items():
        q = a["quality"]
        lines.append(
            f"| {arm} | {a['hybrid_buffers_p50']:,.0f} | {a['hybrid_ms_p50']} | {a['lexical_leg_buffers_p50']:,.0f} "
            f"| {a['e5_leg_buffers_p50']:,.0f} | {a['minilm_leg_buffers_p50']:,.0f} "
            f"| {a['hybrid_lists_unchanged']} of {total} | {anchor.quality_cell(q['paraphrased'])} "
            f"| {anchor.quality_cell(q['templated'])} |"
        )
    return "\n".join(lines) + "\n"


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


def say(text: str) -> None:
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.blocks", description=__doc__)
    layers.one_layer_arguments(parser, root)
    parser.add_argument("--hybrid", action="store_true", help="the recall end to end on a layer with embeddings")
    args = parser.parse_args(argv)
    if args.hybrid:
        results = run_hybrid(root, Path(args.adr_corpus), args.size, args.seed, say)
        return report.publish(results, Path(args.out), render_hybrid)
    return report.publish(run(root, Path(args.adr_corpus), args.size, args.seed, say), Path(args.out), render)


if __name__ == "__main__":
    raise SystemExit(main())
