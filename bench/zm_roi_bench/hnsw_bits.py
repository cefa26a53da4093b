"""A large layer's HNSW index over the sign bits beside today's over the halfvec vectors, on the same rows.

Run: `PYTHONPATH=bench .venv/bin/python -m zm_roi_bench.hnsw_bits [--size 100000] [--out FILE]`.

One project of real text (the layer bench's rows, `layers.build`), vacuumed. Both kinds of index are built
on both embedding columns, side by side: today's statement from roi.layer_vector_indexes (halfvec_cosine_ops,
m 32, ef_construction 200) and the same statement over the column's sign bits (`roi.embedding_bits`,
bit_hamming_ops); seconds and bytes each. Then every paraphrased and templated question, as the project's
member (RLS applied), through each semantic leg read each way, the arms taking turns question by question:
- **halfvec:** the shipped arm of roi.recall_semantic_leg for a pinned indexed layer: the 20 nearest by the
  index's order (ef_search as given).
- **bits N/ef:** the N nearest by Hamming distance from the bit index (ef_search ef; `iterative` with
  pgvector 0.8's relaxed iterative scan, so N may pass ef), their vectors read from the heap by the index
  scan itself and ranked exactly, the best 20 kept.
Each arm's shared buffers and ms p50, and the source (or a copy) in the leg's top 10 and at 1. The shipped
hybrid (today's halfvec legs) and the lexical leg are measured alongside, so a hybrid over the bit legs is
composed from measured parts: hybrid − halfvec legs + bit legs. `--m16` rebuilds the bit indexes at m 16
and measures their arms again.
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
from zm_roi_bench.hnsw_legs import build_memory
from zm_roi_bench.layers import EMAIL, MODELS, build, embedded_corpus, questions_for, source_rank
from zm_roi_bench.pages import ADR_CORPUS, ROOT, buffers
from zm_roi_bench.sql import bench_query

COLUMNS = {"embedding": "e5", "embedding_minilm": "minilm"}
# (name, candidates, ef_search, iterative scan)
ARMS = (
    ("halfvec ef200", None, 200, False),
    ("bits 40/ef40", 40, 40, False),
    ("bits 80/ef100", 80, 100, False),
    ("bits 80/ef200", 80, 200, False),
    ("bits 200/ef200", 200, 200, False),
    ("bits 400/ef400", 400, 400, False),
    ("bits 400/ef100 iterative", 400, 100, True),
)

HALFVEC = """explain (analyze, buffers, format json)
select m.id, m.created_at, m.{col} operator(extensions.<=>) %(q)s::extensions.halfvec as d from public.memories m
where m.scope = 'project' and m.invalidated_at is null and m.project_id = %(project_id)s and m.{col} is not null
order by 3 limit 20"""

BITS = """explain (analyze, buffers, format json)
select c.id, c.created_at, c.d from (
  select m.id, m.created_at, m.{col} operator(extensions.<=>) %(q)s::extensions.halfvec as d from public.memories m
  where m.scope = 'project' and m.invalidated_at is null and m.project_id = %(project_id)s and m.{col}_bits is not null
  order by m.{col}_bits operator(extensions.<~>) roi.embedding_bits(%(q)s::extensions.halfvec, %(model)s)
  limit %(n)s) c
order by c.d, c.created_at desc, c.id limit 20"""


def index_statement(conn: psycopg.Connection, column: str, bits: bool, params: str) -> tuple[str, str]:
    """pg_cron's statement for the layer's index on `column` (name, text), over the sign bits when `bits`."""
    name, statement = conn.execute(
        "select index_name, statement from roi.layer_vector_indexes(1) where index_name like %s "
        "and statement is not null",
        ("%\\_" + column,),
    ).fetchone()
    if bits:
        statement = statement.replace(
            f"({column} extensions.halfvec_cosine_ops)", f"({column}_bits extensions.bit_hamming_ops)"
        )
        statement = statement.replace(name, f"{name}_bits")
        name = f"{name}_bits"
    statement = re.sub(r"with \(m = \d+, ef_construction = \d+\)", f"with ({params})", statement)
    return name, statement


def build_index(conn: psycopg.Connection, column: str, bits: bool, memory: str, params: str, say) -> dict:
    name, statement = index_statement(conn, column, bits, params)
    notices: list[str] = []
    handler = lambda d: notices.append(d.message_primary or "")  # noqa: E731
    conn.add_notice_handler(handler)
    conn.execute(bench_query("pages_setting"), {"name": "maintenance_work_mem", "value": memory})
    say(f"building {name} ({params})")
    started = time.monotonic()
    conn.execute(statement)
    seconds = round(time.monotonic() - started, 1)
    conn.remove_notice_handler(handler)
    size = conn.execute("select pg_relation_size(%s::regclass)", (f"public.{name}",)).fetchone()[0]
    say(f"  {seconds} s, {size:,} bytes; {notices}")
    return {
        "index": name,
        "column": column,
        "bits": bits,
        "params": params,
        "maintenance_work_mem": memory,
        "seconds": seconds,
        "bytes": size,
        "load": [round(x, 2) for x in os.getloadavg()],
        "notices": notices,
    }


def index_names(plan: dict) -> list[str]:
    found = []

    def walk(node: dict) -> None:
        if "Index Name" in node:
            found.append(node["Index Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found


def ask(conn: psycopg.Connection, user_id, sql: str, args: dict, settings: dict) -> tuple[dict, list]:
    with conn.transaction():
        for name, value in settings.items():
            conn.execute("select set_config(%s, %s, true)", (name, value))
        act_as(conn, claims_for(user_id, EMAIL))
        plan = conn.execute(sql, args).fetchone()[0]
        rows = conn.execute(sql.split("\n", 1)[1], args).fetchall()
    conn.rollback()
    return plan, rows


def sweep(conn: psycopg.Connection, built: dict, questions: list[dict], size: int, arms, hybrid: bool, say) -> dict:
    project_id = built["projects"][size]
    titles = dict(conn.execute(bench_query("layers_titles"), {"project_id": project_id}).fetchall())
    originals = {memory_id: built["originals"][size].get(title, set()) for memory_id, title in titles.items()}
    keys = [(arm, column) for arm in arms for column in COLUMNS]
    per = {k: {"buffers": [], "ms": [], "ranks": [], "sets": [], "indexes": set()} for k in keys}
    whole = {"hybrid": {"buffers": [], "ms": [], "ranks": []}, "lexical": {"buffers": [], "ms": []}}
    for n, q in enumerate(questions):
        turn = n % len(keys)
        for arm, column in keys[turn:] + keys[:turn]:
            name, candidates, ef, iterative = arm
            # The index the arm is about, never a scan of the layer the planner may prefer on a small one.
            settings = {"hnsw.ef_search": str(ef), "jit": "off", "enable_seqscan": "off", "enable_bitmapscan": "off"}
            if candidates:
                settings["enable_sort"] = "off"  # one sort with the bit index, two with the bits' b-tree
            if iterative:
                settings["hnsw.iterative_scan"] = "relaxed_order"
                settings["hnsw.max_scan_tuples"] = "20000"
            args = {"q": q[column], "project_id": project_id, "model": MODELS[column], "n": candidates}
            sql = (BITS if candidates else HALFVEC).format(col=column)
            plan, rows = ask(conn, built["user_id"], sql, args, settings)
            f = per[(arm, column)]
            f["buffers"].append(buffers(plan))
            f["ms"].append(plan[0]["Execution Time"])
            f["ranks"].append(source_rank(q["source"], rows, originals))
            f["sets"].append(q["set"])
            f["indexes"].update(index_names(plan))
        if hybrid:
            args = dict(q, project_id=project_id)
            plan, rows = ask(conn, built["user_id"], bench_query("pages_hybrid_buffers"), args, {})
            whole["hybrid"]["buffers"].append(buffers(plan))
            whole["hybrid"]["ms"].append(plan[0]["Execution Time"])
            whole["hybrid"]["ranks"].append((q["set"], source_rank(q["source"], [(r[0],) for r in rows], originals)))
            plan, _ = ask(conn, built["user_id"], bench_query("pages_lexical_buffers"), args, {})
            whole["lexical"]["buffers"].append(buffers(plan))
            whole["lexical"]["ms"].append(plan[0]["Execution Time"])
    figures: dict = {}
    for (arm, column), f in per.items():
        entry = {
            "buffers_p50": statistics.median(f["buffers"]),
            "ms_p50": round(statistics.median(f["ms"]), 2),
            "indexes": sorted(f["indexes"]),
        }
        for which in ("paraphrased", "templated"):
            ranks = [r for r, s in zip(f["ranks"], f["sets"], strict=True) if s == which]
            entry[which] = quality(ranks)
        figures.setdefault(arm[0], {})[COLUMNS[column]] = entry
        say(f"{arm[0]} {COLUMNS[column]}: {entry}")
    if hybrid:
        figures["shipped hybrid"] = {
            "buffers_p50": statistics.median(whole["hybrid"]["buffers"]),
            "ms_p50": round(statistics.median(whole["hybrid"]["ms"]), 2),
            **{
                which: quality([r for s, r in whole["hybrid"]["ranks"] if s == which])
                for which in ("paraphrased", "templated")
            },
        }
        figures["lexical leg"] = {
            "buffers_p50": statistics.median(whole["lexical"]["buffers"]),
            "ms_p50": round(statistics.median(whole["lexical"]["ms"]), 2),
        }
        say(f"hybrid {figures['shipped hybrid']}; lexical {figures['lexical leg']}")
    return figures


def quality(ranks: list) -> dict:
    return {
        "questions": len(ranks),
        "hit_at_1": sum(r == 1 for r in ranks),
        "hit_at_10": sum(r is not None for r in ranks),
        "mrr_at_10": round(sum(1 / r for r in ranks if r) / max(len(ranks), 1), 3),
    }


def run(size: int, adr_corpus: Path, seed: int, m16: bool, out: Path | None, say=print) -> dict:
    memories, paraphrases, vectors = embedded_corpus(ROOT, adr_corpus, say)
    figures: dict = {"machine": machine(), "size": size, "arms": [list(a) for a in ARMS]}
    with throwaway_cluster(ROOT, say) as cluster, psycopg.connect(cluster.url()) as conn:
        figures["server"] = server(conn)
        built = build(conn, memories, vectors, [size], seed, say)
        conn.autocommit = True
        conn.execute("vacuum analyze public.memories")
        conn.execute("vacuum analyze public.memory_postings")
        memory = build_memory(size)
        shipped = "m = 32, ef_construction = 200"
        figures["builds"] = [
            build_index(conn, column, bits, memory, shipped, say) for bits in (True, False) for column in COLUMNS
        ]
        conn.execute("analyze public.memories")
        conn.autocommit = False
        save(figures, out)
        questions = questions_for(conn, memories, paraphrases)
        figures["questions"] = {s: sum(q["set"] == s for q in questions) for s in ("paraphrased", "templated")}
        figures["m32"] = sweep(conn, built, questions, size, ARMS, True, say)
        save(figures, out)
        if m16:
            conn.autocommit = True
            for column in COLUMNS:
                conn.execute(f"drop index public.{index_statement(conn, column, True, shipped)[0]}")
            figures["builds"] += [
                build_index(conn, column, True, memory, "m = 16, ef_construction = 200", say) for column in COLUMNS
            ]
            conn.execute("analyze public.memories")
            conn.autocommit = False
            bit_arms = tuple(a for a in ARMS if a[1])
            figures["bits m16"] = sweep(conn, built, questions, size, bit_arms, False, say)
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
    parser.add_argument("--m16", action="store_true", help="also the bit indexes rebuilt at m 16")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    print(json.dumps(run(args.size, args.adr_corpus, args.seed, args.m16, args.out), indent=2, default=str))


if __name__ == "__main__":
    main()
