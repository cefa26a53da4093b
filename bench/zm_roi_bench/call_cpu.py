"""python -m zm_roi_bench.call_cpu VARIANT.sql [--size 100k] [--blocks 6]: what a change to the functions
behind benchmark_memory() does to a call's CPU, before it is built into a migration's bench run.

On one bench corpus (deterministic mode, as `make bench` measures it) the checkout's own definitions
(base) and the variant (a file of `create or replace function` statements, e.g. a new migration) take
turns on the same database, block by block, the order alternating. Each block applies its arm, lets
every owner call once unmeasured (plans made again), then times `rounds` calls per owner: the backend's
own CPU time (`/proc/<pid>/schedstat`, which load moves far less than wall time) around the call and
its commit, and the client's wall time. Both arms meet the same pools and tables, so rotation and growth
are shared. Report: bench/results/<date>-call-cpu-<variant>.md (+ .json)."""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
import time
from pathlib import Path

import psycopg

from zm_roi import localdb
from zm_roi.errors import UserError
from zm_roi.identity import act_as, claims_for
from zm_roi_bench import DEFAULT_SEED, SIZES, corpus, report
from zm_roi_bench.cluster import machine, throwaway_cluster
from zm_roi_bench.compare import _git
from zm_roi_bench.sql import bench_query

OWNERS = 20
ARMS = ("base", "variant")
REPLACED = re.compile(r"^\s*create\s+or\s+replace\s+function\s+([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)\s*\(", re.I | re.M)
STATEMENT_START = re.compile(r"^\s*(create|alter|drop|insert|update|delete|grant|revoke|select|do)\b", re.I | re.M)


def replaced_functions(variant_sql: str) -> list[str]:
    """The functions a variant replaces, in order. Anything else in it could not be undone by re-applying
    the checkout's definitions, so it is refused."""
    names = REPLACED.findall(variant_sql)
    statements = len(STATEMENT_START.findall(_without_bodies(variant_sql)))
    if not names or statements != len(names):
        raise UserError(
            "the variant must hold `create or replace function` statements only (base is restored by "
            "replacing those functions with the checkout's definitions)"
        )
    return names


def _without_bodies(sql: str) -> str:
    return re.sub(r"\$\$.*?\$\$", "$$ $$", re.sub(r"--[^\n]*", "", sql), flags=re.S)


def checkout_definitions(schemas_sql: str, names: list[str]) -> str:
    """The checkout's current definition of each named function (supabase/schemas/), as `create or
    replace` statements."""
    found = []
    for name in names:
        match = re.search(r"^create function " + re.escape(name) + r"\(.*?\n\$\$;\n", schemas_sql, re.S | re.M)
        if match is None:
            raise UserError(f"{name} is not defined in supabase/schemas/: the variant must replace existing functions")
        found.append(match.group(0).replace("create function", "create or replace function", 1))
    return "\n".join(found)


def _cpu_ms(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e6


def _block(url: str, owners: list, rounds: int) -> list[tuple[float, float]]:
    """One unmeasured call per owner, then `rounds` measured ones: (CPU ms, wall ms) a call."""
    samples = []
    with psycopg.connect(url) as conn:
        pid = conn.execute("select pg_backend_pid()").fetchone()[0]
        conn.commit()
        for r in range(rounds + 1):
            for owner in owners:
                act_as(conn, claims_for(owner))
                cpu, wall = _cpu_ms(pid), time.perf_counter()
                conn.execute(bench_query("benchmark_memory"))
                conn.commit()
                if r:
                    samples.append((_cpu_ms(pid) - cpu, (time.perf_counter() - wall) * 1000))
    return samples


def measure(url: str, sql: dict[str, str], blocks: int, rounds: int, say=print) -> list[dict]:
    with psycopg.connect(url) as conn:
        owners = [row[0] for row in conn.execute(bench_query("bench_owners"), {"seed": DEFAULT_SEED, "n": OWNERS})]
    _block(url, owners, 2)  # fill every pool, then run on it
    measured = []
    for b in range(blocks):
        for arm in ARMS if b % 2 == 0 else ARMS[::-1]:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql[arm])
            samples = _block(url, owners, rounds)
            measured.append(
                {"block": b + 1, "arm": arm, "cpu_ms": [s[0] for s in samples], "wall_ms": [s[1] for s in samples]}
            )
            say(f"block {b + 1}/{blocks}, {arm}: CPU p50 {statistics.median(measured[-1]['cpu_ms']):.3f} ms")
    return measured


def summarize(measured: list[dict]) -> dict:
    """Each arm's p50 over all its calls, and each block's variant − base (p50 CPU)."""
    arms = {
        arm: {
            "calls": sum(len(m["cpu_ms"]) for m in measured if m["arm"] == arm),
            "cpu_p50_ms": round(statistics.median([x for m in measured if m["arm"] == arm for x in m["cpu_ms"]]), 3),
            "wall_p50_ms": round(statistics.median([x for m in measured if m["arm"] == arm for x in m["wall_ms"]]), 3),
        }
        for arm in ARMS
    }
    blocks = []
    for b in sorted({m["block"] for m in measured}):
        p50 = {m["arm"]: statistics.median(m["cpu_ms"]) for m in measured if m["block"] == b}
        first = next(m["arm"] for m in measured if m["block"] == b)
        blocks.append(
            {
                "block": b,
                "first": first,
                "base_cpu_p50_ms": round(p50["base"], 3),
                "variant_cpu_p50_ms": round(p50["variant"], 3),
                "difference_ms": round(p50["variant"] - p50["base"], 3),
            }
        )
    return {
        "arms": arms,
        "blocks": blocks,
        "variant_minus_base_cpu_p50_ms": round(arms["variant"]["cpu_p50_ms"] - arms["base"]["cpu_p50_ms"], 3),
        "median_block_difference_ms": round(statistics.median(b["difference_ms"] for b in blocks), 3),
        "blocks_favouring_variant": sum(b["difference_ms"] < 0 for b in blocks),
    }


def render(results: dict) -> str:
    arms, m = results["arms"], results["machine"]
    lines = [
        f"# benchmark_memory()'s CPU a call: `{results['variant']}` against the checkout, {results['size']:,} memories",
        "",
        f"`{results['command']}` at `{results['commit']}`: the checkout's definitions (base) and the variant "
        f"({', '.join(results['replaced'])}) take turns on one database, {len(results['blocks'])} blocks, the order "
        f"alternating; each block one unmeasured call per owner, then {results['rounds']} calls each of "
        f"{OWNERS} owners. CPU is the backend's own time around the call and its commit.",
        "",
        "| block | first | base CPU p50 (ms) | variant CPU p50 (ms) | variant − base |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {b['block']} | {b['first']} | {b['base_cpu_p50_ms']} | {b['variant_cpu_p50_ms']} | {b['difference_ms']:+} |"
        for b in results["blocks"]
    ]
    lines += [
        "",
        f"All calls ({arms['base']['calls']} an arm): CPU p50 {arms['base']['cpu_p50_ms']} → "
        f"{arms['variant']['cpu_p50_ms']} ms ({results['variant_minus_base_cpu_p50_ms']:+} ms), wall p50 "
        f"{arms['base']['wall_p50_ms']} → {arms['variant']['wall_p50_ms']} ms. Blocks favouring the variant: "
        f"{results['blocks_favouring_variant']} of {len(results['blocks'])}; the median block difference "
        f"{results['median_block_difference_ms']:+} ms.",
        "",
        report.machine_line(m),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.call_cpu", description=__doc__)
    parser.add_argument("variant", type=Path, help="a file of `create or replace function` statements")
    parser.add_argument("--size", default="100k", choices=sorted(SIZES))
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2, help="measured calls per owner and block")
    parser.add_argument("--out", default=None, help="report folder (default: bench/results in the checkout)")
    args = parser.parse_args(argv)
    root = localdb.project_root()
    try:
        if not args.variant.is_file():
            raise UserError(f"{args.variant}: no such file")
        variant_sql = args.variant.read_text()
        names = replaced_functions(variant_sql)
        schemas = "".join(p.read_text() for p in sorted((root / "supabase" / "schemas").glob("*.sql")))
        sql = {"base": checkout_definitions(schemas, names), "variant": variant_sql}
        started_machine = machine()
        with throwaway_cluster(root) as cluster:
            corpus.build(cluster.url(), SIZES[args.size], DEFAULT_SEED)
            measured = measure(cluster.url(), sql, args.blocks, args.rounds)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    stem = args.variant.stem
    results = summarize(measured) | {
        "size": SIZES[args.size],
        "variant": args.variant.name,
        "replaced": names,
        "rounds": args.rounds,
        "measured": measured,
        "machine": started_machine,
        "commit": _git(root, "rev-parse", "--short", "HEAD"),
        "command": f"python -m zm_roi_bench.call_cpu {args.variant.name} --size {args.size} --blocks {args.blocks}",
        "date": datetime.date.today().isoformat(),
        "label": f"call-cpu-{stem[:40]}",
    }
    report.write(results, Path(args.out) if args.out else root / "bench" / "results", render)
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
