"""The worker-peak bench's summary and report, on the peaks of a real run (bench/results)."""

from __future__ import annotations

from zm_roi_bench import worker_peak

PEAKS = {"base": [340.8, 339.9, 340.0, 340.3], "head": [326.3, 326.8, 326.6, 326.7]}


def test_the_summary_is_each_arms_median_and_range_and_the_difference_of_the_medians():
    summary = worker_peak.summarise(PEAKS)
    # Medians by hand: (340.0 + 340.3) / 2 and (326.6 + 326.7) / 2.
    assert summary["base"] == {"median": 340.15, "min": 339.9, "max": 340.8}
    assert summary["head"] == {"median": 326.65, "min": 326.3, "max": 326.8}
    assert summary["head_minus_base_mb"] == -13.5
    # (326.7 + 326.9) / 2 is 326.79999999999995 in binary floats; the report printed that once.
    assert worker_peak.summarise({"base": [326.5, 326.7, 326.9, 327.0], "head": [300.0]})["base"]["median"] == 326.8


def test_the_report_gives_each_arms_peaks_in_order_and_the_difference():
    results = {
        "date": "2026-12-07",
        "machine": {"cpu_model": "cpu", "cores": 2, "memory_gb": 24.0, "load_average_at_start": [1.5, 1, 1]},
        "checkouts": {"base": "6ab0461", "head": "1a2b3c4"},
        "peaks_mb": PEAKS,
        "summary": worker_peak.summarise(PEAKS),
    }
    report = worker_peak.render(results)
    assert "| base | `6ab0461` | 340.8, 339.9, 340.0, 340.3 | 340.15 | 339.9–340.8 |" in report
    assert "| head | `1a2b3c4` | 326.3, 326.8, 326.6, 326.7 | 326.65 | 326.3–326.8 |" in report
    assert "**-13.5 MB**" in report
    assert "Machine: cpu, 2 cores, 24.0 GB, load at start [1.5, 1, 1]." in report
