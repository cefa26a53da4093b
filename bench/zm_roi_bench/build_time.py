"""python -m zm_roi_bench.build_time --base COMMIT [--rounds N]: how long a new database takes to build
from this checkout's migrations and from COMMIT's, side by side, interleaved round by round (the
machine's noise falls on both). Every test session, demo and bench builds one; the report is
bench/results/<date>-build-time-vs-<commit>.md (+ .json)."""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from pathlib import Path

from zm_roi import localdb
from zm_roi.errors import UserError
from zm_roi_bench import report
from zm_roi_bench.cluster import machine
from zm_roi_bench.compare import _git, base_checkout, side_order
from zm_roi_bench.sql import Checkout


def build_seconds(root: Path) -> float:
    """Seconds to build a migrated database in a new cluster of `root` (initdb and start not counted)."""
    home = Path(tempfile.mkdtemp(prefix="zm-roi-bench-build-"))
    home.chmod(0o755)
    cluster = localdb.Cluster(home=home, port=localdb.free_port())
    try:
        cluster.create()
        cluster.start()
        started = time.perf_counter()
        localdb.prepare_database(cluster, root, compat=Checkout(root).compat_layer)
        return time.perf_counter() - started
    finally:
        cluster.destroy()


def migration_files(root: Path) -> int:
    return len(list((root / "supabase" / "migrations").glob("*.sql")))


def render(results: dict) -> str:
    rows = [
        f"| {side} | {results[side]['commit'][:12]} | {results[side]['migrations']} | "
        f"{results[side]['p50_s']:.1f} | {', '.join(f'{s:.1f}' for s in results[side]['seconds'])} |"
        for side in ("base", "head")
    ]
    ratio = results["head"]["p50_s"] / results["base"]["p50_s"]
    return "\n".join(
        [
            f"# Building a new database: this checkout against {results['base']['commit'][:12]}",
            "",
            f"{results['rounds']} rounds, interleaved (each round builds both, in alternating order): compat layer, "
            "then `supabase db push` of the migrations, then the local logins; initdb and start not counted.",
            "",
            "| side | commit | migration files | p50 seconds | each round |",
            "| --- | --- | --- | --- | --- |",
            *rows,
            "",
            f"Head / base at p50: **{ratio:.2f}×**.",
            "",
            report.machine_line(results["machine"]),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.build_time", description=__doc__)
    parser.add_argument("--base", required=True, help="the commit to compare with, e.g. the last before a squash")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default=None, help="report folder (default: bench/results in the checkout)")
    args = parser.parse_args(argv)
    root = localdb.project_root()
    try:
        with base_checkout(root, args.base) as (sha, base):
            roots = {"base": base.root, "head": root}
            seconds: dict[str, list[float]] = {"base": [], "head": []}
            for round_no in range(args.rounds):
                for side in side_order(round_no):
                    seconds[side].append(build_seconds(roots[side]))
                    print(f"round {round_no + 1}: {side} {seconds[side][-1]:.1f} s", flush=True)
            results = {"rounds": args.rounds, "machine": machine()}
            for side, commit in (("base", sha), ("head", _git(root, "rev-parse", "HEAD"))):
                results[side] = {
                    "commit": commit,
                    "migrations": migration_files(roots[side]),
                    "seconds": seconds[side],
                    "p50_s": statistics.median(seconds[side]),
                }
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    results.update(date=datetime.date.today().isoformat(), label=f"build-time-vs-{sha[:7]}")
    report.write(results, Path(args.out) if args.out else root / "bench" / "results", render)
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
