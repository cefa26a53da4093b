"""The measurements, each a series of calls timed from the client over a local TCP connection.

Users are acted as exactly as PostgREST does (role + request.jwt.claims, transaction-local); the
identity switch is outside the timed span, the statement and its result are inside. Measurements
that are compared (a pinned recall and an unpinned one; benchmark_memory() and the same 20 recalls
run alone) are interleaved call by call, so a noisy neighbour slows all of
them alike and their ratios stay meaningful.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from zm_roi.identity import act_as, claims_for
from zm_roi_bench.sql import bench_query
from zm_roi_bench.timing import Series, percentile, timed

RECALL_MODES = ("pinned_project", "pinned_team", "pinned_personal", "unpinned")
# The same pinned samples through the hybrid recall (lexical + exact distances over the pinned layer).
HYBRID_MODES = ("pinned_project", "pinned_team", "pinned_personal")
# Buckets of the pinned project or team layer (live memories in it), for recall cost by layer size.
LAYER_BUCKETS = ((0, 1_000, "up to 1,000"), (1_000, 3_000, "1,001 to 3,000"), (3_000, None, "over 3,000"))


@dataclass(frozen=True)
class Plan:
    """How many calls each measurement makes."""

    recall_calls: int = 200  # per mode
    owners: int = 20  # owners whose runs are timed
    rounds: int = 3  # runs per owner
    idle_upkeep_calls: int = 100
    refill_cycles: int = 2  # upkeep cycles that refill every owner's pool from empty
    rotation_cycles: int = 2  # upkeep cycles that top up every owner after a rotation of 3
    recheck_cycles: int = 2  # upkeep cycles after a memory changed somewhere, with nothing to top up
    round_trips: int = 200
    queue_rows: int = 1000  # rows claimed and recorded with no model, for the queue cost
    drain_rows: int = 10_000  # judgments each of the 1, 2 and 4 worker drains works through
    worker: bool = True  # measured once per report, at the largest size
    one_write_cycles: int = 5  # upkeep cycles after one write to one project
    spread_write_cycles: int = 3  # upkeep cycles after 100 writes spread over 100 projects
    model_delay_s: float = 1.0  # the slow model of the latency measurement (with the worker)


def _recall_samples(conn: psycopg.Connection, seed: int, n: int) -> dict[str, list[dict]]:
    samples = {
        mode: conn.execute(bench_query(f"recall_samples_{mode.split('_')[1]}"), {"seed": seed, "n": n}).fetchall()
        for mode in RECALL_MODES[:3]
    }
    # Unpinned: the same people asking the same project questions, as an agent with no pin would.
    samples["unpinned"] = [
        dict(s, project_id=None, team_id=None, personal_only=False) for s in samples["pinned_project"]
    ]
    return samples


def _recall_as(conn: psycopg.Connection, sample: dict, name: str = "recall") -> tuple[float, list[dict]]:
    with conn.transaction():
        act_as(conn, claims_for(sample["user_id"]))
        return timed(lambda: conn.execute(bench_query(name), sample).fetchall())


def _unit_vector(rng: random.Random) -> str:
    values = [rng.gauss(0, 1) for _ in range(384)]
    norm = math.sqrt(sum(v * v for v in values))
    return "[" + ",".join(f"{v / norm:.6f}" for v in values) + "]"


def round_trip(url: str, plan: Plan) -> dict:
    """`select 1`: what one statement costs on this connection before it does anything."""
    series = Series()
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(plan.round_trips):
            series.add(timed(lambda: conn.execute(bench_query("round_trip")).fetchall())[0])
    return series.summary()


def recall(url: str, seed: int, plan: Plan) -> tuple[dict, dict | None]:
    """public.recall() pinned as the benchmark pins it (project, team, personal) and unpinned.

    Returns the summaries by mode and one pinned project sample, for EXPLAIN."""
    series = {mode: Series() for mode in RECALL_MODES}
    hybrid = {mode: Series() for mode in HYBRID_MODES}
    rng = random.Random(seed)  # noqa: S311 - reproducible query vectors, not secrets
    by_layer = {label: Series() for _, _, label in LAYER_BUCKETS}
    found = dict.fromkeys(RECALL_MODES, 0)
    with psycopg.connect(url, row_factory=dict_row) as conn:
        samples = _recall_samples(conn, seed, plan.recall_calls)
        conn.commit()
        for mode in RECALL_MODES:  # warm-up: the first call of a session loads the dictionaries
            for sample in samples[mode][:3]:
                _recall_as(conn, sample)
        longest = max(len(rows) for rows in samples.values())
        for i in range(longest):
            for mode in RECALL_MODES:
                if i < len(samples[mode]):
                    sample = samples[mode][i]
                    ms, rows = _recall_as(conn, sample)
                    series[mode].add(ms)
                    found[mode] += sample["memory_id"] in {row["memory_id"] for row in rows}
                    if mode in HYBRID_MODES:
                        ms_hybrid, _ = _recall_as(conn, dict(sample, embedding=_unit_vector(rng)), "recall_hybrid")
                        hybrid[mode].add(ms_hybrid)
                    if mode in ("pinned_project", "pinned_team"):
                        for low, high, label in LAYER_BUCKETS:
                            if sample["layer_rows"] > low and (high is None or sample["layer_rows"] <= high):
                                by_layer[label].add(ms)
    summaries = {mode: dict(series[mode].summary(), source_in_top_10=found[mode]) for mode in RECALL_MODES}
    summaries["hybrid"] = {mode: hybrid[mode].summary() for mode in HYBRID_MODES}
    summaries["pinned_by_layer_rows"] = {label: by_layer[label].summary(raw=False) for label in by_layer}
    layer_sizes = [s["layer_rows"] for mode in ("pinned_project", "pinned_team") for s in samples[mode]]
    summaries["pinned_layer_rows"] = {
        "p50": percentile(layer_sizes, 0.5),
        "p95": percentile(layer_sizes, 0.95),
        "max": max(layer_sizes, default=None),
    }
    return summaries, (samples["pinned_project"][0] if samples["pinned_project"] else None)


def benchmark(url: str, seed: int, plan: Plan) -> dict:
    """benchmark_memory() with a full pool, and the same recalls run alone."""
    first = Series()
    rpc = Series()
    alone = Series()
    ratios: list[float] = []
    statuses: dict[str, int] = {}
    probes_per_run: list[int] = []
    with psycopg.connect(url, row_factory=dict_row) as conn:
        owners = [row["user_id"] for row in conn.execute(bench_query("bench_owners"), {"seed": seed, "n": plan.owners})]
        conn.commit()

        def call_rpc(owner) -> tuple[float, dict]:
            # The commit is timed too: the run writes its results, and the caller waits for them.
            act_as(conn, claims_for(owner))

            def rpc_and_commit():
                row = conn.execute(bench_query("benchmark_memory")).fetchone()
                conn.commit()
                return row

            ms, row = timed(rpc_and_commit)
            return ms, row["benchmark_memory"]

        for owner in owners:  # the first call fills an empty pool of 20, then runs it
            ms, outcome = call_rpc(owner)
            first.add(ms)
            statuses[outcome["status"]] = statuses.get(outcome["status"], 0) + 1

        def run_alone(owner, probes) -> float:
            return sum(_recall_as(conn, dict(probe, user_id=owner))[0] for probe in probes)

        def run_rpc(owner) -> float:
            ms, outcome = call_rpc(owner)
            statuses[outcome["status"]] = statuses.get(outcome["status"], 0) + 1
            probes_per_run.append(outcome.get("probes", 0))
            rpc.add(ms)
            return ms

        for r in range(plan.rounds):
            for i, owner in enumerate(owners):
                # Two orders in turn, so neither measurement always runs on caches the other just warmed.
                # The RPC and its recalls alone stay a pair, read from the pool just before them:
                # every run rotates the pool, so only then are they the same 20 recalls.
                probes = conn.execute(bench_query("active_probes"), {"owner": owner}).fetchall()
                conn.commit()
                if (r + i) % 2 == 0:
                    alone_ms = run_alone(owner, probes)
                    rpc_ms = run_rpc(owner)
                else:
                    rpc_ms = run_rpc(owner)
                    alone_ms = run_alone(owner, probes)
                alone.add(alone_ms)
                if alone_ms:
                    ratios.append(rpc_ms / alone_ms)
    overhead = percentile(ratios, 0.5)
    return {
        "first_call": first.summary(),
        "rpc": rpc.summary(),
        "recalls_alone_sum": alone.summary(),
        "overhead_p50": None if overhead is None else round(overhead - 1, 4),
        "overhead_p95": None if not ratios else round(percentile(ratios, 0.95) - 1, 4),
        "probes_per_run": {"min": min(probes_per_run, default=0), "max": max(probes_per_run, default=0)},
        "statuses": statuses,
        "owners": len(owners),
    }


def upkeep(url: str, plan: Plan) -> dict:
    """Filling every owner's pool, the cycles that top them all up, and an idle cycle."""
    fill = Series()
    refills = Series()
    rotations = Series()
    outcomes: list[dict] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(bench_query("upkeep"))  # settle what earlier measurements left behind
        owners = [row[0] for row in conn.execute(bench_query("all_owners"))]
        for owner in owners:  # one owner's empty pool, filled as upkeep does it (impersonated)
            fill.add(timed(lambda owner=owner: conn.execute(bench_query("upkeep_owner"), {"owner": owner}))[0])
        pools = conn.execute(bench_query("pool_summary")).fetchone()
        for _ in range(plan.refill_cycles):
            conn.execute(bench_query("retire_all_probes"))
            conn.execute(bench_query("mark_every_pool_dirty"))
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            refills.add(ms)
            outcomes.append(dict(row[0], kind="refill", ms=round(ms, 1)))
        for _ in range(plan.rotation_cycles):
            conn.execute(bench_query("retire_some_probes"), {"k": 3})
            conn.execute(bench_query("mark_every_pool_dirty"))
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            rotations.add(ms)
            outcomes.append(dict(row[0], kind="rotation", ms=round(ms, 1)))
        conn.execute(bench_query("upkeep"))
        # The worst case of the dirty marks: a change that touches every owner (a bulk import, a
        # reorganisation) makes the next cycle re-check every owner with a pool.
        rechecks = Series()
        for _ in range(plan.recheck_cycles):
            conn.execute(bench_query("mark_every_pool_dirty"))
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            rechecks.add(ms)
            outcomes.append(dict(row[0], kind="recheck", ms=round(ms, 1)))
        idle = Series()
        idle_outcome = None
        for _ in range(plan.idle_upkeep_calls):
            ms, row = timed(lambda: conn.execute(bench_query("upkeep")).fetchone())
            idle.add(ms)
            idle_outcome = row[0]
    return {
        "owners": len(owners),
        "pools": {"owners": pools[0], "active": pools[1], "pending": pools[2]},
        "fill_one_owner": fill.summary(),
        "refill_all_owners": refills.summary(),
        "rotation_all_owners": rotations.summary(),
        "recheck_all_owners": rechecks.summary(),
        "cycles": outcomes,
        "idle": idle.summary(),
        "idle_outcome": idle_outcome,
    }


def pinned_sample(url: str, seed: int) -> dict | None:
    """One pinned project recall of the bench's samples, for EXPLAIN."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        samples = _recall_samples(conn, seed, 1)["pinned_project"]
    return samples[0] if samples else None


def explain_recall(url: str, sample: dict) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) of recall()'s own statement, pinned and unpinned, as the user.

    recall() is a SQL function: EXPLAIN of the call shows only a Function Scan. auto_explain with
    nested statements logs the plan the function really runs (its generic plan, RLS included) and
    sends it to this client as a notice.
    """
    plans: dict[str, str] = {}
    notices: list[str] = []
    with psycopg.connect(url, row_factory=dict_row) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        for statement in bench_query("auto_explain_on").split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.commit()
        pinned = dict(sample)
        unpinned = dict(sample, project_id=None, team_id=None, personal_only=False)
        for label, call in (("pinned_project", pinned), ("unpinned", unpinned)):
            _recall_as(conn, call)  # warm
            notices.clear()
            _recall_as(conn, call)
            body = [n for n in notices if "from public.memories m" in n]
            plans[label] = body[-1] if body else "\n".join(notices)
    return plans


def worker(url: str, plan: Plan, say=print) -> dict:
    """The worker's queue cost per row, 1/2/4 workers draining 10,000 judgments, its peak memory."""
    from zm_roi_bench import queue

    return queue.measure(url, plan.queue_rows, plan.drain_rows, say)


def as_json(value) -> str:
    return json.dumps(value, default=str, indent=2)
