"""`make bench BASE=…`'s pure logic: the verdict on each figure, the round order, one round's share of
the calls, the pooling of rounds, and the verbs and files read from a checkout of any layout (the bench's
queries in their own file, or prefixed `bench_` in queries.sql before the one work queue)."""

from __future__ import annotations

from zm_roi.errors import UserError
from zm_roi_bench import __main__ as bench_main
from zm_roi_bench import compare, report
from zm_roi_bench.build_time import render
from zm_roi_bench.measure import HYBRID_MODES, RECALL_MODES, Plan
from zm_roi_bench.sql import Checkout


def test_head_slower_by_more_than_five_percent_is_flagged_and_five_exactly_is_not():
    assert compare.verdict(10.0, 10.5) == (1.05, "ok (+5.0%)")
    ratio, said = compare.verdict(10.0, 10.6)
    assert round(ratio, 3) == 1.06 and said == "**worse by more than 5%** (+6.0%)"
    assert compare.verdict(10.0, 8.0) == (0.8, "ok (-20.0%)")


def test_a_figure_missing_on_either_side_is_not_compared():
    assert compare.verdict(None, 3.0) == (None, "not compared")
    assert compare.verdict(3.0, None) == (None, "not compared")
    assert compare.verdict(0.0, 3.0) == (None, "not compared")


def test_each_side_goes_first_in_every_other_round():
    orders = [compare.side_order(r) for r in range(4)]
    assert orders == [("base", "head"), ("head", "base"), ("base", "head"), ("head", "base")]


def test_a_round_queues_whole_runs_of_judgments_and_the_rounds_add_up():
    one = compare.round_plan(Plan())
    assert (one.recall_calls, one.rounds, one.queue_rows) == (20, 1, 100)
    assert one.recall_calls * compare.ROUNDS == Plan().recall_calls
    assert one.queue_rows * compare.ROUNDS == Plan().queue_rows
    assert compare.round_plan(Plan(queue_rows=40)).queue_rows == 20  # never a partial run of 20
    assert compare.round_plan(Plan(recall_calls=6)).recall_calls == 1  # a tiny plan still recalls


def _round(recall_ms: float, rpc_ms: float, queue_ms: float) -> dict:
    series = {"samples": [recall_ms]}
    return {
        "recall": {mode: series for mode in RECALL_MODES} | {"hybrid": {mode: series for mode in HYBRID_MODES}},
        "benchmark": {"rpc": {"samples": [rpc_ms]}, "recalls_alone_sum": {"samples": [rpc_ms]}},
        "queue_cost": {"samples": [queue_ms, queue_ms]},
    }


def test_the_rounds_are_pooled_sample_by_sample():
    rounds = [_round(1.0, 50.0, 2.0), _round(3.0, 70.0, 4.0), _round(2.0, 60.0, 3.0)]
    side = compare.pool_side(rounds, drains={})
    assert side["recall"]["pinned_team"]["n"] == 3 and side["recall"]["pinned_team"]["p50"] == 2.0
    assert side["benchmark"]["rpc"]["samples"] == [50.0, 70.0, 60.0]
    assert side["queue_cost"]["n"] == 6 and side["queue_cost"]["p50"] == 3.0


def test_every_figure_is_compared_and_only_the_slower_one_flagged():
    drains = {str(n): {"ms": 1000.0} for n in (1, 2, 4)}
    base = compare.pool_side([_round(2.0, 60.0, 1.0)], drains)
    head = compare.pool_side([_round(2.0, 60.0, 1.2)], drains | {"4": {"ms": 900.0}})
    rows = {row["what"]: row for row in compare.compare(base, head)}
    assert list(rows) == [what for what, _ in compare.FIGURES]
    flagged = [what for what, row in rows.items() if row["verdict"].startswith("**worse")]
    assert flagged == ["worker queue cost per row, p50"]
    assert rows["4 workers draining the judgments"]["ratio"] == 0.9
    assert rows["worker queue cost per row, p50"]["n"] == 2


def _drain(
    ms: float, judged: int = 10_000, left: int = 0, codes: tuple = (0, 0), rss: float = 200.0, put_off: tuple = ()
) -> dict:
    return {
        "workers": 2,
        "ms": ms,
        "judged": judged,
        "left_in_queue": left,
        "put_off": list(put_off),
        "exit_codes": list(codes),
        "peak_rss_mb": rss,
    }


def test_a_sides_repeated_drains_count_as_their_median_and_keep_every_run():
    timeout = {"rows": 2, "errors": {"Timeout": 2}}
    pooled = compare.pool_drains(
        [_drain(1400.0, judged=9_990, left=10, codes=(0, 1), rss=210.0), _drain(1000.0, put_off=(timeout,))]
    )
    assert pooled == {
        "workers": 2,
        "n": 2,
        "ms": 1200.0,  # the median of two is their mean, not the faster one
        "samples": [1400.0, 1000.0],
        "judged": 9_990,
        "left_in_queue": 10,
        "put_off": [timeout],
        "exit_codes": [0, 1, 0, 0],
        "peak_rss_mb": 210.0,
    }
    assert compare.pool_drains([_drain(900.0), _drain(5000.0), _drain(1000.0)])["ms"] == 1000.0


def test_the_drains_figure_says_how_many_drains_it_pools():
    drains = {str(n): compare.pool_drains([_drain(1000.0)] * compare.DRAIN_REPEATS) for n in (1, 2, 4)}
    side = compare.pool_side([_round(2.0, 60.0, 1.0)], drains)
    rows = {row["what"]: row for row in compare.compare(side, side)}
    assert rows["1 worker draining the judgments"]["n"] == compare.DRAIN_REPEATS == 2


def _checkout(tmp_path, product: str, bench: str | None) -> Checkout:
    package = tmp_path / "python" / "zm_roi"
    (package / "bench").mkdir(parents=True)
    (package / "queries.sql").write_text(product)
    if bench is not None:
        (package / "bench" / "queries.sql").write_text(bench)
    return Checkout(tmp_path)


def test_a_checkout_before_issue_19_is_called_through_its_own_verbs(tmp_path):
    old = _checkout(
        tmp_path,
        "-- name: claim_judgment\nselect * from roi.claim_judgment();\n"
        "-- name: bench_seed_judgments\ninsert into roi.judgments default values;\n",
        bench=None,
    )
    assert old.claim_judgment == "select * from roi.claim_judgment();"
    assert old.bench_query("seed_judgments") == "insert into roi.judgments default values;"
    assert old.python_path == str(tmp_path / "python")


def test_a_checkout_with_one_work_queue_claims_work(tmp_path):
    new = _checkout(
        tmp_path,
        "-- name: claim_work\nselect * from roi.claim_work();\n",
        bench="-- name: seed_judgments\ninsert into roi.work default values;\n",
    )
    assert new.claim_judgment == "select * from roi.claim_work();"
    assert new.bench_query("seed_judgments") == "insert into roi.work default values;"


def test_a_checkout_finds_its_bench_queries_and_compat_layer_where_its_commit_kept_them(tmp_path):
    """BASE= may name a commit from before the harness left the package (its queries under
    python/zm_roi/bench/, its compat layer in sql/) or one after (bench/zm_roi_bench/, supabase/compat/)."""
    before, after = tmp_path / "before", tmp_path / "after"
    for root, queries, compat in (
        (before, "python/zm_roi/bench/queries.sql", "sql/supabase_compat.sql"),
        (after, "bench/zm_roi_bench/queries.sql", "supabase/compat/supabase_compat.sql"),
    ):
        for path, text in ((queries, f"-- name: where\nselect '{root.name}';\n"), (compat, "select 1;\n")):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
    assert Checkout(before).bench_query("where") == "select 'before';"
    assert Checkout(before).compat_layer == before / "sql" / "supabase_compat.sql"
    assert Checkout(after).bench_query("where") == "select 'after';"
    assert Checkout(after).compat_layer == after / "supabase" / "compat" / "supabase_compat.sql"


def test_the_build_time_report_states_each_side_and_their_ratio_at_p50():
    side = {"commit": "a" * 40, "migrations": 53, "seconds": [6.0, 8.0, 7.0], "p50_s": 7.0}
    results = {
        "rounds": 3,
        "base": side,
        "head": {**side, "commit": "b" * 40, "migrations": 15, "seconds": [3.5, 3.4, 3.6], "p50_s": 3.5},
        "machine": {"cpu_model": "cpu", "cores": 2, "memory_gb": 23.5, "load_average_at_start": [1.0, 1.0, 1.0]},
    }
    report = render(results)
    assert "| base | aaaaaaaaaaaa | 53 | 7.0 | 6.0, 8.0, 7.0 |" in report
    assert "| head | bbbbbbbbbbbb | 15 | 3.5 | 3.5, 3.4, 3.6 |" in report
    assert "**0.50×**" in report


def test_a_drains_put_off_judgments_are_said_with_their_errors_summed_over_rounds():
    rounds = [{"rows": 3, "errors": {"Timeout": 2, "503": 1}}, {"rows": 1, "errors": {"Timeout": 1}}]
    assert (
        report.put_off_note(rounds) == "; put off by a failed attempt and taken by another round: 3 × Timeout; 1 × 503"
    )
    assert report.put_off_note([]) == ""


def test_head_first_builds_the_heads_cluster_first_and_says_so(monkeypatch, tmp_path):
    called = {}

    def fake_run(root, size, label, base_rev, out_dir, **kwargs):
        called.update(label=label, base=base_rev, **kwargs)
        raise UserError("stopped before any cluster")

    monkeypatch.setattr(compare, "run", fake_run)
    assert bench_main.main(["--size", "1m", "--base", "abc1234", "--head-first", "--out", str(tmp_path)]) == 2
    assert called["label"] == "1m-vs-abc1234-head-first" and called["head_first"] is True
    assert called["command"] == "make bench SIZE=1m BASE=abc1234 HEAD_FIRST=1"
    assert bench_main.main(["--size", "1m", "--base", "abc1234", "--out", str(tmp_path)]) == 2
    assert called["label"] == "1m-vs-abc1234" and called["head_first"] is False


PLAN = """Query Text: select m.id from public.memories m
Limit  (cost=1.00..2.00 rows=10 width=16) (actual time=0.100..0.200 rows=10 loops=1)
  Buffers: shared hit=40 read=2
  ->  Index Scan using memories_project_live_idx on memories m  (cost=0.42..8.44 rows=1 width=16)
        Filter: (kind = 'decision'::text)
"""


def test_two_plans_are_the_same_plan_when_only_their_costs_times_and_counts_differ():
    faster = PLAN.replace("0.100..0.200", "0.050..0.090").replace("hit=40 read=2", "hit=42")
    assert compare.plan_shape(PLAN) == ["Limit", "Index Scan using memories_project_live_idx on memories m"]
    assert compare.plan_shape(faster) == compare.plan_shape(PLAN)
    assert compare.plan_shape(PLAN.replace("Index Scan", "Seq Scan")) != compare.plan_shape(PLAN)


def _conditions(read: int, hit: int, read_ms: int, checkpoints: int, autovacuums: int, workers: int, cached: int):
    return {
        "blks_read": read,
        "blks_hit": hit,
        "blk_read_ms": read_ms,
        "checkpoints": checkpoints,
        "autovacuum_runs": autovacuums,
        "autovacuum_workers": workers,
        "page_cache": {"cached_bytes": cached, "bytes": 1000},
    }


def test_the_report_gives_what_else_each_server_did_while_measured_and_whether_the_plans_agree():
    base = {
        "conditions": {
            "before": _conditions(10, 100, 5, 1, 7, 1, 500),
            "after": _conditions(2010, 9100, 905, 2, 9, 0, 990),
        },
        "recall_plans": {"pinned_project": PLAN, "unpinned": PLAN},
    }
    head = {
        "conditions": {"before": _conditions(0, 0, 0, 0, 0, 0, 1000), "after": _conditions(30, 9000, 1, 0, 0, 0, 1000)},
        "recall_plans": {"pinned_project": PLAN, "unpinned": PLAN.replace("Index Scan", "Seq Scan")},
    }
    rows = compare._conditions_rows(base, head)
    assert rows[0][1:] == ["50% / 99%", "100% / 100%"]
    assert rows[1][1:] == ["2,000 (900) / 9,000", "30 (1) / 9,000"]
    assert rows[2][1:] == ["1 / 2 / 1", "0 / 0 / 0"]
    assert rows[3][1:] == ["2 / 2", "same / **differs**"]
