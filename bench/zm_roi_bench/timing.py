"""Timings as samples in milliseconds, summarised as p50 / p95 over n calls."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile: the smallest sample with at least q of the samples at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Series:
    """The samples of one measurement, in milliseconds."""

    samples: list[float] = field(default_factory=list)

    def add(self, ms: float) -> None:
        self.samples.append(ms)

    def summary(self, raw: bool = True) -> dict:
        """n, p50, p95, mean, min, max (ms), and the raw samples unless `raw` is false."""
        if not self.samples:
            return {"n": 0, "p50": None, "p95": None, "mean": None, "min": None, "max": None, "samples": []}
        return {
            "n": len(self.samples),
            "p50": round(percentile(self.samples, 0.50), 3),
            "p95": round(percentile(self.samples, 0.95), 3),
            "mean": round(sum(self.samples) / len(self.samples), 3),
            "min": round(min(self.samples), 3),
            "max": round(max(self.samples), 3),
        } | ({"samples": [round(x, 3) for x in self.samples]} if raw else {})


def timed(action: Callable[[], T]) -> tuple[float, T]:
    """Run `action`; return (milliseconds, its result)."""
    started = time.perf_counter()
    result = action()
    return (time.perf_counter() - started) * 1000, result
