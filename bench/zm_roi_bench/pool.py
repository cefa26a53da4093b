"""python -m zm_roi_bench.pool — the hybrid recall's lexical leg at several candidate pools (issue 44).

One layer of real text is built once, as the anchor bench builds it (`layers.prepare`: real memories and
varied copies, both offline embeddings on every row, the large layer's HNSW indexes built, vacuumed), on
a throwaway cluster. On that cluster only, `roi.recall_lexical_leg` is replaced by a copy whose
`per_term` (postings read per lexeme and layer) and `pool` (candidates re-ranked exactly by ts_rank where
a list was cut, the callers' argument) are read from the session settings `bench.per_term` and
`bench.pool` when set, so every arm runs the same functions on the same rows and only those two numbers
differ, for both recalls alike.

For each arm, as the project's member with row-level security applied:
- quality and time: `public.recall` with both query embeddings (the hybrid: its lexical leg at depth
  2 × 10) and `public.recall_lexical` (depth 10), asked in blocks that take turns (`layers.measure`,
  rounds rotating the arms' order), hit@1 / hit@10 / MRR@10 of the source or one of its copies per
  question set, p50 ms of the steady asks;
- shared buffers: EXPLAIN (ANALYZE, BUFFERS) of the hybrid and of its lexical leg alone at depth 20,
  question by question, the arms rotating (p50, as `pages.py` counts them);
- how many of the hybrid's result lists (top 10, in order) are the same as the first arm's.
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
from zm_roi_bench import anchor, layers, report
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.pages import buffers
from zm_roi_bench.sql import bench_query
from zm_roi_bench.timing import percentile

# (per_term, pool): the first is the shipped one, the figures' reference.
ARMS = ((1500, 500), (1500, 300), (1500, 200), (1500, 100), (1500, 50), (1000, 200), (1000, 100))
ROUNDS = 3
SIGNATURE = "roi.recall_lexical_leg(text, uuid, uuid, boolean, integer, integer)"
# (what the shipped leg says, what the bench's copy says instead)
SETTABLE = (
    (
        "  per_term constant integer := 1500;\n",
        "  per_term constant integer := "
        "coalesce(nullif(current_setting('bench.per_term', true), '')::integer, 1500);\n",
    ),
    (
        "\nbegin\n",
        "\nbegin\n  pool := coalesce(nullif(current_setting('bench.pool', true), '')::integer, pool);\n",
    ),
)
LEG_BUFFERS = (
    "explain (analyze, buffers, format json) "
    "select * from roi.recall_lexical_leg(%(question)s, %(project_id)s, null, false, 20, 500)"
)


def replaced(definition: str, replacements: tuple[tuple[str, str], ...]) -> str:
    """`definition` with each shipped text replaced once; refuses a definition that no longer holds one."""
    for shipped, instead in replacements:
        if definition.count(shipped) != 1:
            raise RuntimeError(f"roi.recall_lexical_leg no longer holds {shipped.strip()!r}")
        definition = definition.replace(shipped, instead)
    return definition


def leg_definition(conn: psycopg.Connection) -> str:
    return conn.execute("select pg_get_functiondef(%s::regprocedure)", (SIGNATURE,)).fetchone()[0]


def settable_leg(conn: psycopg.Connection) -> None:
    """The lexical leg with per_term and pool read from the session's settings when set (bench cluster only)."""
    conn.execute(replaced(leg_definition(conn), SETTABLE))
    conn.commit()


def use(conn: psycopg.Connection, arm: tuple[int, int]) -> None:
    """The arm's constants for this session."""
    per_term, pool = arm
    conn.execute(
        "select set_config('bench.per_term', %s, false), set_config('bench.pool', %s, false)",
        (str(per_term), str(pool)),
    )
    conn.commit()


def check_settable(conn: psycopg.Connection, built: dict, question: dict) -> None:
    """The copy reads the settings: one posting a lexeme and a pool of one leave at most one candidate."""
    use(conn, (1, 1))
    args = dict(question, project_id=next(iter(built["projects"].values())))
    with conn.transaction():
        act_as(conn, claims_for(built["user_id"], layers.EMAIL))
        rows = conn.execute(LEG_BUFFERS.removeprefix("explain (analyze, buffers, format json) "), args).fetchall()
    conn.rollback()
    if len(rows) > 1:
        raise RuntimeError(f"the lexical leg ignored bench.pool = 1: {len(rows)} rows")


def name(arm: tuple[int, int]) -> str:
    return f"{arm[0]}/{arm[1]}"


def measure_buffers(
    conn: psycopg.Connection, built: dict, questions: list[dict], arms: tuple[tuple[int, int], ...]
) -> dict:
    """Per arm: shared buffers and execution ms of the hybrid and of its lexical leg alone, and the hybrid's
    top 10 ids per question; question by question, the arms' order rotating."""
    project_id = next(iter(built["projects"].values()))
    hybrid = "explain (analyze, buffers, format json) " + bench_query("layers_hybrid")
    out = {
        name(arm): {"hybrid": [], "hybrid_ms": [], "leg": [], "leg_ms": [], "lists": [], "leg_lists": []}
        for arm in arms
    }
    for turn, q in enumerate(questions):
        for arm in layers.rotated(arms, turn):
            use(conn, arm)
            args = dict(q, project_id=project_id)
            figures = out[name(arm)]
            with conn.transaction():
                act_as(conn, claims_for(built["user_id"], layers.EMAIL))
                conn.execute(bench_query("layers_hybrid"), args).fetchall()  # warm, as the steady ask
                plan = conn.execute(hybrid, args).fetchone()[0]
                figures["hybrid"].append(buffers(plan))
                figures["hybrid_ms"].append(plan[0]["Execution Time"])
                plan = conn.execute(LEG_BUFFERS, args).fetchone()[0]
                figures["leg"].append(buffers(plan))
                figures["leg_ms"].append(plan[0]["Execution Time"])
                figures["lists"].append([str(r[0]) for r in conn.execute(bench_query("layers_hybrid"), args)])
                leg = conn.execute(LEG_BUFFERS.removeprefix("explain (analyze, buffers, format json) "), args)
                figures["leg_lists"].append([str(r[0]) for r in leg])
            conn.rollback()
    return out


def run(root: Path, adr_corpus: Path, size: int, seed: int, say, arms: tuple[tuple[int, int], ...] = ARMS) -> dict:
    started, at_start = time.monotonic(), machine()
    memories, paraphrases, vectors = layers.embedded_corpus(root, adr_corpus, say)
    with throwaway_cluster(root, say) as cluster, psycopg.connect(cluster.url()) as conn:
        built, storage = layers.prepare(conn, memories, vectors, (size,), seed, say, before=False)
        settable_leg(conn)
        questions = layers.questions_for(conn, memories, paraphrases)
        check_settable(conn, built, questions[0])
        load_at_measurements = [round(x, 2) for x in os.getloadavg()]
        timing = {name(arm): {"hybrid": [], "lexical": []} for arm in arms}
        ranks = {}
        for round_ in range(ROUNDS):
            for arm in layers.rotated(arms, round_):
                say(f"round {round_ + 1}: per_term / pool {name(arm)}")
                use(conn, arm)
                timed = layers.measure(conn, built, questions, ("hybrid", "lexical"), rounds=range(1), raw=True)
                layer = timed[str(size)]
                for recall in ("hybrid", "lexical"):
                    timing[name(arm)][recall] += layer[recall]["samples"]
                    ranks.setdefault(name(arm), {}).setdefault(recall, layer[recall]["ranks"])
                    if ranks[name(arm)][recall] != layer[recall]["ranks"]:
                        say(f"  {recall} ranks differ from round 1 at {name(arm)}")
        say("measuring shared buffers per recall")
        touched = measure_buffers(conn, built, questions, arms)
        version = server(conn)["version"]
        rows = layer["rows"]
    reference = touched[name(arms[0])]["lists"]
    leg_reference = touched[name(arms[0])]["leg_lists"]
    figures = {}
    for arm in arms:
        key, b = name(arm), touched[name(arm)]
        figures[key] = {
            "per_term": arm[0],
            "pool": arm[1],
            "hybrid_buffers_p50": statistics.median(b["hybrid"]),
            "hybrid_buffers_max": max(b["hybrid"]),
            "hybrid_execution_ms_p50": round(statistics.median(b["hybrid_ms"]), 2),
            "leg_buffers_p50": statistics.median(b["leg"]),
            "leg_execution_ms_p50": round(statistics.median(b["leg_ms"]), 2),
            "hybrid_ms_p50": round(percentile(timing[key]["hybrid"], 0.5), 2),
            "hybrid_ms_p95": round(percentile(timing[key]["hybrid"], 0.95), 2),
            "lexical_ms_p50": round(percentile(timing[key]["lexical"], 0.5), 2),
            "hybrid_quality": anchor.quality(ranks[key]["hybrid"], questions),
            "lexical_quality": anchor.quality(ranks[key]["lexical"], questions),
            "hybrid_lists_unchanged": sum(a == r for a, r in zip(b["lists"], reference, strict=True)),
            # The leg's 20, in order: no HNSW build moves them, so an unchanged one leaves the hybrid unchanged
            # on any build of the same rows.
            "leg_lists_unchanged": sum(a == r for a, r in zip(b["leg_lists"], leg_reference, strict=True)),
            "raw": {"buffers": b, "timing": timing[key], "ranks": ranks[key]},
        }
    return {
        "date": datetime.date.today().isoformat(),
        "size": size,
        "rows_seen_by_the_member": rows,
        "seed": seed,
        "questions": {s: sum(q["set"] == s for q in questions) for s in anchor.SETS},
        "rounds": ROUNDS,
        "arms": figures,
        "storage_written_seconds": storage.get("written_seconds"),
        "server": version,
        "load_average_at_measurements": load_at_measurements,
        "machine": dict(at_start, load_average_at_end=[round(x, 2) for x in os.getloadavg()]),
        "seconds": round(time.monotonic() - started, 1),
    }


def render(results: dict) -> str:
    """One table row per arm."""
    n = results["questions"]
    lines = [
        f"# The hybrid's lexical leg at several pools, {results['size']:,} rows ({results['date']})",
        "",
        f"`python -m zm_roi_bench.pool --size {results['size']} --arms {','.join(results['arms'])}` "
        f"(seed {results['seed']}): one project of "
        f"{results['rows_seen_by_the_member']:,} real-text memories built as `make bench SIZE=anchor-100k` builds "
        f"it; {n['paraphrased']} paraphrased and {n['templated']} templated questions as the member, "
        f"{results['rounds']} rounds of blocks per arm. per_term: postings read per lexeme; pool: candidates "
        "re-ranked by ts_rank where a list was cut. Buffers: p50 of EXPLAIN (ANALYZE, BUFFERS), the hybrid and "
        "its lexical leg alone at depth 20. Same lists: the hybrid's top 10 (and the leg's 20) identical to the "
        "first row's, in order. Load "
        f"{results['machine']['load_average_at_start']} at the start, {results['load_average_at_measurements']} "
        f"at the measurements; took {results['seconds']:.0f} s.",
        "",
        "| per_term / pool | hybrid buffers p50 | lexical leg buffers p50 | hybrid ms p50 | hybrid ms p95 "
        "| paraphrased hit@1 / hit@10 / MRR | templated hit@1 / hit@10 / MRR | same lists | same leg lists | "
        "recall_lexical paraphrased hit@1 / hit@10 / MRR | recall_lexical ms p50 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    total = sum(n.values())
    for key, a in results["arms"].items():
        hq, lq = a["hybrid_quality"], a["lexical_quality"]
        same_leg = f"{a['leg_lists_unchanged']} of {total}" if "leg_lists_unchanged" in a else "–"
        lines.append(
            f"| {key} | {a['hybrid_buffers_p50']:,.0f} | {a['leg_buffers_p50']:,.0f} | {a['hybrid_ms_p50']:.1f} "
            f"| {a['hybrid_ms_p95']:.1f} | {anchor.quality_cell(hq['paraphrased'])} "
            f"| {anchor.quality_cell(hq['templated'])} "
            f"| {a['hybrid_lists_unchanged']} of {total} | {same_leg} | {anchor.quality_cell(lq['paraphrased'])} "
            f"| {a['lexical_ms_p50']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.pool", description=__doc__)
    layers.one_layer_arguments(parser, root)
    parser.add_argument(
        "--arms",
        default=",".join(name(arm) for arm in ARMS),
        help="per_term/pool pairs, comma-separated; the first is the reference of `same lists`",
    )
    args = parser.parse_args(argv)
    arms = tuple(tuple(int(x) for x in arm.split("/")) for arm in args.arms.split(","))
    say = lambda text: print(text, flush=True)  # noqa: E731
    results = run(root, Path(args.adr_corpus), args.size, args.seed, say, arms)
    results["label"] = f"pool-{args.size // 1000}k"
    return report.publish(results, Path(args.out), render)


if __name__ == "__main__":
    raise SystemExit(main())
