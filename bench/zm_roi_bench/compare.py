"""`make bench SIZE=… BASE=<commit>`: this checkout's database side by side with another commit's.

Both databases get the same corpus (same generator, same seed) on their own throwaway clusters, both
alive at once. The measurements are the single run's own functions, each database called through the
verbs it has (`Checkout`: its named queries and its own worker), interleaved round by round with the
order swapped every round, so the machine's noise falls on both alike. The report sets each figure
side by side with the ratio head / base and whether head is worse by more than 5%.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

import zm_roi_bench as bench
from zm_roi.errors import UserError
from zm_roi_bench import corpus, measure, queue, report
from zm_roi_bench.cluster import conditions, read_into_page_cache, server, throwaway_cluster
from zm_roi_bench.measure import HYBRID_MODES, RECALL_MODES, Plan
from zm_roi_bench.sql import Checkout
from zm_roi_bench.timing import Series

SIDES = ("base", "head")
# The recall and queue-cost calls are split over this many rounds, and benchmark_memory() runs once per owner in
# each; an even number, so each side goes first in as many rounds as the other.
ROUNDS = 10
TOLERANCE = 0.05  # issue 19: none worse by more than 5%
# Drains per side and worker count: one 10,000-row drain is one sample of ~50 s, and the machine's noise
# moved a single 1-worker drain by ~10% between identical runs. Two, in both orders, and their median;
# a third would put a 1M run past 20 minutes.
DRAIN_REPEATS = 2
# (figure, path to it in one side's pooled figures); every figure is a time, lower is better.
FIGURES = (
    ("worker queue cost per row, p50", ("queue_cost", "p50")),
    *(
        (f"{n} worker{'s' if n > 1 else ''} draining the judgments", ("drains", str(n), "ms"))
        for n in queue.WORKER_COUNTS
    ),
    ("pinned recall p50, project + personal", ("recall", "pinned_project", "p50")),
    ("pinned recall p50, team + personal", ("recall", "pinned_team", "p50")),
    ("pinned hybrid recall p50, project + personal", ("recall", "hybrid", "pinned_project", "p50")),
    ("pinned hybrid recall p50, team + personal", ("recall", "hybrid", "pinned_team", "p50")),
    ("benchmark_memory(), 20 probes, p50", ("benchmark", "rpc", "p50")),
)


def side_order(round_no: int) -> tuple[str, ...]:
    """Which database goes first in a round: base in even rounds, head in odd ones, so neither always
    runs on a machine the other just warmed (or just loaded)."""
    return SIDES if round_no % 2 == 0 else SIDES[::-1]


def round_plan(plan: Plan) -> Plan:
    """One round's share of the calls: a tenth of the recalls and queue rows, one run per owner. Judgments
    are queued in runs of 20, so a round's queue rows are whole runs (100 of the 1,000)."""
    return dataclasses.replace(
        plan,
        recall_calls=-(-plan.recall_calls // ROUNDS),  # at least one a round
        rounds=1,
        queue_rows=-(-plan.queue_rows // (ROUNDS * queue.PER_RUN)) * queue.PER_RUN,
    )


def verdict(base: float | None, head: float | None, tolerance: float = TOLERANCE) -> tuple[float | None, str]:
    """The ratio head / base of a time, and whether head is worse than base by more than `tolerance`."""
    if base is None or head is None or base <= 0:
        return None, "not compared"
    ratio = head / base
    change = f"{ratio - 1:+.1%}"
    return ratio, (f"**worse by more than {tolerance:.0%}** ({change})" if ratio > 1 + tolerance else f"ok ({change})")


def pooled(rounds: list[dict], path: tuple) -> dict:
    """One summary over the raw samples of the figure at `path` in every round."""
    samples = []
    for figures in rounds:
        for key in path:
            figures = figures[key]
        samples += figures["samples"]
    return Series(samples).summary()


def pool_side(rounds: list[dict], drains: dict) -> dict:
    """One side's figures over all its rounds, in the shape FIGURES' paths read."""
    return {
        "queue_cost": pooled(rounds, ("queue_cost",)),
        "drains": drains,
        "recall": {mode: pooled(rounds, ("recall", mode)) for mode in RECALL_MODES}
        | {"hybrid": {mode: pooled(rounds, ("recall", "hybrid", mode)) for mode in HYBRID_MODES}},
        "benchmark": {
            "rpc": pooled(rounds, ("benchmark", "rpc")),
            "recalls_alone_sum": pooled(rounds, ("benchmark", "recalls_alone_sum")),
        },
    }


def pool_drains(runs: list[dict]) -> dict:
    """The drains of one side and worker count as one figure: the median time over the repeats, with
    every run's time, what they judged, put off and left, their exit codes and the highest peak memory."""
    times = [run["ms"] for run in runs]
    return {
        "workers": runs[0]["workers"],
        "n": len(runs),
        "ms": round(statistics.median(times), 1),
        "samples": times,
        "judged": min(run["judged"] for run in runs),
        "left_in_queue": max(run["left_in_queue"] for run in runs),
        "put_off": [rows for run in runs for rows in run["put_off"]],
        "exit_codes": [code for run in runs for code in run["exit_codes"]],
        "peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
    }


def _put_off(drained: dict) -> int:
    return sum(rows["rows"] for rows in drained["put_off"])


def _git(root: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


@contextlib.contextmanager
def base_checkout(root: Path, rev: str) -> Iterator[tuple[str, Checkout]]:
    """The files of commit `rev` in a temporary folder (`git archive`), with this checkout's pinned
    Supabase CLI; removed afterwards. Yields the full commit id and the checkout."""
    sha = _git(root, "rev-parse", "--verify", f"{rev}^{{commit}}")
    archive = subprocess.run(["git", "-C", str(root), "archive", sha], capture_output=True, check=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="zm-roi-bench-base-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        (folder / "node_modules").symlink_to(root / "node_modules")
        yield sha, Checkout(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(
    root: Path,
    size: int,
    label: str,
    base_rev: str,
    out_dir: Path,
    seed: int,
    plan: Plan | None = None,
    command: str = "make bench BASE=…",
    say: Callable[[str], None] = print,
    owners: int | None = None,
    head_first: bool = False,
) -> tuple[Path, Path]:
    """Build both databases, read their files into the page cache, measure them interleaved, and write one
    side-by-side report. The base's cluster is built first unless `head_first`: at 1M the cluster built
    first had lost part of its files from the page cache by the rounds and measured slower on code both
    sides share, which the reading undoes; a run in each order checks that it did."""
    plan = plan or Plan()
    per_round = round_plan(plan)
    results = bench.begin(label, command, seed, owners, plan) | {
        "size": size,
        "rounds": ROUNDS,
        "built_first": "head" if head_first else "base",
        "head": {
            "commit": _git(root, "rev-parse", "HEAD"),
            "uncommitted_changes": bool(_git(root, "status", "--porcelain")),
        },
    }
    with contextlib.ExitStack() as stack:
        base_sha, base = stack.enter_context(base_checkout(root, base_rev))
        results["base"] = {"commit": base_sha, "subject": _git(root, "log", "-1", "--format=%s", base_sha)}
        checkouts = {"base": base, "head": Checkout(root)}
        clusters, urls = {}, {}
        for side in SIDES[::-1] if head_first else SIDES:
            say(f"== {side}: {results[side]['commit'][:7]}, {size:,} memories (seed {seed}) ==")
            clusters[side] = stack.enter_context(throwaway_cluster(checkouts[side].root, say))
            urls[side] = clusters[side].url()
            build = corpus.build(urls[side], size, seed, say, owners=owners)
            results[side] |= {"build_seconds": build, "corpus": corpus.shape(urls[side])}
        with psycopg.connect(urls["head"]) as conn:
            results["server"] = server(conn)
        results["load_average_at_measurements"] = [round(x, 2) for x in os.getloadavg()]
        steps = (
            ("recall", lambda side, r: measure.recall(urls[side], seed + r, per_round)[0]),
            ("benchmark", lambda side, r: measure.benchmark(urls[side], seed, per_round)),
            (
                "queue_cost",
                lambda side, r: queue.queue_cost(
                    urls[side], queue.worker_url_of(urls[side]), per_round.queue_rows, checkouts[side]
                ),
            ),
        )
        rounds: dict[str, list[dict]] = {side: [{} for _ in range(ROUNDS)] for side in SIDES}
        say("reading both databases' files into the page cache, in turn")
        read_into_page_cache(*(clusters[side].pgdata / "base" for side in SIDES))
        before = {side: conditions(clusters[side]) for side in SIDES}
        for r in range(ROUNDS):
            for name, step in steps:
                for side in side_order(r):
                    say(f"round {r + 1}/{ROUNDS}: {name}, {side}")
                    rounds[side][r][name] = step(side, r)
        for side in SIDES:
            results[side]["conditions"] = {"before": before[side], "after": conditions(clusters[side])}
        sample = measure.pinned_sample(urls["head"], seed)
        for side in SIDES:
            results[side]["recall_plans"] = measure.explain_recall(urls[side], sample) if sample else {}
        drains: dict[str, dict] = {side: {} for side in SIDES}
        with queue.instant_model() as model:
            for workers in queue.WORKER_COUNTS:
                runs: dict[str, list[dict]] = {side: [] for side in SIDES}
                for repeat in range(DRAIN_REPEATS):
                    for side in side_order(repeat):
                        say(f"{workers} worker process(es) draining {plan.drain_rows:,} judgments, {side}")
                        runs[side].append(
                            queue.drain(
                                urls[side],
                                queue.worker_url_of(urls[side]),
                                workers,
                                plan.drain_rows,
                                model,
                                checkouts[side],
                            )
                        )
                for side in SIDES:
                    drains[side][str(workers)] = pool_drains(runs[side])
    for side in SIDES:
        results[side] |= {"figures": pool_side(rounds[side], drains[side]), "rounds": rounds[side]}
    results["comparison"] = compare(results["base"]["figures"], results["head"]["figures"])
    bench.end(results)
    return report.write(results, out_dir, render)


def compare(base: dict, head: dict) -> list[dict]:
    """Each figure of FIGURES: base, head, the ratio and the verdict."""
    rows = []
    for what, path in FIGURES:
        values = [_dig(side, path) for side in (base, head)]
        ratio, said = verdict(*values)
        n = _dig(base, (*path[:-1], "n"))
        rows.append({"what": what, "n": n, "base": values[0], "head": values[1], "ratio": ratio, "verdict": said})
    return rows


def _dig(figures: dict, path: tuple) -> float | None:
    for key in path:
        figures = figures.get(key) if isinstance(figures, dict) else None
    return figures


def plan_shape(plan: str) -> list[str]:
    """A plan's nodes without their costs, times and counts: what two sides' plans must share to be
    the same plan."""
    return [line.split("(cost=")[0].replace("->", "").strip() for line in plan.splitlines() if "(cost=" in line]


def _while_measured(side: dict) -> dict:
    """The server counters' growth over the measurement rounds, and the page cache before and after."""
    before, after = side["conditions"]["before"], side["conditions"]["after"]
    grown = {key: after[key] - before[key] for key in ("blks_read", "blks_hit", "blk_read_ms", "checkpoints")}
    return grown | {"autovacuum_runs": after["autovacuum_runs"] - before["autovacuum_runs"]}


def _cached(conditions: dict) -> str:
    held = conditions["page_cache"]
    return "–" if not held or not held["bytes"] else f"{held['cached_bytes'] / held['bytes']:.0%}"


def _conditions_rows(base: dict, head: dict) -> list[list[str]]:
    """What else each server did while measured: the report's reader checks these before the ratios."""
    sides = (base, head)
    grown = [_while_measured(s) for s in sides]
    shapes = [{label: plan_shape(plan) for label, plan in s["recall_plans"].items()} for s in sides]
    return [
        [
            "page cache held of the database's files: before / after the rounds",
            *(f"{_cached(s['conditions']['before'])} / {_cached(s['conditions']['after'])}" for s in sides),
        ],
        [
            "during the rounds: blocks read from outside shared buffers (ms reading) / hit",
            *(f"{g['blks_read']:,} ({g['blk_read_ms']:,}) / {g['blks_hit']:,}" for g in grown),
        ],
        [
            "during the rounds: checkpoints / autovacuum and autoanalyze runs / autovacuum workers at the start",
            *(
                f"{g['checkpoints']} / {g['autovacuum_runs']} / {s['conditions']['before']['autovacuum_workers']}"
                for g, s in zip(grown, sides, strict=True)
            ),
        ],
        [
            "recall's plan after the rounds, pinned project / unpinned: nodes (head: the base's plan?)",
            " / ".join(str(len(shape)) for shape in shapes[0].values()) or "–",
            " / ".join("same" if shapes[0].get(label) == shape else "**differs**" for label, shape in shapes[1].items())
            or "–",
        ],
    ]


def _per_drain(side: dict, cell: Callable[[dict], str]) -> str:
    return " / ".join(cell(side["figures"]["drains"][str(n)]) for n in queue.WORKER_COUNTS)


def machine_table(machine: dict, load_at_measurements: list, server_version: str) -> list[str]:
    """The machine, its load at the start, the measurements and the end, and the server, as one table."""
    loads = (machine["load_average_at_start"], load_at_measurements, machine["load_average_at_end"])
    return report.table(
        ["CPU", "cores", "memory", "load average at start / measurements / end", "PostgreSQL"],
        [
            [
                machine["cpu_model"],
                machine["cores"],
                f"{machine['memory_gb']} GB",
                " / ".join(", ".join(map(str, load)) for load in loads),
                server_version.split(" on ")[0],
            ]
        ],
    )


def render(results: dict) -> str:
    """The Markdown report of one side-by-side run."""
    base, head, m = results["base"], results["head"], results["machine"]
    plan = results["plan"]
    head_name = f"`{head['commit'][:7]}`" + (" with uncommitted changes" if head["uncommitted_changes"] else "")
    out = [
        f"# zm-roi bench: {results['label']} ({results['date']})",
        "",
        f"Produced by `{results['command']}` (seed {results['seed']}): base `{base['commit'][:7]}` "
        f"({base['subject']}) against head {head_name}, {results['size']:,} memories each, on two throwaway "
        f"clusters built from each commit's own migrations, the {results.get('built_first', 'base')}'s first, alive "
        "side by side, each one's database files read into the page cache before the rounds. Each database is "
        "measured through its own verbs (its named queries, its own `zm-roi worker`). The recall, benchmark_memory() "
        f"and queue-cost calls are split over {results['rounds']} rounds; in each round every measurement "
        "runs on both databases back to back, base first in odd rounds and head first in even ones. Each "
        f"drain runs {DRAIN_REPEATS} times a side per worker count, back to back, base first and then head "
        "first, and the report takes their median. How the bench works: "
        "[bench/README.md](../README.md).",
        "",
        *machine_table(m, results["load_average_at_measurements"], results["server"]["version"]),
        "",
        f"## Head against base (worse by more than {TOLERANCE:.0%} is flagged)",
        "",
        *report.table(
            ["figure", "n per side", "base ms", "head ms", "head / base", "verdict"],
            [
                [
                    row["what"],
                    row["n"] or 1,
                    report.format_ms(row["base"]),
                    report.format_ms(row["head"]),
                    "–" if row["ratio"] is None else f"{row['ratio']:.3f}",
                    row["verdict"],
                ]
                for row in results["comparison"]
            ],
        ),
        "",
        f"Drains: {plan['drain_rows']:,} freshly queued judgments each, zero-latency model, timed from the "
        "first verdict to the last; n per side is the number of drains (each one's time is in the .json). "
        "Hybrid recalls: the same pinned samples with a random unit query vector.",
        "",
        "## Both databases",
        "",
        *report.table(
            ["", "base", "head"],
            [
                [
                    "memories / users",
                    *(f"{s['corpus']['memories']:,} / {s['corpus']['users']:,}" for s in (base, head)),
                ],
                [
                    "table / all indexes",
                    *(f"{s['corpus']['table_size']} / {s['corpus']['indexes_size']}" for s in (base, head)),
                ],
                [
                    "build (s): population, memories, indexes, analyze",
                    *(", ".join(map(str, s["build_seconds"].values())) for s in (base, head)),
                ],
                [
                    "drains, 1 / 2 / 4 workers: judged (left in the queue, put off by a failed attempt)",
                    *(
                        _per_drain(s, lambda d: f"{d['judged']:,} ({d['left_in_queue']}, {_put_off(d)})")
                        for s in (base, head)
                    ),
                ],
                [
                    "worker peak memory (MB), 1 / 2 / 4 workers",
                    *(_per_drain(s, lambda d: str(d["peak_rss_mb"])) for s in (base, head)),
                ],
                *_conditions_rows(base, head),
            ],
        ),
        "",
        "Not compared here: upkeep and model latency (a single `make bench` measures them). The recall plans "
        "are in the .json.",
    ]
    return "\n".join(out) + "\n"
