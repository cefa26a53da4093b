"""The statement profile of benchmark_memory() (bench/zm_roi_bench/statements.py): per-call figures and
the split into recalls and bookkeeping, against values worked by hand."""

from zm_roi_bench.statements import render, summarize


def _statements():
    return [
        {"query": "select public.benchmark_memory()", "calls": 4, "rows": 4, "total_ms": 400.0},
        {
            "query": "select r.memory_id from public.recall(question, pin_project)\n  with ordinality",
            "calls": 80,
            "rows": 800,
            "total_ms": 280.0,
        },
        {"query": "with doomed as (select p.id | x)", "calls": 4, "rows": 0, "total_ms": 20.0},
    ]


def test_a_call_splits_into_its_recalls_and_the_bookkeeping_around_them():
    results = summarize(_statements(), [90.0, 110.0, 100.0, 120.0])
    assert results["calls"] == 4
    assert results["client_p50_ms"] == 105.0
    assert results["benchmark_memory_ms"] == 100.0  # 400 ms over 4 calls
    assert results["recalls_ms"] == 70.0  # 280 ms over 4 calls: 20 recalls of 3.5 ms each
    assert results["bookkeeping_ms"] == 30.0
    recall = results["statements"][1]
    assert (recall["ms_per_call"], recall["executions_per_call"], recall["ms_each"]) == (70.0, 20.0, 3.5)
    assert recall["query"] == "select r.memory_id from public.recall(question, pin_project) with ordinality"


def test_the_recalls_time_comes_from_the_function_statistics_when_tracked():
    results = summarize(_statements(), [100.0] * 4, recall_total_ms=240.0)
    assert results["recalls_ms"] == 60.0  # public.recall's own 240 ms over 4 calls, not the statement's 280
    assert results["bookkeeping_ms"] == 40.0


def test_the_report_states_the_split_and_escapes_pipes_in_statements():
    results = summarize(_statements(), [100.0] * 4)
    results.update(
        size=100_000,
        command="python -m zm_roi_bench.statements --size 100k --rounds 1",
        machine={"cpu_model": "cpu", "cores": 2, "memory_gb": 23.5, "load_average_at_start": [0.1, 0.1, 0.1]},
    )
    report = render(results)
    assert "100,000 memories" in report
    assert "the 20 recalls 70.0 ms and the run's bookkeeping 30.0 ms" in report
    assert "| 5.0 | 1.0 | 5.0 | `with doomed as (select p.id \\| x)` |" in report
