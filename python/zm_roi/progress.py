"""Progress of a long command (import, embed) on stderr: rows done, rate and time left.

On a terminal one line is redrawn in place (at most ten times a second). Anywhere else (a pipe, a log
file, a script) there is no carriage return: a plain line every `LOG_EVERY` seconds, so a short run
prints nothing and a long one leaves a readable log. `quiet` prints nothing at all. The summary of
what a command did goes to stdout, from the command itself."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

REDRAW_EVERY = 0.1
LOG_EVERY = 30.0
BAR = 24


def duration(seconds: float) -> str:
    """`42 s`, `3 min 5 s`, `1 h 2 min`: what a person reads at a glance."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


class Progress:
    """One phase (`label`) of `total` rows; call `advance(n)` as rows are done and `close()` at the end."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "rows",
    ) -> None:
        self.label, self.total, self.done, self.unit = label, total, 0, unit
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet
        self.live = not quiet and self.stream.isatty()
        self.clock = clock
        self.started = self.shown = clock()
        self.drawn = False
        if self.live and total:
            self._draw()  # at once: the first batch of a slow model may take seconds

    def line(self) -> str:
        elapsed = self.clock() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        share = self.done / self.total if self.total else 1.0
        filled = round(BAR * share)
        left = f"{duration((self.total - self.done) / rate)} left" if rate > 0 else "time left unknown"
        return (
            f"{self.label} [{'#' * filled}{'.' * (BAR - filled)}] {self.done:,}/{self.total:,} {self.unit}"
            f"  {rate:,.1f}/s  {left}"
        )

    def advance(self, count: int) -> None:
        self.done += count
        if self.quiet:
            return
        now = self.clock()
        if self.live and (now - self.shown >= REDRAW_EVERY or self.done >= self.total):
            self._draw()
        elif not self.live and now - self.shown >= LOG_EVERY:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        else:
            return
        self.shown = now

    def _draw(self) -> None:
        # Clear to the end of the line: the new text may be shorter than the old.
        self.stream.write(f"\r{self.line()}\x1b[K")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the redrawn line, so what is printed next starts on a line of its own."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
