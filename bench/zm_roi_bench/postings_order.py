"""python -m zm_roi_bench.postings_order — what the postings' heap order costs a recall in buffers (issue 44).

The lexical leg reads each question lexeme's postings in impact order from the impact index, index-only.
For every posting the scan asks the visibility map whether its heap page is all-visible, and each time
the next posting's heap page is covered by another visibility-map page than the last one's, PostgreSQL
releases one map page and pins the other: one more shared buffer in EXPLAIN (BUFFERS). A list's postings
lie in the heap in the order their memories were written, so at 100,000 rows (a postings heap of more
than 32,672 pages, the pages one map page covers) consecutive postings of a list keep switching map pages.

First the shape alone, on the bench's cluster: 4,500,000 rows in lists of ~1,500 by key (the postings of
100,000 memories), 1,500 rows of one key read index-only, with the heap in random order and in key order.
Then one layer of real text is built once, as `make bench SIZE=anchor-100k` builds it, on the same
cluster, and measured as the project's member on the anchor bench's questions, twice: as written (`memory
order`), then with the layer's postings rewritten in list order (layer, lexeme, impact descending) by
the bench as the superuser and vacuumed (`list order`), which no production path does. Same rows, same
indexes' definitions: the hybrid's and the lexical leg's buffers (p50, EXPLAIN (ANALYZE, BUFFERS)), and
whether every question's hybrid top 10 stayed the same.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
from pathlib import Path

import psycopg

from zm_roi.identity import act_as, claims_for
from zm_roi.localdb import project_root
from zm_roi_bench import anchor, graph_m, layers, report
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.pages import buffers
from zm_roi_bench.sql import bench_query

LEG = (
    "explain (analyze, buffers, format json) "
    "select * from roi.recall_lexical_leg(%(question)s, %(project_id)s, null, false, 20, 300)"
)
REWRITE = (
    "create temporary table moved as select * from public.memory_postings;",
    "truncate public.memory_postings;",
    "insert into public.memory_postings select * from moved order by layer_id, lexeme, impact desc;",
    "drop table moved;",
)


def shape_alone(conn: psycopg.Connection) -> list[dict]:
    """The effect without recall: 4,500,000 rows in lists of ~1,500 by key, a (key, value desc) covering
    index, vacuumed; buffers of reading 1,500 rows of one key index-only, with the heap in random order
    and in key order."""
    conn.execute("create table bench_lists (k int, v real, id uuid, pad text)")
    conn.execute(
        "insert into bench_lists select (random() * 3000)::int, random(), gen_random_uuid(), repeat('x', 9) "
        "from generate_series(1, 4500000)"
    )
    conn.execute("create table bench_lists_ordered as select * from bench_lists order by k, v desc")
    figures = []
    for table, order in (("bench_lists", "random"), ("bench_lists_ordered", "key")):
        conn.execute(f"create index on {table} (k, v desc) include (id)")
        conn.execute(f"vacuum analyze {table}")
        pages = conn.execute(f"select pg_relation_size('{table}') / 8192").fetchone()[0]
        for k in (7, 1500, 2999):
            read = f"explain (analyze, buffers, format json) select id from {table} where k = {k} "
            read += "order by v desc limit 1500"
            plan = conn.execute(read).fetchone()[0]
            figures.append(
                {
                    "heap_order": order,
                    "heap_pages": pages,
                    "key": k,
                    "rows": plan[0]["Plan"]["Actual Rows"],
                    "buffers": buffers(plan),
                }
            )
        conn.execute(f"drop table {table}")
    return figures


def measure(conn: psycopg.Connection, built: dict, questions: list[dict]) -> dict:
    """graph_m's figures (the hybrid, each semantic leg, the hybrid's ranks), the lexical leg's buffers and
    the hybrid's top 10 per question."""
    figures = graph_m.measure(conn, built, questions)
    project_id = next(iter(built["projects"].values()))
    figures["lexical"], figures["lists"] = [], []
    with conn.transaction():
        act_as(conn, claims_for(built["user_id"], layers.EMAIL))
        for q in questions:
            args = dict(q, project_id=project_id)
            figures["lexical"].append(buffers(conn.execute(LEG, args).fetchone()[0]))
            figures["lists"].append([str(r[0]) for r in conn.execute(bench_query("layers_hybrid"), args)])
        conn.execute("reset role")
    return figures


def summary(arms: dict[str, dict], questions: list[dict]) -> dict:
    """Each arm's `measure` figures as a report gives them: p50 buffers of the hybrid and each leg, the
    hybrid's p50 ms, how many questions keep the first arm's top 10, and the quality per question set."""
    reference = next(iter(arms.values()))["lists"]
    return {
        name: {
            "hybrid_buffers_p50": statistics.median(a["hybrid"]),
            "hybrid_ms_p50": round(statistics.median(a["hybrid_ms"]), 2),
            "lexical_leg_buffers_p50": statistics.median(a["lexical"]),
            "e5_leg_buffers_p50": statistics.median(a["embedding"]),
            "minilm_leg_buffers_p50": statistics.median(a["embedding_minilm"]),
            "hybrid_lists_unchanged": sum(x == r for x, r in zip(a["lists"], reference, strict=True)),
            "quality": anchor.quality(a["ranks"], questions),
        }
        for name, a in arms.items()
    }


def heap_pages(conn: psycopg.Connection) -> int:
    return conn.execute("select pg_relation_size('public.memory_postings') / 8192").fetchone()[0]


def run(root: Path, adr_corpus: Path, size: int, seed: int, say) -> dict:
    started, at_start = time.monotonic(), machine()
    memories, paraphrases, vectors = layers.embedded_corpus(root, adr_corpus, say)
    with throwaway_cluster(root, say) as cluster, psycopg.connect(cluster.url()) as conn:
        say("the shape alone: 4,500,000 rows in lists of ~1,500, heap in random and in key order")
        conn.autocommit = True
        shape = shape_alone(conn)
        conn.autocommit = False
        built, _ = layers.prepare(conn, memories, vectors, (size,), seed, say, before=False)
        questions = layers.questions_for(conn, memories, paraphrases)
        conn.commit()
        arms = {}
        say("measuring the postings as written")
        arms["memory order"] = dict(measure(conn, built, questions), heap_pages=heap_pages(conn))
        say("rewriting the postings in list order")
        for statement in REWRITE:
            conn.execute(statement)
        conn.commit()
        conn.autocommit = True
        conn.execute("vacuum analyze public.memory_postings")
        conn.autocommit = False
        say("measuring the postings in list order")
        arms["list order"] = dict(measure(conn, built, questions), heap_pages=heap_pages(conn))
        version = server(conn)["version"]
    return {
        "date": datetime.date.today().isoformat(),
        "size": size,
        "seed": seed,
        "questions": {s: sum(q["set"] == s for q in questions) for s in anchor.SETS},
        "arms": {
            name: dict(figures, postings_heap_pages=arms[name]["heap_pages"])
            for name, figures in summary(arms, questions).items()
        },
        "shape_alone": shape,
        "raw": {
            name: {k: a[k] for k in ("hybrid", "lexical", "embedding", "embedding_minilm")} for name, a in arms.items()
        },
        "server": version,
        "machine": dict(at_start, load_average_at_end=[round(x, 2) for x in os.getloadavg()]),
        "seconds": round(time.monotonic() - started, 1),
    }


def render(results: dict) -> str:
    n = results["questions"]
    total = sum(n.values())
    lines = [
        f"# The postings' heap order and a recall's buffers, {results['size']:,} rows ({results['date']})",
        "",
        f"`python -m zm_roi_bench.postings_order --size {results['size']}` (seed {results['seed']}): one project "
        "built as `make bench SIZE=anchor-100k` builds it, measured as written, then with its postings rewritten "
        f"in list order and vacuumed; {n['paraphrased']} paraphrased and {n['templated']} templated questions as "
        "the member. Buffers: p50 of EXPLAIN (ANALYZE, BUFFERS), the hybrid and each leg alone at depth 20 (the "
        f"lexical leg with the hybrid's pool of 300). Took {results['seconds']:.0f} s.",
        "",
        report.machine_line(results["machine"]),
        "",
        "| postings | heap pages | hybrid buffers p50 | lexical leg | e5 leg | MiniLM leg | hybrid top 10 unchanged "
        "| paraphrased hit@1 / hit@10 / MRR |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, a in results["arms"].items():
        p = a["quality"]["paraphrased"]
        lines.append(
            f"| {name} | {a['postings_heap_pages']:,} | {a['hybrid_buffers_p50']:,.0f} "
            f"| {a['lexical_leg_buffers_p50']:,.0f} | {a['e5_leg_buffers_p50']:,.0f} "
            f"| {a['minilm_leg_buffers_p50']:,.0f} | {a['hybrid_lists_unchanged']} of {total} "
            f"| {anchor.quality_cell(p)} |"
        )
    lines += [
        "",
        "The shape alone, without recall: 4,500,000 rows in lists of ~1,500 by key, read 1,500 rows of one key "
        "index-only from a (key, value desc) covering index, vacuumed.",
        "",
        "| heap order | heap pages | key | rows | buffers |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {f['heap_order']} | {f['heap_pages']:,} | {f['key']} | {f['rows']:,} | {f['buffers']:,} |"
        for f in results["shape_alone"]
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.postings_order", description=__doc__)
    layers.one_layer_arguments(parser, root)
    args = parser.parse_args(argv)
    results = run(root, Path(args.adr_corpus), args.size, args.seed, lambda t: print(t, flush=True))
    results["label"] = f"postings-order-{args.size // 1000}k"
    return report.publish(results, Path(args.out), render)


if __name__ == "__main__":
    raise SystemExit(main())
