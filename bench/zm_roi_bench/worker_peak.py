"""python -m zm_roi_bench.worker_peak BASE [HEAD] — the real worker's peak memory, two checkouts side by
side (issue 44: a worker of at most 300 MB with 8 calls in flight).

One throwaway cluster. Each round runs latency.py's measurement once per checkout, the arms' order
alternating round by round: a `zm-roi worker` process with its `PYTHONPATH` at that checkout's `python/`
folder, 8 lanes, an OpenAI-compatible endpoint on 127.0.0.1 answering each call after 1 s, a new owner
whose 20 questions are written and then judged (40 model calls, both offline models embedding each
question). The figure is the worker's VmHWM, sampled while it works: memory, not time, so other load on
the machine does not move it. HEAD defaults to this checkout. Writes a markdown report and its json.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
from pathlib import Path

from zm_roi.localdb import project_root
from zm_roi_bench import latency, report
from zm_roi_bench.cluster import machine, throwaway_cluster


def run(root: Path, checkouts: dict[str, Path], rounds: int, say) -> dict:
    """Each arm's peaks, in rounds whose order alternates."""
    peaks: dict[str, list[float]] = {arm: [] for arm in checkouts}
    runs = []
    before = os.environ.get("PYTHONPATH")
    try:
        with throwaway_cluster(root, say=say) as cluster:
            for n in range(rounds):
                for arm in list(checkouts) if n % 2 == 0 else list(checkouts)[::-1]:
                    os.environ["PYTHONPATH"] = str(checkouts[arm] / "python")
                    measured = latency.measure(cluster.url(), say=lambda text: None)
                    if measured["exit_code"] != 0 or measured["run_probes"] != latency.POOL:
                        raise SystemExit(f"{arm}: the worker did not finish its run cleanly: {measured}")
                    peaks[arm].append(measured["peak_rss_mb"])
                    runs.append({"round": n + 1, "arm": arm, **measured})
                    say(f"round {n + 1}, {arm}: {measured['peak_rss_mb']} MB")
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
    return {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "checkouts": {arm: commit_of(path) for arm, path in checkouts.items()},
        "peaks_mb": peaks,
        "summary": summarise(peaks),
        "runs": runs,
    }


def commit_of(checkout: Path) -> str:
    """The checkout's commit, and whether its tracked files differ from it."""
    git = ["git", "-C", str(checkout)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return f"{commit or checkout}{' with uncommitted changes' if changed else ''}"


def summarise(peaks: dict[str, list[float]]) -> dict:
    """Each arm's median, lowest and highest peak, and the head's median less the base's."""
    summary = {
        arm: {"median": round(statistics.median(v), 2), "min": min(v), "max": max(v)} for arm, v in peaks.items()
    }
    summary["head_minus_base_mb"] = round(summary["head"]["median"] - summary["base"]["median"], 1)
    return summary


def render(results: dict) -> str:
    s = results["summary"]
    lines = [
        f"# The worker's peak memory, two checkouts side by side ({results['date']})",
        "",
        "`python -m zm_roi_bench.worker_peak`: the real `zm-roi worker`, 8 lanes, a 1 s model: 20 questions "
        "written and embedded, then judged. VmHWM in MB.",
        "",
        report.machine_line(results["machine"]),
        "",
        "| arm | commit | peaks, round by round | median | min–max |",
        "| --- | --- | --- | --- | --- |",
    ]
    for arm, peaks in results["peaks_mb"].items():
        row = s[arm]
        lines.append(
            f"| {arm} | `{results['checkouts'][arm]}` | {', '.join(map(str, peaks))} | {row['median']} "
            f"| {row['min']}–{row['max']} |"
        )
    lines += ["", f"Head less base, medians: **{s['head_minus_base_mb']:+} MB**.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.worker_peak", description=__doc__)
    parser.add_argument("base", help="the checkout measured against (a git worktree of the base commit)")
    parser.add_argument("head", nargs="?", default=str(root))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default=str(root / "bench" / "results"))
    args = parser.parse_args(argv)
    checkouts = {"base": Path(args.base).resolve(), "head": Path(args.head).resolve()}
    for arm, path in checkouts.items():
        if not (path / "python" / "zm_roi" / "worker.py").is_file():
            print(f"{arm}: {path} is not a zm-roi checkout (no python/zm_roi/worker.py)")
            return 2
    results = run(root, checkouts, args.rounds, lambda text: print(text, flush=True))
    results["label"] = "worker-peak"
    return report.publish(results, Path(args.out), render)


if __name__ == "__main__":
    raise SystemExit(main())
