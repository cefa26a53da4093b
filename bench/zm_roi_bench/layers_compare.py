"""`make bench SIZE=layers BASE=<commit>`: the layer bench's recalls on this checkout's database and on
another commit's, side by side and interleaved.

Both databases are built as `make bench SIZE=layers` builds its one (layers.py: the same real memories,
vectors and varied copies, written by COPY, vacuumed, the large layer's HNSW indexes built with the
statements each database's own pg_cron job would run), each from its own commit's migrations
(compare.py's `base_checkout`), both alive at once. Then the shipped `public.recall_lexical` and
three-leg `public.recall` ask every question, as the member with RLS applied, in layers.py's blocks
(each question twice, the second ask timed as steady state): round by round, and within a round layer
size by layer size, one database then the other, base first in even rounds and head first in odd ones,
so the machine's noise falls on both alike. The report sets each layer size's p50 side by side, head /
base and whether head is worse by more than 10% (issue 35's bar for the layer bench), and each side's
bytes per memory (footprint.py). Today's arms of the single run (`lexical_before`, `hybrid_before`) are
not measured here.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from zm_roi_bench import footprint, layers, report
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.compare import SIDES, _git, base_checkout, machine_table, side_order, verdict
from zm_roi_bench.timing import Series

RECALLS = ("lexical", "hybrid")
ROUNDS = 4  # an even number: each side goes first in as many rounds as the other
TOLERANCE = 0.10  # issue 35: p50 no worse than +10% at any layer size


def run(
    root: Path,
    adr_corpus: Path,
    base_rev: str,
    sizes=layers.LAYER_SIZES,
    seed: int = 42,
    rounds: int = ROUNDS,
    say: Callable[[str], None] = print,
) -> dict:
    """Build both databases, measure them interleaved; the raw figures for the report."""
    started = time.monotonic()
    results: dict = {"machine": machine(), "rounds": rounds, "sizes": list(sizes)}
    memories, paraphrases, vectors = layers.embedded_corpus(root, adr_corpus, say)
    with contextlib.ExitStack() as stack:
        base_sha, base = stack.enter_context(base_checkout(root, base_rev))
        roots = {"base": base.root, "head": root}
        results["base"] = {"commit": base_sha, "subject": _git(root, "log", "-1", "--format=%s", base_sha)}
        results["head"] = {
            "commit": _git(root, "rev-parse", "HEAD"),
            "uncommitted_changes": bool(_git(root, "status", "--porcelain")),
        }
        conns, built = {}, {}
        for side in SIDES:
            say(f"== {side}: {results[side]['commit'][:7]} ==")
            cluster = stack.enter_context(throwaway_cluster(roots[side], say))
            conns[side] = stack.enter_context(psycopg.connect(cluster.url()))
            built[side], results[side]["storage"] = layers.prepare(
                conns[side], memories, vectors, sizes, seed, say, before=False
            )
        results["server"] = server(conns["head"])["version"]
        questions = layers.questions_for(conns["head"], memories, paraphrases)
        results["questions"] = {s: sum(q["set"] == s for q in questions) for s in ("paraphrased", "templated")}
        results["load_average_at_measurements"] = [round(x, 2) for x in os.getloadavg()]
        samples = {side: {str(size): {} for size in sizes} for side in SIDES}
        for r in range(rounds):
            for size in sizes:
                for side in side_order(r):
                    say(f"round {r + 1}/{rounds}: layer of {size:,}, {side}")
                    one = dict(built[side], projects={size: built[side]["projects"][size]})
                    figures = layers.measure(conns[side], one, questions, RECALLS, range(r, r + 1), raw=True)
                    pool(samples[side][str(size)], figures[str(size)], first=r == 0)
        for side in SIDES:
            results[side]["layers"] = {
                size: {
                    "rows": figures["rows"],
                    **{
                        recall: dict(Series(figures[recall]).summary(), source_in_top_10=figures[f"{recall}_found"])
                        for recall in RECALLS
                    },
                }
                for size, figures in samples[side].items()
            }
    results["comparison"] = compare(results["base"]["layers"], results["head"]["layers"])
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["seconds"] = round(time.monotonic() - started, 1)
    return results


def pool(into: dict, figures: dict, first: bool) -> None:
    """One round's steady-state samples of a layer size added to the side's; the sources found in the
    first round."""
    into["rows"] = figures["rows"]
    for recall in RECALLS:
        into.setdefault(recall, []).extend(figures[recall]["samples"])
        if first:
            into[f"{recall}_found"] = figures[recall]["source_in_top_10"]


def compare(base: dict, head: dict) -> list[dict]:
    """Per layer size and recall: both p50s, head / base and the verdict at TOLERANCE."""
    rows = []
    for size in base:
        for recall in RECALLS:
            b, h = base[size][recall]["p50"], head[size][recall]["p50"]
            ratio, said = verdict(b, h, TOLERANCE)
            rows.append({"size": size, "recall": recall, "base": b, "head": h, "ratio": ratio, "verdict": said})
    return rows


def render(results: dict) -> str:
    base, head, m = results["base"], results["head"], results["machine"]
    head_name = f"`{head['commit'][:7]}`" + (" with uncommitted changes" if head["uncommitted_changes"] else "")
    rows = []
    for row in results["comparison"]:
        b, h = (side["layers"][row["size"]] for side in (base, head))
        rows.append(
            [
                f"{b['rows']:,}",
                row["recall"],
                report.format_ms(row["base"]),
                report.format_ms(row["head"]),
                f"{row['ratio']:.3f}",
                row["verdict"],
                f"{report.format_ms(b[row['recall']]['p95'])} / {report.format_ms(h[row['recall']]['p95'])}",
                f"{b[row['recall']]['source_in_top_10']} / {h[row['recall']]['source_in_top_10']}",
            ]
        )
    questions = results["questions"]
    n = questions["paraphrased"] + questions["templated"]
    out = [
        f"# Pinned recall against the layer's size, real text: head against {base['commit'][:7]}",
        "",
        f"Produced by `make bench SIZE=layers BASE={base['commit'][:7]}`: base `{base['commit'][:7]}` "
        f"({base['subject']}) against head {head_name}, on two throwaway clusters built from each commit's own "
        "migrations and written alike (layers.py: the same rows and vectors by COPY, `vacuum analyze`, the large "
        "layer's HNSW indexes by each database's own statements). "
        f"{questions['paraphrased']} paraphrased and {questions['templated']} templated questions with both real "
        "query embeddings, as the member with RLS applied; each question asked twice a block, the second ask "
        f"timed; {results['rounds']} rounds, and in each, layer size by layer size, both databases back to back, "
        f"base first in odd rounds and head first in even ones: n = {results['rounds'] * n} a side per figure. "
        "Source in top 10: first round, of "
        f"{n}. How the layer bench works: [layers.py](../zm_roi_bench/layers.py), this mode: "
        "[layers_compare.py](../zm_roi_bench/layers_compare.py).",
        "",
        *machine_table(m, results["load_average_at_measurements"], results["server"]),
        "",
        f"## Head against base (worse by more than {TOLERANCE:.0%} is flagged)",
        "",
        *report.table(
            [
                "rows in the pinned project",
                "recall",
                "base p50 ms",
                "head p50 ms",
                "head / base",
                "verdict",
                "p95 ms, base / head",
                "source in top 10, base / head",
            ],
            rows,
        ),
        "",
        "## Bytes per memory, each side (after `vacuum analyze` and the layers' HNSW indexes)",
        "",
    ]
    for side, name in ((base, "base"), (head, "head")):
        storage = side["storage"]
        built = ", ".join(f"{seconds:.0f} s" for seconds in storage["layer_indexes"].values()) or "none"
        out += [
            f"### {name} (`{side['commit'][:7]}`): {storage['per_memory']:,} bytes a memory",
            "",
            f"Written in {storage['written_seconds']:.0f} s; layer HNSW indexes built in: {built}.",
            "",
            footprint.render(storage),
            "",
        ]
    out.append(f"Took {results['seconds']:.0f} s.")
    return "\n".join(out) + "\n"


def write(results: dict, out_dir: Path) -> tuple[Path, Path]:
    """bench/results/<date>-layers-vs-<base>.md and .json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{datetime.date.today().isoformat()}-layers-vs-{results['base']['commit'][:7]}"
    md, raw = stem.with_suffix(".md"), stem.with_suffix(".json")
    raw.write_text(json.dumps(results, indent=2) + "\n")
    md.write_text(render(results))
    return md, raw
