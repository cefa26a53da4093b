"""python -m zm_roi_bench --size 100k|10k|1m|curve|layers|anchor|fast-recall [--owners N] [--seed N] [--base COMMIT]
[--out DIR]: what `make bench` runs."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from zm_roi.errors import UserError
from zm_roi.localdb import project_root
from zm_roi_bench import (
    CURVE,
    DEFAULT_SEED,
    SIZES,
    anchor,
    compare,
    fast_recall,
    layers,
    layers_compare,
    report,
    run,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench", description=__doc__)
    parser.add_argument(
        "--size",
        default="100k",
        help="10k, 100k (default), 1m, curve (10k, 100k and 1m in one report), layers (pinned recall on real "
        "text against the layer's size: 1k, 10k and 100k rows), or anchor (side by side with Supabase's documented "
        "hybrid search at 10k and 100k rows, a report each; anchor-10k or anchor-100k for one), or fast-recall (a "
        "100k-row import on the user's path followed to fast recall, with pg_cron's builds)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="corpus seed (default %(default)s)")
    parser.add_argument(
        "--owners", type=int, default=None, help="users in the corpus (default 1,000), e.g. 10000 for upkeep at scale"
    )
    parser.add_argument(
        "--base",
        default=None,
        help="a commit (e.g. 46284ba) to measure side by side with this checkout, interleaved, in one report "
        "(one size: 10k, 100k or 1m; or layers)",
    )
    parser.add_argument(
        "--head-first",
        action="store_true",
        help="with --base: build this checkout's cluster first (the base's is built first by default; the cluster "
        "built second has measured faster at 1M, so compare a run in each order)",
    )
    parser.add_argument("--out", default=None, help="report folder (default: bench/results in the checkout)")
    parser.add_argument(
        "--adr-corpus",
        default=None,
        help="with layers or anchor: the public ADR corpus (default ../shared/eval/public-adr-corpus.jsonl beside the "
        "checkout; a worktree names it)",
    )
    args = parser.parse_args(argv)
    label = args.size.lower()
    if label == "layers":
        return _layers(args)
    if label in anchor.SIZES and args.base is not None:
        print(
            "zm-roi bench: the anchor is measured against Supabase's hybrid search, not a commit: drop BASE",
            file=sys.stderr,
        )
        return 2
    if label == fast_recall.LABEL:
        return _fast_recall(args)
    if label in anchor.SIZES:
        return _anchor(args, anchor.SIZES[label])
    if label == "curve":
        sizes = list(CURVE)
    elif label in SIZES:
        sizes = [SIZES[label]]
    else:
        print(
            f"zm-roi bench: unknown size {args.size!r}: use 10k, 100k, 1m, curve, layers, anchor or fast-recall",
            file=sys.stderr,
        )
        return 2
    if args.base is not None and len(sizes) != 1:
        print("zm-roi bench: --base compares one size: use 10k, 100k or 1m", file=sys.stderr)
        return 2
    if args.owners is not None and not 1 <= args.owners <= 1_000_000:
        print(f"zm-roi bench: --owners must be from 1 to 1,000,000, not {args.owners}", file=sys.stderr)
        return 2
    if args.owners is not None:
        label += f"-{args.owners}-owners"  # its own report: another corpus shape, other targets
    started = time.monotonic()
    try:
        root = project_root()
        out = root / "bench" / "results" if args.out is None else Path(args.out)
        command = (
            f"make bench SIZE={args.size.lower()}"
            + (f" OWNERS={args.owners}" if args.owners else "")
            + (f" SEED={args.seed}" if args.seed != DEFAULT_SEED else "")
            + (f" BASE={args.base}" if args.base else "")
            + (" HEAD_FIRST=1" if args.head_first else "")
        )
        say = lambda text: print(text, flush=True)  # noqa: E731
        if args.base is None:
            md, raw = run(root, sizes, label, out, seed=args.seed, command=command, say=say, owners=args.owners)
        else:
            md, raw = compare.run(
                root,
                sizes[0],
                f"{label}-vs-{args.base}" + ("-head-first" if args.head_first else ""),
                args.base,
                out,
                seed=args.seed,
                command=command,
                say=say,
                owners=args.owners,
                head_first=args.head_first,
            )
    except UserError as exc:
        print(f"zm-roi bench: {exc}", file=sys.stderr)
        return 2
    print(f"report: {md}\nraw figures: {raw}\ntook {time.monotonic() - started:.0f} s")
    return 0


def _paths(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """The checkout, the report folder and the public ADR corpus the real-text benches read."""
    root = project_root()
    out = root / "bench" / "results" if args.out is None else Path(args.out)
    return root, out, Path(args.adr_corpus or root.parent / "shared" / "eval" / "public-adr-corpus.jsonl")


def _layers(args: argparse.Namespace) -> int:
    root, out, adr_corpus = _paths(args)
    say = lambda text: print(text, flush=True)  # noqa: E731
    if args.base is not None:
        try:
            results = layers_compare.run(root, adr_corpus, args.base, seed=args.seed, say=say)
        except UserError as exc:
            print(f"zm-roi bench: {exc}", file=sys.stderr)
            return 2
        md, raw = layers_compare.write(results, out)
        print(layers_compare.render(results))
        print(f"report: {md}\nraw figures: {raw}\ntook {results['seconds']:.0f} s")
        return 0
    figures = layers.run(root, adr_corpus, seed=args.seed, say=say)
    md, raw = layers.write(figures, out, "make bench SIZE=layers")
    print(layers.render(figures))
    print(f"report: {md}\nraw figures: {raw}\ntook {figures['seconds']:.0f} s")
    return 0


def _anchor(args: argparse.Namespace, sizes: tuple[int, ...]) -> int:
    root, out, adr_corpus = _paths(args)
    say = lambda text: print(text, flush=True)  # noqa: E731
    for size in sizes:
        try:
            results = anchor.run(root, adr_corpus, size, seed=args.seed, say=say)
        except UserError as exc:
            print(f"zm-roi bench: {exc}", file=sys.stderr)
            return 2
        md, raw = report.write(results, out, render_as=anchor.render)
        print(anchor.render(results))
        print(f"report: {md}\nraw figures: {raw}\ntook {results['seconds']:.0f} s")
    return 0


def _fast_recall(args: argparse.Namespace) -> int:
    if args.base is not None or args.owners is not None:
        print("zm-roi bench: fast-recall follows one import of this checkout: drop BASE and OWNERS", file=sys.stderr)
        return 2
    _, out, adr_corpus = _paths(args)
    try:
        figures = fast_recall.run(adr_corpus, args.seed, say=lambda text: print(text, flush=True))
    except UserError as exc:
        print(f"zm-roi bench: {exc}", file=sys.stderr)
        return 2
    md, raw = report.write(figures, out, render_as=fast_recall.render)
    print(fast_recall.render(figures))
    print(f"report: {md}\nraw figures: {raw}\ntook {figures['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
