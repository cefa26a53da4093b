"""The "Only memory knows" dashboard, opened by headless Chromium in each state it can be in.

Each page is rendered for one user through the local transport, opened by Debian's `chromium`, and
checked on the DOM Chromium built; screenshots (phone and wide) land in test-artifacts/ for a human.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.browser import Dom, open_page
from tests.conftest import ROOT
from tests.support import activate_pending_probes, add_memories, benchmark_user, extractor, knowledge
from zm_roi import dashboard, tokens
from zm_roi.importer import MemoryLine
from zm_roi.transport import LocalTransport


def render_to_file(transport, tmp_path: Path, name: str) -> str:
    page = tmp_path / f"{name}.html"
    page.write_text(dashboard.render(transport), encoding="utf-8")
    return page.as_uri()


def local(cluster, user) -> LocalTransport:
    return LocalTransport(cluster.url(), cluster.jwt_secret(), user.token)


def percent(rate) -> str:
    return f"{round(float(rate) * 100)}%"


def run_rows(dom: Dom) -> list[dict]:
    return dom.find("tr", **{"class": "run"})


def test_before_the_first_run_the_tile_invites_instead_of_showing_zero(cluster, email, tmp_path):
    with benchmark_user(cluster, email, knowledge(3)) as me:
        dom = open_page(tmp_path, "invite", render_to_file(local(cluster, me), tmp_path, "invite"))
    assert dom.find("section", id="tile")[0]["data-state"] == "invite"
    assert dom.text("tile-title") == "Only memory knows"
    assert dom.text("invite") == "No benchmark yet"
    assert "Ask your agent: run benchmark_memory" in dom.all_text()
    assert not dom.has("rate") and not dom.has("interval") and not dom.has("sparkline")
    assert not re.search(r"\d+\s*%", dom.all_text()), "never a misleading 0%"
    assert run_rows(dom) == []


def test_while_the_first_run_is_judged_the_tile_says_judging(cluster, email, tmp_path):
    db = cluster.url()
    with extractor(db, "llm"), benchmark_user(cluster, email, knowledge(5)) as me:
        transport = local(cluster, me)
        assert transport.benchmark_memory()["status"] == "generating"
        activate_pending_probes(db, me.id)
        assert transport.benchmark_memory()["status"] == "started"
        dom = open_page(tmp_path, "judging", render_to_file(transport, tmp_path, "judging"))
    assert dom.find("section", id="tile")[0]["data-state"] == "judging"
    assert dom.text("judging") == "Judging…"
    assert dom.text("hint") == "Judging 5 questions from your memory…"
    assert not dom.has("rate") and not dom.has("sparkline")
    assert not re.search(r"\d+\s*%", dom.all_text()), "no score before verdicts"
    assert len(run_rows(dom)) == 1 and "judging" in dom.text("runs")
    assert dom.find("meta", **{"http-equiv": "refresh"}), "the page refreshes itself while judging"


def test_one_run_shows_the_rate_large_with_its_interval_and_no_sparkline(cluster, email, tmp_path):
    with (
        extractor(cluster.url(), "deterministic"),
        benchmark_user(cluster, email, knowledge(6)) as me,
        benchmark_user(cluster, "other-" + email, knowledge(4)) as other,
    ):
        for _ in range(2):
            local(cluster, other).benchmark_memory()  # someone else's runs must not show up
        transport = local(cluster, me)
        transport.benchmark_memory()
        tile = transport.tile()
        dom = open_page(tmp_path, "one-run", render_to_file(transport, tmp_path, "one-run"))
    assert dom.find("section", id="tile")[0]["data-state"] == "ready"
    assert dom.text("rate") == percent(tile["exclusive_rate"])
    low, high = (round(float(tile[k]) * 100) for k in ("exclusive_rate_low", "exclusive_rate_high"))
    assert dom.text("interval") == f"95% interval {low}–{high}%"
    assert dom.text("hint") == tile["hint"] == "6 of 6 questions a bare agent could not answer"
    assert not dom.has("sparkline"), "a trend needs two completed runs"
    assert not dom.has("judging")
    assert len(run_rows(dom)) == 1, "only the caller's own run"
    # The run says which recall produced it (embeddings are off in the suite: lexical only).
    assert [cell["title"] for cell in dom.find("td", **{"class": "recall"})] == ["no embeddings: lexical only"]
    assert "public.recall" in dom.all_text()


def test_several_runs_draw_the_trend_and_a_newer_run_shows_judging_beside_the_score(cluster, email, tmp_path):
    db = cluster.url()

    def duplicates(n: int) -> list[MemoryLine]:
        # Identical memories crowd each other out of the top ten, so the rate moves between runs.
        body = "Check the release list before shipping anything."
        return [MemoryLine(title="Release checklist", body=body, kind="convention") for _ in range(n)]

    with extractor(db, "deterministic"), benchmark_user(cluster, email, knowledge(8)) as me:
        transport = local(cluster, me)
        transport.benchmark_memory()
        add_memories(db, email, duplicates(12))
        transport.benchmark_memory()
        add_memories(db, email, duplicates(12))
        transport.benchmark_memory()
        tile = transport.tile()
        several = open_page(tmp_path, "several-runs", render_to_file(transport, tmp_path, "several-runs"))
        with extractor(db, "llm"):
            assert transport.benchmark_memory()["status"] == "started"
            newer = open_page(tmp_path, "judging-after-score", render_to_file(transport, tmp_path, "judging-newer"))

    assert len(tile["trend"]) == 3 and len(set(tile["trend"])) > 1
    assert several.text("rate") == percent(tile["exclusive_rate"]) == percent(tile["trend"][-1])
    svg = several.find("svg")
    assert len(svg) == 1 and svg[0]["aria-label"].endswith(", ".join(percent(r) for r in tile["trend"]))
    points = several.find("polyline")[0]["points"].split()
    assert len(points) == 3
    assert several.text("sparkline").endswith("Trend over 3 completed runs (0–100%)")
    assert len(run_rows(several)) == 3

    assert newer.find("section", id="tile")[0]["data-state"] == "judging"
    assert newer.text("rate") == percent(tile["exclusive_rate"]), "the last score stays while a newer run is judged"
    assert newer.text("judging").startswith("judging… a newer run of")
    assert newer.has("sparkline")
    assert len(run_rows(newer)) == 4


def test_the_served_dashboard_renders_per_request_as_the_token_user(cluster, email, tmp_path):
    with benchmark_user(cluster, email, knowledge(2)) as me:
        token = {"value": me.token}
        server = dashboard.http_server(lambda: LocalTransport(cluster.url(), cluster.jwt_secret(), token["value"]), 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            assert server.server_address[0] == "127.0.0.1"
            dom = open_page(tmp_path, "served", f"{base}/")
            assert dom.text("invite") == "No benchmark yet"
            with pytest.raises(urllib.error.HTTPError) as missing:
                urllib.request.urlopen(f"{base}/elsewhere", timeout=10)  # noqa: S310 (a local test server)
            assert missing.value.code == 404
            token["value"] = tokens.mint(cluster.jwt_secret(), me.id, me.email, ttl=-10)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{base}/", timeout=10)  # noqa: S310
            assert refused.value.code == 503
            assert "the access token has expired" in refused.value.read().decode()
        finally:
            server.shutdown()
            server.server_close()


def test_the_cli_writes_the_page_or_says_in_one_line_why_not(cluster, email, tmp_path):
    env = {**os.environ, "ZM_DB_URL": cluster.url(), "ZM_JWT_SECRET": cluster.jwt_secret()}
    env.pop("SUPABASE_URL", None)
    env.pop("SUPABASE_ANON_KEY", None)
    out = tmp_path / "tile.html"
    with benchmark_user(cluster, email, knowledge(2)) as me:
        wrote = subprocess.run(
            [sys.executable, "-m", "zm_roi.cli", "dashboard", "--out", str(out)],
            capture_output=True,
            text=True,
            env={**env, "ZM_ACCESS_TOKEN": me.token},
            cwd=ROOT,
        )
    assert wrote.returncode == 0, wrote.stderr
    assert 'data-state="invite"' in out.read_text()
    refused = subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", "dashboard", "--out", str(tmp_path / "no.html")],
        capture_output=True,
        text=True,
        env={**env, "ZM_ACCESS_TOKEN": "not-a-token"},
        cwd=ROOT,
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("zm-roi: the access token is not a valid JWT")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "no.html").exists()


class Canned:
    """A transport with fixed answers, for states that are slow or odd to reach through SQL."""

    def __init__(self, tile: dict | None, runs: list[dict]) -> None:
        self._tile, self._runs = tile, runs

    def tile(self) -> dict | None:
        return self._tile

    def runs(self) -> list[dict]:
        return self._runs


def test_a_run_whose_every_question_was_skipped_shows_no_score_rather_than_judging_forever():
    run = {
        "run_id": "r1",
        "started_at": "2026-11-30T10:00:00+00:00",
        "status": "complete",
        "probe_count": 5,
        "judged_count": 0,
        "skipped_count": 5,
        "exclusive_count": 0,
        "exclusive_rate": None,
    }
    tile = {"state": "ready", "exclusive_rate": None, "hint": "Judging 5 questions from your memory…", "trend": []}
    dom = Dom(dashboard.render(Canned(tile, [run])))
    assert dom.text("unscored") == "No score yet"
    assert not dom.has("judging") and not dom.has("rate")
    assert not re.search(r"\d+\s*%", dom.all_text())
    assert "0 of 5 (5 skipped)" in dom.text("runs")
