"""`make bench SIZE=anchor`: zm-roi's recall side by side with Supabase's documented hybrid search (issue 44).

The anchor is what a Supabase user would pick instead: the "Hybrid search" page's table, indexes and
`hybrid_search` function ([anchor.sql](anchor.sql), with what our schema forces listed there), on the
bench's throwaway cluster only. One cluster per size holds one layer of real text built as the layer
bench builds it (`layers.prepare`: real memories and varied copies, each row with both offline
embeddings, the large layer's HNSW indexes built, vacuumed); the anchor's table gets the same rows, each
with the row's e5 vector, under the same read policy, then the page's GIN and HNSW indexes.

Every question (the paraphrases of `bench/eval/adr-paraphrases.jsonl` and template questions of demo
memories, with their real query embeddings) is asked of both as the project's member with row-level
security applied, in blocks that take turns (`layers.measure`): `public.recall` pinned to the project
with both query embeddings, and `anchor.hybrid_search` with the e5 one, 10 results each. The member sees
exactly the layer, so the pin and the policy leave the same rows to both. Per arm: bytes a memory all in
(table, TOAST and every index; for zm-roi also the postings), shared buffers per recall (the plan's top
node, hit + read, as `pages.py` counts them; question by question, the arms alternating), p50 / p95 ms,
and hit@1 / hit@10 / MRR@10 of the source or one of its copies, per question set.
"""

from __future__ import annotations

import datetime
import os
import re
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg

from zm_roi.identity import act_as, claims_for
from zm_roi_bench import compare, footprint, layers, report
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.pages import buffers, nested_plans
from zm_roi_bench.recall_quality import metrics
from zm_roi_bench.sql import bench_query

ANCHOR_SQL = Path(__file__).parent / "anchor.sql"
SIZES = {"anchor": (10_000, 100_000), "anchor-10k": (10_000,), "anchor-100k": (100_000,)}
ARMS = ("hybrid", "anchor")  # the named queries layers_hybrid and layers_anchor
ARM_NAMES = {"hybrid": "zm-roi `public.recall`", "anchor": "Supabase `hybrid_search`"}
SETS = ("paraphrased", "templated")


def build(conn: psycopg.Connection, say) -> dict:
    """The anchor's schema, table, policy and function; the memories' rows copied in; the page's two
    indexes built; vacuumed. Seconds per step."""
    seconds = {}
    conn.commit()
    conn.autocommit = True
    try:
        steps = {"create": ANCHOR_SQL.read_text(), "fill": bench_query("anchor_fill")}
        steps |= {"indexes": bench_query("anchor_indexes"), "vacuum_analyze": bench_query("anchor_vacuum_analyze")}
        for step, statement in steps.items():
            say(f"anchor: {step}")
            started = time.monotonic()
            conn.execute(statement)
            seconds[step] = round(time.monotonic() - started, 1)
    finally:
        conn.autocommit = False
    return seconds


def storage(conn: psycopg.Connection) -> dict:
    """The anchor's bytes a memory by structure, in footprint's shape (no postings)."""
    parts = [tuple(row) for row in conn.execute(bench_query("anchor_storage_split")).fetchall()]
    return footprint.split(parts, conn.execute(bench_query("anchor_count")).fetchone()[0], 0)


def indexes_read(conn: psycopg.Connection, built: dict, question: dict) -> dict:
    """Which of the anchor's indexes its hybrid_search reads, from auto_explain's nested plans of one recall
    as the member (the page's semantic leg orders by a window's row_number, which the planner may sort
    rather than walk the HNSW index for), and those plans."""
    conn.commit()
    conn.autocommit = True
    try:
        plans = nested_plans(conn, built["user_id"], next(iter(built["projects"].values())), question, "layers_anchor")
    finally:
        conn.autocommit = False
    body = [plan for plan in plans if "anchor.documents" in plan and "with full_text as" in plan]
    names = {m for plan in body for m in re.findall(r"Index (?:Only )?Scan (?:using|on) (documents_\w+)", plan)}
    return {"indexes": sorted(names), "plans": body}


def visible(conn: psycopg.Connection, user_id) -> dict:
    """The anchor's rows its policy shows the layer's member, and a signed-in stranger."""
    seen = {}
    for who, claims in (("member", claims_for(user_id, layers.EMAIL)), ("stranger", claims_for(uuid.uuid4()))):
        with conn.transaction():
            act_as(conn, claims)
            seen[who] = conn.execute(bench_query("anchor_count")).fetchone()[0]
    conn.rollback()
    return seen


def measure_buffers(conn: psycopg.Connection, built: dict, questions: list[dict]) -> dict:
    """Shared buffers (p50, max) and execution ms (p50) per recall for each arm, as the member, question by
    question with the arms alternating which goes first."""
    sql = {arm: "explain (analyze, buffers, format json) " + bench_query(f"layers_{arm}") for arm in ARMS}
    touched: dict[str, list[int]] = {arm: [] for arm in ARMS}
    ms: dict[str, list[float]] = {arm: [] for arm in ARMS}
    project_id = next(iter(built["projects"].values()))
    for turn, q in enumerate(questions):
        for arm in layers.rotated(ARMS, turn):
            with conn.transaction():
                act_as(conn, claims_for(built["user_id"], layers.EMAIL))
                plan = conn.execute(sql[arm], dict(q, project_id=project_id)).fetchone()[0]
            touched[arm].append(buffers(plan))
            ms[arm].append(plan[0]["Execution Time"])
    conn.rollback()
    return {
        arm: {
            "buffers_p50": statistics.median(touched[arm]),
            "buffers_max": max(touched[arm]),
            "execution_ms_p50": round(statistics.median(ms[arm]), 2),
        }
        for arm in ARMS
    }


def quality(ranks: list[int | None], questions: list[dict]) -> dict:
    """hit@10, hit@1 and MRR@10 per question set, from each question's rank (`layers.source_rank`)."""
    return {
        s: metrics([r for r, q in zip(ranks, questions, strict=True) if q["set"] == s])
        for s in SETS
        if any(q["set"] == s for q in questions)
    }


def quality_cell(figures: dict) -> str:
    """One question set's quality as a report's cell: hit@1 / hit@10 / MRR@10."""
    return f"{figures['hit1']} / {figures['hit10']} / {figures['mrr']:.3f}"


def run(root: Path, adr_corpus: Path, size: int, seed: int = 42, say: Callable[[str], None] = print) -> dict:
    """One layer of `size` rows on a throwaway cluster, both arms built on it and measured; the raw figures."""
    started, at_start = time.monotonic(), machine()
    memories, paraphrases, vectors = layers.embedded_corpus(root, adr_corpus, say)
    with throwaway_cluster(root, say) as cluster, psycopg.connect(cluster.url()) as conn:
        built, zm_storage = layers.prepare(conn, memories, vectors, (size,), seed, say, before=False)
        built_in = build(conn, say)
        anchor_storage = storage(conn)
        seen = visible(conn, built["user_id"])
        text_search_config = conn.execute(bench_query("anchor_default_text_search_config")).fetchone()[0]
        questions = layers.questions_for(conn, memories, paraphrases)
        say(f"measuring {len(questions)} questions x 2 asks x {layers.ROUNDS} blocks per arm")
        load_at_measurements = [round(x, 2) for x in os.getloadavg()]
        timed = layers.measure(conn, built, questions, ARMS, title_queries=("layers_titles", "anchor_titles"))
        say("measuring shared buffers per recall")
        touched = measure_buffers(conn, built, questions)
        read = indexes_read(conn, built, questions[0])
        version = server(conn)["version"]
    layer = timed[str(size)]
    arms = {}
    for arm in ARMS:
        figures = layer[arm]
        arms[arm] = {
            "bytes": zm_storage if arm == "hybrid" else anchor_storage,
            "buffers": touched[arm],
            "timing": {k: v for k, v in figures.items() if k not in ("ranks", "source_in_top_10", "questions")},
            "ranks": figures["ranks"],
            "quality": quality(figures["ranks"], questions),
        }
    return {
        "label": f"anchor-{report.size_name(size).lower()}",
        "date": datetime.date.today().isoformat(),
        "size": size,
        "rows_seen_by_the_member": layer["rows"],
        "seed": seed,
        "memories": len(memories),
        "adr_corpus": adr_corpus.exists(),
        "questions": {s: sum(q["set"] == s for q in questions) for s in SETS},
        "rounds": layers.ROUNDS,
        "measured_as": timed["as"],
        "anchor_rows_seen": seen,
        "anchor_indexes_read": read,
        "default_text_search_config": text_search_config,
        "anchor_built_seconds": built_in,
        "arms": arms,
        "server": version,
        "load_average_at_measurements": load_at_measurements,
        "machine": dict(at_start, load_average_at_end=[round(x, 2) for x in os.getloadavg()]),
        "seconds": round(time.monotonic() - started, 1),
    }


def side_by_side(results: dict) -> list[dict]:
    """The figures of both arms, and zm-roi's over the anchor's (above 1: zm-roi has more of it)."""
    zm, anchor = (results["arms"][arm] for arm in ARMS)
    rows = [
        ("bytes a memory, all in", lambda a: a["bytes"]["per_memory"]),
        ("shared buffers per recall, p50", lambda a: a["buffers"]["buffers_p50"]),
        ("ms per recall, p50 (client, steady)", lambda a: a["timing"]["p50"]),
        ("ms per recall, p95 (client, steady)", lambda a: a["timing"]["p95"]),
    ]
    for s in results["questions"]:
        if results["questions"][s]:
            rows += [
                (f"hit@1, {s}", lambda a, s=s: a["quality"][s]["hit1"]),
                (f"hit@10, {s}", lambda a, s=s: a["quality"][s]["hit10"]),
                (f"MRR@10, {s}", lambda a, s=s: a["quality"][s]["mrr"]),
            ]
    out = []
    for what, get in rows:
        ours, theirs = get(zm), get(anchor)
        out.append({"what": what, "zm_roi": ours, "anchor": theirs, "ratio": ours / theirs if theirs else None})
    return out


def _cell(value) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.3f}" if value < 1 else f"{value:,.1f}"
    return f"{value:,.0f}"


def indexes_sentence(read: dict | None) -> str:
    """What the anchor's recall read, from its nested plan (a run before the bench captured it: nothing)."""
    if read is None:
        return ""
    names = ", ".join(f"`{name}`" for name in read["indexes"]) or "none of its indexes (sequential scans and a sort)"
    return f"The anchor's hybrid_search read {names} for the first question (nested plan in the .json)."


def render(results: dict) -> str:
    """The Markdown report of one size."""
    n = results["questions"]
    built = results["anchor_built_seconds"]
    out = [
        f"# zm-roi against Supabase's hybrid search, {results['size']:,} rows ({results['date']})",
        "",
        f"Produced by `make bench SIZE={results['label']}` (seed {results['seed']}): one project of "
        f"{results['rows_seen_by_the_member']:,} real-text memories ({results['memories']} real ones, varied copies "
        "beyond), each row with both offline embeddings, on one throwaway cluster; the anchor's table holds the same "
        "rows with their e5 vectors under the same read policy ([anchor.sql](../zm_roi_bench/anchor.sql): Supabase's "
        '"Hybrid search" page, `vector(384)`, GIN on the generated `tsvector`, HNSW with `vector_ip_ops`, RRF k 50, '
        f"weights 1 / 1, match_count 10). {n['paraphrased']} paraphrased and {n['templated']} templated questions, "
        f"as the member ({results['measured_as']}), in {results['rounds']} blocks per arm that take turns (each "
        "asks every question twice; the steady ask is timed); buffers from EXPLAIN (ANALYZE, BUFFERS), question by "
        "question, the arms alternating. Hits count the source or one of its copies. How the bench works: "
        "[bench/README.md](../README.md).",
        "",
        *compare.machine_table(results["machine"], results["load_average_at_measurements"], results["server"]),
        "",
        "## Side by side",
        "",
        *report.table(
            ["figure", ARM_NAMES["hybrid"], ARM_NAMES["anchor"], "zm-roi / Supabase"],
            [
                [
                    row["what"],
                    _cell(row["zm_roi"]),
                    _cell(row["anchor"]),
                    "–" if row["ratio"] is None else f"{row['ratio']:.2f}",
                ]
                for row in side_by_side(results)
            ],
        ),
        "",
        "zm-roi's recall fuses three legs (its postings, e5 and MiniLM); the anchor two (its `tsvector`, e5). "
        f"Anchor built in {built['fill']:.0f} s (rows) + {built['indexes']:.0f} s (GIN and HNSW); "
        f"default_text_search_config here: `{results['default_text_search_config']}`. Under its policy the member "
        f"sees {results['anchor_rows_seen']['member']:,} of the anchor's rows, a signed-in stranger "
        f"{results['anchor_rows_seen']['stranger']:,}. " + indexes_sentence(results.get("anchor_indexes_read")),
        "",
        "## Bytes a memory: zm-roi",
        "",
        footprint.render(results["arms"]["hybrid"]["bytes"]),
        "",
        "## Bytes a memory: Supabase's hybrid search",
        "",
        footprint.render(results["arms"]["anchor"]["bytes"]),
    ]
    return "\n".join(out) + "\n"
