"""The HNSW legs of a large layer: what their builds cost, and what a hybrid recall touches through them.

Run: `PYTHONPATH=bench .venv/bin/python -m zm_roi_bench.hnsw_legs [--size 100000] [--out FILE]`.

One project of real text (the layer bench's rows: the ADR corpus's memories and varied copies, each with
its original's two real embeddings, perturbed; `layers.build`), vacuumed, as a user's project is once
autovacuum has come. Then:
- **builds:** e5's index built with the statement pg_cron runs, first at PostgreSQL's default
  maintenance_work_mem (64 MB), dropped, then at the memory roi.schedule_layer_indexes() gives the build's
  session (2.5 kB a memory); then MiniLM's at that memory. Seconds each, and pgvector's notice when the
  graph stops fitting in memory.
- **ef_search:** the shipped recall asked every paraphrased question as the project's member (RLS
  applied) with `hnsw.ef_search` at each value of EF_SEARCH (set on public.recall, as the function sets
  200): the hybrid's shared buffers and ms p50, hit@1, hit@10 and MRR@10 of the source (or a copy), and,
  from auto_explain's nested plans of the first 10 questions, each leg's buffers (its node in the
  fusing statement) beside the whole recall's. The values
  take turns question by question, so load moves them alike.
- **--params** adds the same sweep with both indexes rebuilt at pgvector's defaults (m 16,
  ef_construction 64) and their build seconds: whether cheaper builds keep the quality.

The figures are written after each phase (`--out`), so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path

import psycopg

from zm_roi.identity import act_as, claims_for
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.layers import EMAIL, build, embedded_corpus, questions_for, source_rank
from zm_roi_bench.pages import ADR_CORPUS, ROOT, buffers, nested_plans
from zm_roi_bench.sql import bench_query

EF_SEARCH = (200, 100, 60, 40)
# What roi.schedule_layer_indexes() gives a build's session: 2.5 kB a memory carrying the column, >= 64 MB.
KB_A_MEMORY = 2.5
LEG_NODES = {
    "lexical": re.compile(r"Function Scan on recall_lexical_leg"),
    "e5_hnsw": re.compile(r"Index Scan using hnsw_[0-9a-f]{32}_embedding on"),
    "minilm_hnsw": re.compile(r"Index Scan using hnsw_[0-9a-f]{32}_embedding_minilm on"),
}
SHARED = re.compile(r"Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?")


def build_memory(rows: int) -> str:
    return f"{max(64, -(-int(rows * KB_A_MEMORY) // 1024))}MB"


def build_index(conn: psycopg.Connection, column: str, memory: str, params: str, say) -> dict:
    """The layer's index on `column` built with pg_cron's statement (its m / ef_construction replaced by
    `params` when given) at `memory`; seconds, the load, and pgvector's notices."""
    notices: list[str] = []
    statement = conn.execute(bench_query("hnsw_legs_statement"), {"column": column}).fetchone()[0]
    if params:
        statement = re.sub(r"with \(m = \d+, ef_construction = \d+\)", f"with ({params})", statement)

    def collect(diagnostic) -> None:
        notices.append(diagnostic.message_primary or "")

    conn.add_notice_handler(collect)
    conn.execute(bench_query("pages_setting"), {"name": "maintenance_work_mem", "value": memory})
    say(f"building {column}'s index at maintenance_work_mem {memory} {params or ''}")
    started = time.monotonic()
    conn.execute(statement)
    seconds = round(time.monotonic() - started, 1)
    conn.remove_notice_handler(collect)
    conn.execute(bench_query("pages_setting"), {"name": "maintenance_work_mem", "value": "64MB"})
    say(f"  {seconds} s; {notices}")
    return {
        "column": column,
        "maintenance_work_mem": memory,
        "params": params or "m = 32, ef_construction = 200",
        "seconds": seconds,
        "load": [round(x, 2) for x in os.getloadavg()],
        "notices": notices,
    }


def drop(conn: psycopg.Connection, column: str) -> None:
    for (statement,) in conn.execute(bench_query("hnsw_legs_drop"), {"column": column}).fetchall():
        conn.execute(statement)


def leg_buffers(notices: list[str]) -> dict[str, int]:
    """Each leg's shared buffers in the hybrid's fusing statement, from its plan node (the lexical leg's
    function scan, what it runs inside counted in it; each HNSW leg's index scan, heap fetches
    included), and the whole recall's."""
    legs: dict[str, int] = {}
    for plan in notices:
        lines = (plan or "").splitlines()
        if any("Query Text: select * from public.recall(" in line for line in lines[:3]):
            legs["recall"] = shared(next((line for line in lines if "Buffers:" in line), ""))
        for n, line in enumerate(lines):
            for leg, node in LEG_NODES.items():
                if node.search(line):
                    buffers_line = next((x for x in lines[n + 1 :] if "Buffers:" in x), "")
                    legs[leg] = legs.get(leg, 0) + shared(buffers_line)
    return legs


def shared(line: str) -> int:
    match = SHARED.search(line)
    return int(match.group(1) or 0) + int(match.group(2) or 0) if match else 0


def sweep(conn: psycopg.Connection, built: dict, questions: list[dict], size: int, say) -> dict:
    """Every question at every ef_search, the values taking turns question by question."""
    project_id = built["projects"][size]
    titles = dict(conn.execute(bench_query("layers_titles"), {"project_id": project_id}).fetchall())
    originals = {memory_id: built["originals"][size].get(title, set()) for memory_id, title in titles.items()}
    per = {ef: {"buffers": [], "ms": [], "ranks": [], "legs": []} for ef in EF_SEARCH}
    for n, q in enumerate(questions):
        order = EF_SEARCH[n % len(EF_SEARCH) :] + EF_SEARCH[: n % len(EF_SEARCH)]
        for ef in order:
            conn.execute(bench_query("hnsw_legs_ef_search").replace("EF", str(int(ef))))
            conn.commit()
            args = dict(q, project_id=project_id)
            with conn.transaction():
                act_as(conn, claims_for(built["user_id"], EMAIL))
                plan = conn.execute(bench_query("pages_hybrid_buffers"), args).fetchone()[0]
                rows = conn.execute(bench_query("layers_hybrid"), args).fetchall()
            conn.rollback()
            per[ef]["buffers"].append(buffers(plan))
            per[ef]["ms"].append(plan[0]["Execution Time"])
            per[ef]["ranks"].append(source_rank(q["source"], rows, originals))
            if n < 10:
                conn.autocommit = True  # the member's role ends with the plans' own transaction
                per[ef]["legs"].append(leg_buffers(nested_plans(conn, built["user_id"], project_id, q)))
                conn.autocommit = False
    figures = {}
    for ef, f in per.items():
        ranks = f["ranks"]
        legs = {leg: statistics.median(p.get(leg, 0) for p in f["legs"]) for leg in {k for p in f["legs"] for k in p}}
        figures[ef] = {
            "buffers_p50": statistics.median(f["buffers"]),
            "ms_p50": round(statistics.median(f["ms"]), 2),
            "hit_at_1": sum(r == 1 for r in ranks),
            "hit_at_10": sum(r is not None for r in ranks),
            "mrr_at_10": round(sum(1 / r for r in ranks if r) / len(ranks), 3),
            "leg_buffers_p50": legs,
            "questions": len(ranks),
        }
        say(f"ef_search {ef}: {figures[ef]}")
    conn.execute(bench_query("hnsw_legs_ef_search").replace("EF", "200"))
    conn.commit()
    return figures


def run(size: int, adr_corpus: Path, seed: int, params: bool, out: Path | None, say=print) -> dict:
    memories, paraphrases, vectors = embedded_corpus(ROOT, adr_corpus, say)
    figures: dict = {"machine": machine(), "size": size, "ef_search": list(EF_SEARCH)}
    with throwaway_cluster(ROOT, say) as cluster, psycopg.connect(cluster.url()) as conn:
        figures["server"] = server(conn)
        built = build(conn, memories, vectors, [size], seed, say)
        conn.autocommit = True
        conn.execute("vacuum analyze public.memories")
        conn.execute("vacuum analyze public.memory_postings")
        memory = build_memory(size)
        figures["builds"] = [build_index(conn, "embedding", "64MB", "", say)]
        drop(conn, "embedding")
        figures["builds"] += [
            build_index(conn, "embedding", memory, "", say),
            build_index(conn, "embedding_minilm", memory, "", say),
        ]
        conn.execute("analyze public.memories")
        conn.autocommit = False
        save(figures, out)
        questions = [q for q in questions_for(conn, memories, paraphrases) if q["set"] == "paraphrased"]
        figures["questions"] = len(questions)
        figures["shipped"] = sweep(conn, built, questions, size, say)
        save(figures, out)
        if params:
            conn.autocommit = True
            for column in ("embedding", "embedding_minilm"):
                drop(conn, column)
            figures["builds"] += [
                build_index(conn, column, memory, "m = 16, ef_construction = 64", say)
                for column in ("embedding", "embedding_minilm")
            ]
            conn.execute("analyze public.memories")
            conn.autocommit = False
            figures["m16_ef_construction64"] = sweep(conn, built, questions, size, say)
            save(figures, out)
    return figures


def save(figures: dict, out: Path | None) -> None:
    if out:
        out.write_text(json.dumps(figures, indent=2, default=str) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--adr-corpus", type=Path, default=ADR_CORPUS)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--params", action="store_true", help="also rebuilt at m 16, ef_construction 64")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    print(json.dumps(run(args.size, args.adr_corpus, args.seed, args.params, args.out), indent=2, default=str))


if __name__ == "__main__":
    main()
