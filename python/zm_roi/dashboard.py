"""`zm-roi dashboard`: the "Only memory knows" tile as a self-contained HTML page.

The page is rendered from the public views (tile, runs, breakdown), read through the transport as the user named by the
access token, so it can only ever show that user's aggregates. No external assets: styles and the
sparkline are inline, and the page's content security policy forbids loading anything else.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jinja2

from zm_roi import diagnostics
from zm_roi.diagnostics import percent
from zm_roi.errors import UserError, database_errors
from zm_roi.transport import Transport

RECENT_RUNS = 10
SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD = 240, 56, 5


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("zm_roi", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def when(stamp: str | None, style: str = "%-d %b %Y, %H:%M UTC") -> str:
    """PostgREST's ISO timestamps, shown in UTC so every reader sees the same time."""
    if not stamp:
        return ""
    return datetime.fromisoformat(stamp).astimezone(UTC).strftime(style)


def judge_changes(runs: list[dict], trend: list) -> list[bool]:
    """For each trend point (completed runs with a judged question, oldest first, as the tile's trend),
    whether the judge changed against the run before it; none marked when the two lists do not line up."""
    scored = [r for r in reversed(runs) if r.get("status") == "complete" and (r.get("judged_count") or 0) > 0]
    if len(scored) != len(trend or []):
        return []
    return [bool(r.get("judge_changed")) for r in scored]


def sparkline(trend: list, changed: list[bool] | None = None) -> dict | None:
    """SVG geometry for the trend on a fixed 0–100% scale (a zoomed scale would dramatise noise). A point
    whose run was judged by a different judge than the run before is marked: the line there joins two
    scores that were not measured the same way."""
    rates = [float(rate) for rate in trend or [] if rate is not None]
    if len(rates) < 2:
        return None
    inner_w, inner_h = SPARK_WIDTH - 2 * SPARK_PAD, SPARK_HEIGHT - 2 * SPARK_PAD
    points = [
        (SPARK_PAD + inner_w * i / (len(rates) - 1), SPARK_PAD + inner_h * (1 - rate)) for i, rate in enumerate(rates)
    ]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    bottom = SPARK_HEIGHT - SPARK_PAD
    area = f"M{points[0][0]:.1f},{bottom} L" + " L".join(f"{x:.1f},{y:.1f}" for x, y in points)
    area += f" L{points[-1][0]:.1f},{bottom} Z"
    marks = [point for point, mark in zip(points, changed or [], strict=False) if mark]
    flags = changed or [False] * len(rates)
    label = "Exclusive rate of completed runs, oldest first: " + ", ".join(
        diagnostics.percent_text(rate) + (" (judge changed)" if flag else "")
        for rate, flag in zip(rates, flags, strict=False)
    )
    return {
        "width": SPARK_WIDTH,
        "height": SPARK_HEIGHT,
        "line": line,
        "area": area,
        "last": points[-1],
        "count": len(rates),
        "judge_marks": marks,
        "label": label,
    }


def explained(run: dict | None, breakdown: list[dict]) -> dict | None:
    """The diagnostics of the scored run, worded (see zm_roi.diagnostics), for the card under the tile."""
    if run is None:
        return None
    return {
        "started": when(run["started_at"], "%-d %b, %H:%M UTC"),
        "retrieval": diagnostics.retrieval_line(run),
        "agreement": diagnostics.agreement_line(run),
        "paired": diagnostics.paired_line(run),
        "judge": diagnostics.judge_line(run),
        "cost": diagnostics.cost_line(run),
        "closed_book": diagnostics.closed_book_line(run),
        "groups": diagnostics.breakdown_groups(breakdown, run["run_id"]),
    }


def view_model(tile: dict | None, runs: list[dict], breakdown: list[dict] | None = None) -> dict:
    """Everything the template shows, already formatted; no logic left for the template but layout."""
    if tile is None:
        # The view has a row for every signed-in caller; none means the API hid it (not our words to invent).
        raise UserError("the tile view returned no row for this token: is public.roi_benchmark_tile exposed?")
    rate = percent(tile.get("exclusive_rate"))
    scored = diagnostics.scored_run(tile, runs)
    return {
        "state": tile["state"],
        "has_score": rate is not None,
        "rate": rate,
        "low": percent(tile.get("exclusive_rate_low")),
        "high": percent(tile.get("exclusive_rate_high")),
        "hint": tile.get("hint") or "",
        "headline": tile.get("headline"),
        "explanation": tile.get("explanation"),
        "note": tile.get("note"),
        "caveat": tile.get("caveat"),
        "judge_note": tile.get("judge_note"),
        # Raw beside corrected (LLM mode): what the judge said, and that with its measured error taken out.
        "corrected": diagnostics.corrected_rate(scored) if rate is not None else None,
        # The view's own sentence once enough knowledge changed since the latest run; absent before.
        "rerun_hint": tile.get("rerun_hint"),
        "exclusive_count": tile.get("exclusive_count"),
        "judged_count": tile.get("judged_count"),
        "judging": tile["state"] == "judging",
        "latest_run_at": when(tile.get("latest_run_at")),
        "sparkline": sparkline(tile.get("trend") or [], judge_changes(runs, tile.get("trend") or [])),
        "runs": [
            {
                "started": when(run["started_at"]),
                "started_short": when(run["started_at"], "%-d %b, %H:%M"),
                "status": run["status"],
                "probes": run["probe_count"],
                "judged": run["judged_count"],
                "skipped": run["skipped_count"],
                "exclusive": run["exclusive_count"],
                "rate": percent(run.get("exclusive_rate")),
                # Which recall produced the run (the embedding model in the tooltip), in parts a narrow
                # card may break after (dots, underscores).
                "recall_parts": re.findall(r"[^._]+[._]?", (run.get("recall_function") or "").split("(")[0]),
                "embedding_model": " + ".join(
                    model for model in (run.get("embedding_model"), run.get("embedding_minilm_model")) if model
                )
                or "no embeddings: lexical only",
            }
            for run in runs[:RECENT_RUNS]
        ],
        "more_runs": max(0, len(runs) - RECENT_RUNS),
        "diagnostics": explained(scored, breakdown or []),
        "rendered_at": datetime.now(UTC).strftime("%-d %b %Y, %H:%M UTC"),
    }


def render(transport: Transport, tile: dict | None = None) -> str:
    """The page for the transport's user (`tile`: their tile row, when already read)."""
    tile = transport.tile() if tile is None else tile
    page = view_model(tile, transport.runs(), transport.breakdown())
    return _environment().get_template("dashboard.html.j2").render(**page)


# The longest a served page is kept while the tile stays the same: the runs list and diagnostics can
# change without the tile (a check's verdict, a cost), and show within this.
PAGE_MAX_AGE_SECONDS = 30.0


class PageCache:
    """The served page, rendered again only when the user's tile changes (a new run, a verdict, a
    status) or after PAGE_MAX_AGE_SECONDS. Each request still reads the tile as the token's user, so
    the token is verified every time and one user's page never answers another's token."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._page = ""
        self._at = 0.0
        self.renders = 0

    def page(self, transport: Transport) -> str:
        tile = transport.tile()
        key = (getattr(transport, "token", None), json.dumps(tile, sort_keys=True, default=str))
        with self._lock:
            if key == self._key and time.monotonic() - self._at < PAGE_MAX_AGE_SECONDS:
                return self._page
        page = render(transport, tile)
        with self._lock:
            self._key, self._page, self._at = key, page, time.monotonic()
            self.renders += 1
        return page


def write_page(path: Path, page: str) -> None:
    """Write the page to `path` and nowhere else: into a new file beside it, then renamed over it, so a
    symlink at `path` is replaced rather than followed out of the folder the user named, and a reader
    never sees half a page. The one writer of a page (`zm-roi dashboard --out`, the demo)."""
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(page)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def render_error(message: str) -> str:
    return _environment().get_template("dashboard_error.html.j2").render(message=message)


def http_server(make_transport: Callable[[], Transport], port: int) -> ThreadingHTTPServer:
    """A server on 127.0.0.1 that serves the page as the token's user, rendered again when their tile
    changes (port 0: any free port). `server.pages.renders` counts the renders."""
    pages = PageCache()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?")[0] not in ("/", "/index.html"):
                self._send(HTTPStatus.NOT_FOUND, render_error("There is nothing here: the tile is at /."))
                return
            try:
                with database_errors():
                    page = pages.page(make_transport())
            except UserError as exc:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, render_error(str(exc)))
                return
            self._send(HTTPStatus.OK, page)

        def _send(self, status: HTTPStatus, page: str) -> None:
            body = page.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's signature)
            pass

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise UserError(f"cannot serve on 127.0.0.1:{port} ({exc.strerror}): pick another port") from None
    server.pages = pages
    return server


def serve(make_transport: Callable[[], Transport], port: int) -> None:
    server = http_server(make_transport, port)
    print(f"serving the dashboard on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
