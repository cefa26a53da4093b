"""The report: bench/results/<date>-<label>.md, and a .json beside it with every raw figure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

# The targets, set for 1M memories on this 2-core machine. `path` finds the figure in one
# size's results; `why` is what the report says when the figure misses. A target with `owners` was set
# for a corpus of that many users: recall on 10,000 users reads layers a tenth the size, so a run with
# another owner count reports it as not comparable rather than met or missed.
TARGETS = (
    {
        "key": "recall_pinned_project",
        "owners": 1_000,
        "what": "pinned recall p50, project + personal",
        "limit_ms": 10,
        "path": ("recall", "pinned_project", "p50"),
        "why": "recall cost grows with the rows of the pinned layer (see *Recall cost by layer size*): under "
        "row-level security no index can serve `search @@ question` (`@@` is not leakproof), so every live "
        "memory of the layer is tested, read from its covering index (an index-only scan). See "
        "docs/decisions/0002-covering-indexes-and-ts-rank.md.",
    },
    {
        "key": "recall_pinned_team",
        "owners": 1_000,
        "what": "pinned recall p50, team + personal",
        "limit_ms": 10,
        "path": ("recall", "pinned_team", "p50"),
        "why": "as for project pins; team layers are the largest (every memory a team shares).",
    },
    {
        "key": "recall_hybrid_project",
        "owners": 1_000,
        "what": "pinned hybrid recall p50, project + personal",
        "limit_ms": 10,
        "path": ("recall", "hybrid", "pinned_project", "p50"),
        "why": "the hybrid is its lexical leg plus an exact cosine distance for every embedded memory of the "
        "layer (1.5 kB vectors from their covering index): about twice the lexical recall.",
    },
    {
        "key": "recall_hybrid_team",
        "owners": 1_000,
        "what": "pinned hybrid recall p50, team + personal",
        "limit_ms": 10,
        "path": ("recall", "hybrid", "pinned_team", "p50"),
        "why": "as for project pins, on the largest layers.",
    },
    {
        "key": "recall_pinned_personal",
        "owners": 1_000,
        "what": "pinned recall p50, personal layer alone",
        "limit_ms": 10,
        "path": ("recall", "pinned_personal", "p50"),
        "why": "as for project pins.",
    },
    {
        "key": "benchmark_rpc",
        "owners": 1_000,
        "what": "benchmark_memory() with 20 probes, p50",
        "limit_ms": 200,
        "path": ("benchmark", "rpc", "p50"),
        "why": "the run is its 20 recalls (see the recall targets) plus under 15% of bookkeeping.",
    },
    {
        "key": "benchmark_overhead",
        "owners": 1_000,
        "what": "benchmark_memory() overhead over its 20 recalls run alone, p50",
        "limit_ratio": 0.15,
        "path": ("benchmark", "overhead_p50"),
        "why": "a run's bookkeeping (snapshots of what surfaced, verdicts, closure, rotation, the top-up of the "
        "rotated probes, the commit) costs about the same at every corpus size, so its share is largest when "
        "recalls are fast: `make bench SIZE=curve` shows it fall as the corpus grows.",
    },
    {
        "key": "upkeep_idle",
        "what": "idle upkeep cycle, p50",
        "limit_ms": 20,
        "path": ("upkeep", "idle", "p50"),
        "why": "",
    },
    {
        "key": "upkeep_refill",
        "owners": 1_000,
        "what": "upkeep cycle topping up 1,000 owners (every pool refilled from empty), p50",
        "limit_ms": 60_000,
        "path": ("upkeep", "refill_all_owners", "p50"),
        "why": "each owner's top-up reads the newest few memories of each of their layers as that owner.",
    },
    {
        "key": "worker_queue_cost",
        "what": "worker queue cost per row (claim + record, zero-latency model)",
        "limit_ms": 3,
        "path": ("worker", "queue_cost_per_row_ms"),
        "why": "two commits per row, each waiting for its WAL flush (the lease must be durable before the model "
        "call); synchronous_commit=off measured 25% faster but would let a crash lose usage events of calls "
        "that happened (docs/decisions/0004-worker-commits-stay-durable.md).",
    },
    {
        "key": "worker_drain_4",
        "what": "4 workers drain 10,000 judgments",
        "limit_ms": 60_000,
        "path": ("worker", "drain_ms", "4"),
        "why": "about 18 ms of CPU per call is litellm building and parsing requests, and two cores saturate "
        "at two processes; with a real model the drain is the model's latency over the workers. Calling "
        "OpenAI-compatible endpoints with the openai client directly would cut the overhead.",
    },
    {
        "key": "upkeep_one_write",
        "owners": 10_000,
        "what": "upkeep cycle after one new memory in one project, 10,000 owners, p50",
        "limit_ms": 50,
        "path": ("upkeep_writes", "one_write", "p50"),
        "why": "the cycle visits the project's members with a pool, and each visit re-checks that owner's pool "
        "as the owner (retire, top up); the cost is members × one owner's care (*upkeep, one owner's empty "
        "pool filled*).",
    },
    {
        "key": "upkeep_one_invalidation",
        "owners": 10_000,
        "what": "upkeep cycle after one invalidation in one project, 10,000 owners, p50",
        "limit_ms": 50,
        "path": ("upkeep_writes", "one_invalidation", "p50"),
        "why": "an invalidation may retire a probe of any member with a pool, so each is visited: members × one "
        "owner's care.",
    },
    {
        "key": "upkeep_spread_writes",
        "owners": 10_000,
        "what": "upkeep cycle after 100 new memories spread over 100 projects, 10,000 owners, p50",
        "limit_ms": 2_000,
        "path": ("upkeep_writes", "spread_writes", "p50"),
        "why": "as for one write, over the members of 100 projects.",
    },
    {
        "key": "upkeep_spread_invalidations",
        "what": "upkeep cycle after 100 invalidations spread over 100 projects, 10,000 owners, p50",
        "owners": 10_000,
        "limit_ms": 2_000,
        "path": ("upkeep_writes", "spread_invalidations", "p50"),
        "why": "every member with a pool of the 100 projects is visited (an invalidation may retire one of "
        "their probes): members × one owner's care.",
    },
    {
        "key": "model_latency_pool",
        "what": "1 s model, one worker: 20-question pool written, from the call that queued it",
        "limit_ms": 6_000,
        "path": ("model_latency", "pool_ms"),
        "why": "the worker's lanes (ZM_WORKER_CONCURRENCY) bound the calls in flight: 20 calls take "
        "ceil(20 / lanes) model round trips.",
    },
    {
        "key": "model_latency_run",
        "what": "1 s model, one worker: 20-probe run judged, from the call that started it",
        "limit_ms": 6_000,
        "path": ("model_latency", "run_ms"),
        "why": "as for the pool.",
    },
    {
        "key": "model_latency_memory",
        "what": "worker peak memory with 8 calls in flight (MB)",
        "limit_mb": 300,
        "path": ("model_latency", "peak_rss_mb"),
        "why": "",
    },
    {
        "key": "worker_peak_memory",
        "what": "worker peak memory (MB)",
        "limit_mb": 250,
        "path": ("worker", "peak_rss_mb"),
        "why": "",
    },
)

SIZE_NAMES = {10_000: "10k", 100_000: "100k", 1_000_000: "1M"}


def size_name(size: int) -> str:
    return SIZE_NAMES.get(size, f"{size:,}")


def _dig(results: dict, path: tuple) -> float | None:
    value = results
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, int | float) else None


def format_ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 10_000:
        return f"{value / 1000:,.1f} s"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def assess(results: dict) -> list[dict]:
    """Each target against one size's results: met, missed, not measured, or not comparable (measured on a
    corpus with another number of users than the target was set for)."""
    verdicts = []
    users = results.get("corpus", {}).get("users")
    for target in TARGETS:
        value = _dig(results, target["path"])
        limit = target.get("limit_ms", target.get("limit_ratio", target.get("limit_mb")))
        if value is None:
            status = "not measured"
        elif target.get("owners", users) != users:
            status = f"not comparable ({users:,} users; set for {target['owners']:,})"
        else:
            status = "met" if value <= limit else "missed"
        verdicts.append(
            {"key": target["key"], "what": target["what"], "limit": limit, "value": value, "status": status}
        )
    return verdicts


def _limit_text(target: dict) -> str:
    if "limit_ratio" in target:
        return f"≤ {target['limit_ratio']:.0%}"
    if "limit_mb" in target:
        return f"≤ {target['limit_mb']} MB"
    limit = target["limit_ms"]
    return f"≤ {limit:,} ms" if limit < 10_000 else f"≤ {limit // 1000:,} s"


def _value_text(target: dict, value: float | None) -> str:
    if value is None:
        return "–"
    if "limit_ratio" in target:
        return f"{value:+.1%}"
    if "limit_mb" in target:
        return f"{value:.0f} MB"
    return f"{format_ms(value)} ms" if value < 10_000 else format_ms(value)  # _ms says "s" itself from 10 s


def _row(cells: list) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(header: list[str], rows: list[list]) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)]


def _series_row(name: str, summary: dict | None, note: str = "") -> list:
    summary = summary or {}
    return [name, summary.get("n", 0), format_ms(summary.get("p50")), format_ms(summary.get("p95")), note]


def _measurement_rows(r: dict) -> list[list]:
    recall = r["recall"]
    bench = r["benchmark"]
    upkeep = r["upkeep"]
    rows = [_series_row("round trip (`select 1`)", r["round_trip"], "the floor of every call below")]
    labels = {
        "pinned_project": "recall, pinned: project + personal",
        "pinned_team": "recall, pinned: team + personal",
        "pinned_personal": "recall, pinned: personal alone",
        "unpinned": "recall, unpinned (everything the user sees)",
    }
    for mode, label in labels.items():
        s = recall[mode]
        rows.append(_series_row(label, s, f"source memory in the top 10: {s['source_in_top_10']} of {s['n']}"))
        h = recall.get("hybrid", {}).get(mode)
        if h and s.get("p50") and h.get("p50"):
            note = f"same samples, random unit vectors; {h['p50'] / s['p50']:.2f}× the lexical p50"
            rows.append(_series_row(f"{label}, hybrid", h, note))
    rows += [
        _series_row(
            "benchmark_memory(), full pool of 20",
            bench["rpc"],
            f"deterministic mode; completes in the call; {bench['probes_per_run']['min']}–"
            f"{bench['probes_per_run']['max']} probes per run",
        ),
        _series_row(
            "the same 20 recalls run alone (sum)", bench["recalls_alone_sum"], "one statement each, as the owner"
        ),
        [
            "→ benchmark_memory() overhead over its recalls",
            len(bench["recalls_alone_sum"].get("samples", [])),
            _pct(bench["overhead_p50"]),
            _pct(bench["overhead_p95"]),
            "per call: rpc ÷ sum of its 20 recalls − 1",
        ],
        _series_row("benchmark_memory(), first call", bench["first_call"], "fills an empty pool of 20, then runs it"),
        _series_row(
            "upkeep, idle cycle", upkeep["idle"], f"{upkeep['pools']['owners']:,} owners with pools; nothing to do"
        ),
        _series_row(
            "upkeep, refill every owner's pool (one cycle)",
            upkeep["refill_all_owners"],
            _cycle_note(upkeep, "refill"),
        ),
        _series_row(
            "upkeep, top up every owner after a rotation (one cycle)",
            upkeep["rotation_all_owners"],
            _cycle_note(upkeep, "rotation"),
        ),
        _series_row(
            "upkeep after a memory changed somewhere (one cycle)",
            upkeep.get("recheck_all_owners"),
            _cycle_note(upkeep, "recheck") + "; every owner marked dirty, the worst case",
        ),
        _series_row("upkeep, one owner's empty pool filled", upkeep["fill_one_owner"], "roi.upkeep_owner(), per owner"),
    ]
    worker = r["worker"]
    if worker["status"] != "measured":
        rows.append(["worker: queue cost, drain with 1/2/4 workers, peak memory", 0, "–", "–", worker["status"]])
        return rows
    rows.append(
        _series_row(
            "worker queue cost per row (claim + usage + verdict, no model)",
            worker["queue_cost"],
            "as roi_worker, one row at a time",
        )
    )
    for count, drained in worker["drains"].items():
        rows.append(
            [
                f"{count} worker process{'es' if count != '1' else ''} draining {drained['judged']:,} judgments",
                1,
                f"{drained['ms']:,.0f}",
                "–",
                f"first to last verdict; zero-latency local endpoint via litellm; peak {drained['peak_rss_mb']} MB; "
                f"{drained['left_in_queue']} left queued{put_off_note(drained['put_off'])}",
            ]
        )
    return rows


def put_off_note(put_off: list[dict]) -> str:
    """What a drain's further rounds took (queue.drain): the judgments a failed attempt put off, by error."""
    if not put_off:
        return ""
    errors: dict[str, int] = {}
    for rows in put_off:
        for error, count in rows["errors"].items():
            errors[error] = errors.get(error, 0) + count
    said = "; ".join(f"{count} × {error[:120]}" for error, count in errors.items())
    return f"; put off by a failed attempt and taken by another round: {said}"


def _upkeep_writes_rows(r: dict) -> list[str]:
    """Issue 13: what a cycle costs after writes, and how many owners it visited against how many it should."""
    writes = r.get("upkeep_writes") or {}
    if writes.get("status") != "measured":
        return []

    def visits(kind: str) -> str:
        cycles = [c for c in writes["cycles"] if c["kind"] == kind]
        return "; ".join(f"{c['owners']:,} visited of {c['expected']:,} expected" for c in cycles[:3])

    rows = [
        _series_row("idle cycle", writes["idle"], f"{writes['idle_owners_visited']} owners visited"),
        _series_row("one new memory in one project, then a cycle", writes["one_write"], visits("one_write")),
        _series_row(
            "one invalidation in one project, then a cycle", writes.get("one_invalidation"), visits("one_invalidation")
        ),
        _series_row(
            f"{writes['spread']} new memories spread over {writes['spread']} projects, then a cycle",
            writes["spread_writes"],
            visits("spread_writes"),
        ),
        _series_row(
            f"{writes['spread']} invalidations spread over {writes['spread']} projects, then a cycle",
            writes.get("spread_invalidations"),
            visits("spread_invalidations"),
        ),
    ]
    return [
        "",
        "### Upkeep after writes",
        "",
        f"{r['corpus']['users']:,} users. Each write is made as a member of the project (role `authenticated`), "
        "so the triggers mark the project as a user's write would. *Expected*: after a new memory, the members "
        "whose pool is not full (a full pool has nothing to take until its next rotation); after an "
        "invalidation, every member with a pool (it may retire one of their probes).",
        "",
        *table(["measurement", "n", "p50 ms", "p95 ms", "owners visited"], rows),
    ]


def _latency_rows(r: dict) -> list[str]:
    """Issue 13: how long a user waits for questions and verdicts with a model that takes seconds."""
    latency = r.get("model_latency") or {}
    if latency.get("status") != "measured":
        return []
    delay = latency["model_delay_s"]
    return [
        "",
        f"### Waiting for a {delay:g} s model",
        "",
        f"One `zm-roi worker` process (ZM_WORKER_CONCURRENCY={latency['concurrency']}), a local "
        f"OpenAI-compatible endpoint that answers each call after {delay:g} s; timed from the "
        "benchmark_memory() call that queued the work until the database shows it done.",
        "",
        *table(
            ["what the user waits for", "seconds", "notes"],
            [
                [
                    "20-question pool written",
                    f"{latency['pool_ms'] / 1000:.1f}",
                    f"first call: {latency['first_call']}",
                ],
                ["20-probe run judged", f"{latency['run_ms'] / 1000:.1f}", f"{latency['run_probes']} probes"],
                [
                    "worker peak memory",
                    "–",
                    f"{latency['peak_rss_mb']:.0f} MB; {latency['model_calls']} model calls; "
                    f"exit code {latency['exit_code']} after SIGTERM",
                ],
            ],
        ),
    ]


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1%}"


def _cycle_note(upkeep: dict, kind: str) -> str:
    cycles = [c for c in upkeep["cycles"] if c["kind"] == kind]
    if not cycles:
        return ""
    c = cycles[-1]
    return f"{c['owners']:,} owners visited, {c['added']:,} probes added, {c['failures']} failures"


def render(run: dict) -> str:
    """The Markdown report of one bench run (one size, or several for the cost curve)."""
    sizes = run["sizes"]
    largest = sizes[-1]
    m = run["machine"]
    out = [
        f"# zm-roi bench: {run['label']} ({run['date']})",
        "",
        f"Produced by `{run['command']}` (seed {run['seed']}), each size on its own throwaway cluster. "
        "Times are milliseconds from the client over local TCP, statement plus result; p50 / p95 over n calls. "
        "How the bench works and what the figures mean: [bench/README.md](../README.md).",
        "",
        "## Machine",
        "",
        *table(
            ["CPU", "cores", "memory", "kernel", "load average (1, 5, 15 min) at start"],
            [
                [
                    m["cpu_model"],
                    m["cores"],
                    f"{m['memory_gb']} GB",
                    m["kernel"],
                    ", ".join(map(str, m["load_average_at_start"])),
                ]
            ],
        ),
        "",
        "Other work shared the machine while this ran (see the load average per size below): absolute "
        "figures are noisy; ratios measured side by side in one run are the figures to compare.",
        "",
        "## PostgreSQL",
        "",
        f"`{largest['server']['version']}`",
        "",
        *table(["setting", "value"], [[k, f"`{v}`"] for k, v in largest["server"]["settings"].items()]),
        "",
        "The embedded cluster's own settings (`zm_roi.localdb`) except `max_wal_size`, `checkpoint_timeout` "
        "(bulk load only) and `track_io_timing` (I/O times in EXPLAIN), which the bench adds.",
        "",
        "## Corpus",
        "",
    ]
    out += _corpus_table(sizes)
    for r in sizes:
        out += [
            "",
            f"## Measurements at {size_name(r['size'])} memories",
            "",
            f"Load average at start of this size: {', '.join(map(str, r['load_average']))}.",
            "",
            *table(["measurement", "n", "p50 ms", "p95 ms", "notes"], _measurement_rows(r)),
            "",
            "### Recall cost by layer size",
            "",
            "Pinned project and team recalls, grouped by the live memories in the pinned layer (the caller's "
            f"personal layer, ~{r['corpus']['personal_memories_per_user']['p50']} memories, comes on top). "
            f"Pinned layers sampled: p50 {r['recall']['pinned_layer_rows']['p50']:,} rows, "
            f"p95 {r['recall']['pinned_layer_rows']['p95']:,}, max {r['recall']['pinned_layer_rows']['max']:,}.",
            "",
            *table(
                ["rows in the pinned layer", "n", "p50 ms", "p95 ms"],
                [
                    [label, s["n"], format_ms(s["p50"]), format_ms(s["p95"])]
                    for label, s in r["recall"]["pinned_by_layer_rows"].items()
                ],
            ),
        ]
        out += _upkeep_writes_rows(r)
        out += _latency_rows(r)
    out += ["", f"## Targets (set for 1M memories; measured at {size_name(largest['size'])})", ""]
    rows = []
    verdicts = assess(largest)
    for target, verdict in zip(TARGETS, verdicts, strict=True):
        rows.append([target["what"], _limit_text(target), _value_text(target, verdict["value"]), verdict["status"]])
    out += table(["target", "limit", "measured", "status"], rows)
    misses = [(t, v) for t, v in zip(TARGETS, verdicts, strict=True) if v["status"] == "missed" and t["why"]]
    if misses:
        out += ["", "Why each miss happens:", ""]
        out += [f"- **{t['what']}**: {t['why']}" for t, _ in misses]
    if any(v["status"] == "not measured" for v in verdicts):
        out += ["", f"Worker figures: {largest['worker']['status']} ({largest['worker']['detail']})."]
    if len(sizes) > 1:
        out += ["", "## Cost curve (p50 ms)", ""]
        curve = [
            ("recall, pinned project", ("recall", "pinned_project", "p50")),
            ("recall, pinned team", ("recall", "pinned_team", "p50")),
            ("recall, pinned personal", ("recall", "pinned_personal", "p50")),
            ("recall, unpinned", ("recall", "unpinned", "p50")),
            ("benchmark_memory(), 20 probes", ("benchmark", "rpc", "p50")),
            ("the same 20 recalls alone (sum)", ("benchmark", "recalls_alone_sum", "p50")),
            ("upkeep, idle", ("upkeep", "idle", "p50")),
            ("upkeep, refill 1,000 owners", ("upkeep", "refill_all_owners", "p50")),
            ("upkeep, re-check every owner", ("upkeep", "recheck_all_owners", "p50")),
            ("upkeep after one write", ("upkeep_writes", "one_write", "p50")),
            ("upkeep after 100 spread writes", ("upkeep_writes", "spread_writes", "p50")),
            ("upkeep, one owner's pool", ("upkeep", "fill_one_owner", "p50")),
        ]
        out += table(
            ["measurement", *(size_name(r["size"]) for r in sizes)],
            [[label, *(format_ms(_dig(r, path)) for r in sizes)] for label, path in curve]
            + [["benchmark_memory() overhead", *(_pct(r["benchmark"]["overhead_p50"]) for r in sizes)]],
        )
    explain = largest.get("explain") or {}
    out += [
        "",
        f"## EXPLAIN (ANALYZE, BUFFERS) of recall at {size_name(largest['size'])}",
        "",
        "What recall() runs inside, captured with auto_explain (nested statements) as the user, RLS applied, "
        "after one warm-up call with the same arguments.",
    ]
    for label, plan in explain.items():
        out += ["", f"### {label.replace('_', ' ')}", "", "```", plan.strip(), "```"]
    return "\n".join(out) + "\n"


def _corpus_table(sizes: list[dict]) -> list[str]:
    def row(label: str, get) -> list:
        return [label, *(get(r["corpus"]) for r in sizes)]

    def mix(d: dict) -> str:
        total = sum(d.values())
        return ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))

    rows = [
        row("memories", lambda c: f"{c['memories']:,}"),
        row("users / teams / projects", lambda c: f"{c['users']:,} / {c['teams']} / {c['projects']}"),
        row(
            "memberships (team / project)",
            lambda c: f"{c['team_memberships']:,} / {c['project_memberships']:,}",
        ),
        row(
            "per user: teams / projects",
            lambda c: f"{c['teams_per_user']} / {c['projects_per_user']}",
        ),
        row("members per project", lambda c: c["members_per_project"]),
        row("scopes", lambda c: mix(c["by_scope"])),
        row("kinds", lambda c: mix(c["by_kind"])),
        row("invalidated", lambda c: f"{c['invalidated'] / c['memories']:.1%}"),
        row("title words (avg)", lambda c: c["title_words_avg"]),
        row(
            "body characters (min / avg / max)",
            lambda c: f"{c['body_chars']['min']} / {c['body_chars']['avg']} / {c['body_chars']['max']}",
        ),
        row(
            "memories per project (p50 / p95 / max)",
            lambda c: "{p50:,} / {p95:,} / {max:,}".format(**c["memories_per_project"]),
        ),
        row("memories per team (p50 / max)", lambda c: "{p50:,} / {max:,}".format(**c["memories_per_team"])),
        row(
            "personal memories per user (p50 / max)",
            lambda c: "{p50:,} / {max:,}".format(**c["personal_memories_per_user"]),
        ),
        row("vocabulary (Zipf, s = 1)", lambda c: f"{c['vocabulary']:,} words"),
        row("table / all indexes", lambda c: f"{c['table_size']} / {c['indexes_size']}"),
    ]
    rows.append(
        ["build (s): population, memories, indexes, analyze"]
        + [", ".join(f"{v}" for v in r["build_seconds"].values()) for r in sizes]
    )
    return table(["", *(size_name(r["size"]) for r in sizes)], rows)


def machine_line(machine: dict) -> str:
    """The one line a report gives its machine (zm_roi_bench.cluster.machine's figures)."""
    return (
        f"Machine: {machine['cpu_model']}, {machine['cores']} cores, {machine['memory_gb']} GB, load at start "
        f"{machine['load_average_at_start']}."
    )


def write(run: dict, out_dir: Path, render_as: Callable[[dict], str] | None = None) -> tuple[Path, Path]:
    """Write <date>-<label>.md (rendered by `render_as`, this module's `render` unless told) and .json
    into `out_dir`; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{run['date']}-{run['label']}"
    md = out_dir / f"{stem}.md"
    raw = out_dir / f"{stem}.json"
    md.write_text((render_as or render)(run))
    raw.write_text(json.dumps(run, indent=2, default=str) + "\n")
    return md, raw


def publish(run: dict, out_dir: Path, render_as: Callable[[dict], str]) -> int:
    """A lab's report written (`write`) and printed, with where it went; the exit status of its main."""
    md, _ = write(run, out_dir, render_as)
    print(render_as(run))
    print(f"report: {md}")
    return 0
