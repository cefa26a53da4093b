"""python -m zm_roi_bench.graph_m — a large layer's HNSW indexes over the sign bits at several `m` (issue 44).

Decision 0032 built them with m 32 and left m 16 unmeasured. One layer of real text is built once, as
`make bench SIZE=anchor-100k` builds it (`layers.prepare`: real memories and varied copies, both offline
embeddings on every row, the layer's indexes built, vacuumed), on a throwaway cluster. Then, arm after arm,
both of the layer's indexes over the bits are dropped and built again with the arm's `m` (ef_construction
200, the rest of each definition as pg_cron's job writes it), and measured as the project's member with
row-level security applied, on the anchor bench's 41 paraphrased and 40 templated questions:
- the two indexes' bytes a row of the layer, and the seconds each build took;
- shared buffers and execution ms (p50 over the questions, EXPLAIN (ANALYZE, BUFFERS), hit + read at the
  top node, as `pages.py` counts them) of the hybrid recall and of each semantic leg alone at depth 20;
- the hybrid's quality: hit@1 / hit@10 / MRR@10 of the source or one of its copies per question set.

An HNSW build is not deterministic, so every `m` is built more than once (`--builds`), the arms taking
turns; the spread between builds of one `m` is the noise a difference between arms must clear. Memory and
pages, not time, decide here: the ms are one EXPLAIN each, on whatever else the machine was doing.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import time
from pathlib import Path

import psycopg

from zm_roi.identity import act_as, claims_for
from zm_roi.localdb import project_root
from zm_roi_bench import anchor, layers, report
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.pages import buffers
from zm_roi_bench.sql import bench_query

SHIPPED_M = 32
HYBRID = "explain (analyze, buffers, format json) " + bench_query("layers_hybrid")
LEG = (
    "explain (analyze, buffers, format json) "
    "select * from roi.recall_semantic_leg(%(column)s, %(vector)s::extensions.vector, %(project_id)s, null, false, 20)"
)
BIT_INDEXES = "select c.relname from pg_class c where c.relname ~ '^hnsw_[0-9a-f]{32}_(bits|minilm_bits)$' order by 1"


def rebuild(conn: psycopg.Connection, m: int) -> dict:
    """Both indexes over the bits dropped and built again with `m`; their seconds and bytes."""
    figures = {}
    for (name,) in conn.execute(BIT_INDEXES).fetchall():
        definition = conn.execute("select pg_get_indexdef(%s::regclass)", (name,)).fetchone()[0]
        statement = with_m(definition, m)
        conn.execute(f'drop index public."{name}"')
        started = time.monotonic()
        conn.execute(statement)
        seconds = round(time.monotonic() - started, 1)
        size = conn.execute("select pg_relation_size(%s::regclass)", (name,)).fetchone()[0]
        figures["minilm_bits" if name.endswith("minilm_bits") else "bits"] = {"seconds": seconds, "bytes": size}
    if len(figures) != 2:
        raise RuntimeError(f"expected the layer's two indexes over the bits, found {sorted(figures)}")
    return figures


def with_m(definition: str, m: int) -> str:
    """An HNSW index's definition (pg_get_indexdef) with its m replaced, the rest as it was."""
    if len(re.findall(r"\bm='\d+'", definition)) != 1:
        raise RuntimeError(f"the index no longer states its m once: {definition}")
    return re.sub(r"\bm='\d+'", f"m='{m}'", definition)


def measure(conn: psycopg.Connection, built: dict, questions: list[dict]) -> dict:
    """Buffers and ms of the hybrid and each semantic leg per question, and the hybrid's ranks."""
    project_id = next(iter(built["projects"].values()))
    out = {"hybrid": [], "hybrid_ms": [], "embedding": [], "embedding_minilm": []}
    with conn.transaction():
        act_as(conn, claims_for(built["user_id"], layers.EMAIL))
        for q in questions:
            args = dict(q, project_id=project_id)
            conn.execute(bench_query("layers_hybrid"), args).fetchall()  # warm, as the steady ask
            plan = conn.execute(HYBRID, args).fetchone()[0]
            out["hybrid"].append(buffers(plan))
            out["hybrid_ms"].append(plan[0]["Execution Time"])
            for column in ("embedding", "embedding_minilm"):
                leg = {"column": column, "vector": q[column], "project_id": project_id}
                out[column].append(buffers(conn.execute(LEG, leg).fetchone()[0]))
        conn.execute("reset role")
    ranked = layers.measure(conn, built, questions, ("hybrid",), rounds=range(1))
    out["ranks"] = ranked[str(next(iter(built["projects"])))]["hybrid"]["ranks"]
    return out


def run(root: Path, adr_corpus: Path, size: int, seed: int, ms: tuple[int, ...], builds: int, say) -> dict:
    started, at_start = time.monotonic(), machine()
    memories, paraphrases, vectors = layers.embedded_corpus(root, adr_corpus, say)
    with throwaway_cluster(root, say) as cluster, psycopg.connect(cluster.url()) as conn:
        built, storage = layers.prepare(conn, memories, vectors, (size,), seed, say, before=False)
        questions = layers.questions_for(conn, memories, paraphrases)
        rows = conn.execute(bench_query("layers_titles"), {"project_id": next(iter(built["projects"].values()))})
        layer_rows = len(rows.fetchall())
        conn.commit()
        load_at_measurements = [round(x, 2) for x in os.getloadavg()]
        arms = []
        for build in range(builds):
            for m in layers.rotated(ms, build):
                say(f"build {build + 1}: m {m}")
                conn.autocommit = True
                indexes = rebuild(conn, m)
                conn.autocommit = False
                figures = measure(conn, built, questions)
                arms.append({"m": m, "build": build + 1, "indexes": indexes, **figures})
                say(f"  hybrid buffers p50 {statistics.median(figures['hybrid']):,.0f}")
        version = server(conn)["version"]
    return {
        "date": datetime.date.today().isoformat(),
        "size": size,
        "layer_rows": layer_rows,
        "seed": seed,
        "questions": {s: sum(q["set"] == s for q in questions) for s in anchor.SETS},
        "arms": [summarise(arm, questions, layer_rows) for arm in arms],
        "raw": arms,
        "layer_indexes_as_built_first": storage.get("layer_indexes"),
        "server": version,
        "load_average_at_measurements": load_at_measurements,
        "machine": dict(at_start, load_average_at_end=[round(x, 2) for x in os.getloadavg()]),
        "seconds": round(time.monotonic() - started, 1),
    }


def summarise(arm: dict, questions: list[dict], layer_rows: int) -> dict:
    """One build's row of the report."""
    return {
        "m": arm["m"],
        "build": arm["build"],
        "index_bytes_a_row": round(sum(i["bytes"] for i in arm["indexes"].values()) / layer_rows),
        "build_seconds": round(sum(i["seconds"] for i in arm["indexes"].values()), 1),
        "hybrid_buffers_p50": statistics.median(arm["hybrid"]),
        "hybrid_execution_ms_p50": round(statistics.median(arm["hybrid_ms"]), 2),
        "e5_leg_buffers_p50": statistics.median(arm["embedding"]),
        "minilm_leg_buffers_p50": statistics.median(arm["embedding_minilm"]),
        "quality": anchor.quality(arm["ranks"], questions),
    }


def render(results: dict) -> str:
    n = results["questions"]
    lines = [
        f"# A large layer's HNSW indexes over the sign bits at several m, {results['size']:,} rows ({results['date']})",
        "",
        f"`python -m zm_roi_bench.graph_m --size {results['size']}` (seed {results['seed']}): one project of "
        f"{results['layer_rows']:,} real-text memories built as `make bench SIZE=anchor-100k` builds it; "
        "its two indexes over the bits dropped and built again for each row, the rows in the order built; "
        f"{n['paraphrased']} paraphrased and {n['templated']} templated questions as the member. Bytes: both indexes, "
        "a row of the layer. Buffers and ms: p50 of EXPLAIN (ANALYZE, BUFFERS), the hybrid and each semantic leg "
        f"alone at depth 20. Load {results['machine']['load_average_at_start']} at the start, "
        f"{results['load_average_at_measurements']} at the measurements; took {results['seconds']:.0f} s.",
        "",
        report.machine_line(results["machine"]),
        "",
        "| m | build | index bytes a row | build s | hybrid buffers p50 | e5 leg | MiniLM leg | hybrid ms p50 "
        "| paraphrased hit@1 / hit@10 / MRR | templated hit@1 / hit@10 / MRR |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    for a in results["arms"]:
        lines.append(
            f"| {a['m']} | {a['build']} | {a['index_bytes_a_row']:,} | {a['build_seconds']} "
            f"| {a['hybrid_buffers_p50']:,.0f} | {a['e5_leg_buffers_p50']:,.0f} | {a['minilm_leg_buffers_p50']:,.0f} "
            f"| {a['hybrid_execution_ms_p50']:.1f} | {anchor.quality_cell(a['quality']['paraphrased'])} "
            f"| {anchor.quality_cell(a['quality']['templated'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.graph_m", description=__doc__)
    layers.one_layer_arguments(parser, root)
    parser.add_argument("--m", default=f"{SHIPPED_M},16,24", help="comma-separated values of m; the first is shipped")
    parser.add_argument("--builds", type=int, default=2, help="builds of each m, the arms taking turns")
    args = parser.parse_args(argv)
    ms = tuple(int(m) for m in args.m.split(","))
    results = run(root, Path(args.adr_corpus), args.size, args.seed, ms, args.builds, lambda t: print(t, flush=True))
    results["label"] = f"graph-m-{args.size // 1000}k"
    return report.publish(results, Path(args.out), render)


if __name__ == "__main__":
    raise SystemExit(main())
