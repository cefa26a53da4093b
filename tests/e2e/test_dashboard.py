"""The "Only memory knows" dashboard, opened by headless Chromium in each state it can be in.

Each page is rendered for one user through the local transport, opened by Debian's `chromium`, and
checked on the DOM Chromium built; screenshots (phone and wide) land in test-artifacts/ for a human.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.browser import ARTIFACTS, Dom, chromium, open_page
from tests.conftest import ROOT
from tests.support import activate_pending_probes, add_memories, benchmark_user, extractor, knowledge, pool_target
from zm_roi import dashboard, demo, diagnostics, localdb, mcp_server, tokens
from zm_roi.importer import MemoryLine
from zm_roi.transport import LocalTransport


def render_to_file(transport, tmp_path: Path, name: str) -> str:
    page = tmp_path / f"{name}.html"
    page.write_text(dashboard.render(transport), encoding="utf-8")
    return page.as_uri()


def tall_shots(tmp_path: Path, name: str, url: str) -> None:
    """Phone and wide screenshots tall enough to hold the diagnostics card under the tile."""
    for label, size in (("phone", "390,1900"), ("wide", "1280,1150")):
        shot = ARTIFACTS / f"dashboard-{name}-{label}-tall.png"
        shot.unlink(missing_ok=True)
        chromium(tmp_path, f"--window-size={size}", f"--screenshot={shot}", url)
        assert shot.stat().st_size > 5_000, f"{shot} looks blank"


def local(cluster, user) -> LocalTransport:
    return LocalTransport(cluster.url(), cluster.jwt_secret(), user.token)


def percent(rate) -> str:
    return f"{round(float(rate) * 100)}%"


def run_rows(dom: Dom) -> list[dict]:
    return dom.find("tr", **{"class": "run"})


def test_before_the_first_run_the_tile_invites_instead_of_showing_zero(cluster, email, tmp_path):
    """Every word comes from the view: before, the page wrote its own invite and "about 20 questions"
    whatever roi.settings.pool_target said (pool target 7 here)."""
    with pool_target(cluster.url(), 7), benchmark_user(cluster, email, knowledge(3)) as me:
        tile = local(cluster, me).tile()
        dom = open_page(tmp_path, "invite", render_to_file(local(cluster, me), tmp_path, "invite"))
    assert dom.find("section", id="tile")[0]["data-state"] == "invite"
    assert dom.text("tile-title") == "Only memory knows"
    assert dom.text("headline") == tile["headline"] == "No benchmark yet"
    assert (
        dom.text("hint")
        == tile["hint"]
        == ("Ask your agent to run benchmark_memory to see what only your memory knows.")
    )
    assert tile["explanation"].startswith("It asks about 7 questions drawn from your own decisions")
    assert tile["explanation"] in dom.all_text()
    assert not dom.has("rate") and not dom.has("interval") and not dom.has("sparkline")
    assert not re.search(r"\d+\s*%", dom.all_text()), "never a misleading 0%"
    assert run_rows(dom) == []
    assert not dom.has("diagnostics"), "nothing to explain before a score"


def test_while_the_first_run_is_judged_the_tile_says_judging(cluster, email, tmp_path):
    db = cluster.url()
    with extractor(db, "llm"), benchmark_user(cluster, email, knowledge(5)) as me:
        transport = local(cluster, me)
        assert transport.benchmark_memory()["status"] == "generating"
        activate_pending_probes(db, me.id)
        assert transport.benchmark_memory()["status"] == "started"
        dom = open_page(tmp_path, "judging", render_to_file(transport, tmp_path, "judging"))
    assert dom.find("section", id="tile")[0]["data-state"] == "judging"
    assert dom.text("headline") == "Judging…"
    assert dom.text("hint") == "Judging 5 questions from your memory…"
    assert not dom.has("rate") and not dom.has("sparkline")
    assert not re.search(r"\d+\s*%", dom.all_text()), "no score before verdicts"
    assert len(run_rows(dom)) == 1 and "judging" in dom.text("runs")
    assert dom.find("meta", **{"http-equiv": "refresh"}), "the page refreshes itself while judging"
    assert not dom.has("diagnostics")


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
        [run] = transport.runs()
        url = render_to_file(transport, tmp_path, "one-run")
        dom = open_page(tmp_path, "one-run", url)
        tall_shots(tmp_path, "one-run", url)
    assert dom.find("section", id="tile")[0]["data-state"] == "ready"
    assert dom.text("rate") == percent(tile["exclusive_rate"])
    low, high = (round(float(tile[k]) * 100) for k in ("exclusive_rate_low", "exclusive_rate_high"))
    assert dom.text("interval") == f"95% interval {low}–{high}%"
    assert dom.text("hint") == tile["hint"] == f"{tile['exclusive_count']} of 6 questions only memory answered"
    assert not dom.has("sparkline"), "a trend needs two completed runs"
    assert not dom.has("note") and not dom.has("headline")
    assert dom.text("caveat") == tile["caveat"] and "upper bound" in tile["caveat"], "deterministic: what it bounds"
    assert len(run_rows(dom)) == 1, "only the caller's own run"
    # What explains it: retrieval, the breakdown, no paired comparison yet, no cost, no spot-check.
    surfaced = run["source_surfaced_count"]
    assert dom.text("retrieval").startswith(f"Search surfaced the source memory for {surfaced} of 6 judged questions")
    assert dom.text("paired") == "First completed run: nothing to compare with yet."
    assert dom.text("cost") == "No model calls: deterministic runs cost nothing."
    assert not dom.has("agreement") and not dom.has("closed-book"), "deterministic: the judge is the search check"
    for dimension in ("kind", "scope"):
        figures = re.findall(r"(\d+) of (\d+)", dom.text(f"breakdown-{dimension}"))
        assert sum(int(judged) for _, judged in figures) == 6
        assert sum(int(exclusive) for exclusive, _ in figures) == tile["exclusive_count"]
    assert [a["data-value"] for a in dom.find("div", **{"class": "bar-row"})][:3] == [
        "decision",
        "gotcha",
        "convention",
    ]
    # The run says which recall produced it (embeddings are off in the suite: lexical only).
    assert [cell["title"] for cell in dom.find("td", **{"class": "recall wide"})] == ["no embeddings: lexical only"]
    assert "public.recall" in dom.all_text()


def test_several_runs_draw_the_trend_and_a_newer_run_shows_judging_beside_the_score(cluster, email, tmp_path):
    db = cluster.url()

    def duplicates(n: int) -> list[MemoryLine]:
        # Near-identical memories crowd each other out of the top ten, so the rate moves between runs
        # (identical ones would be skipped as duplicates).
        body = "Check the release list before shipping anything."
        return [
            MemoryLine(title="Release checklist", body=f"{body} ({uuid.uuid4().hex[:6]})", kind="convention")
            for _ in range(n)
        ]

    with extractor(db, "deterministic"), benchmark_user(cluster, email, knowledge(8)) as me:
        transport = local(cluster, me)
        transport.benchmark_memory()
        add_memories(db, email, duplicates(12))
        transport.benchmark_memory()
        add_memories(db, email, duplicates(12))
        transport.benchmark_memory()
        tile = transport.tile()
        runs = transport.runs()
        url = render_to_file(transport, tmp_path, "several-runs")
        several = open_page(tmp_path, "several-runs", url)
        tall_shots(tmp_path, "several-runs", url)
        with extractor(db, "llm"):
            # LLM mode first writes real questions in place of the template ones (the worker's job, by hand).
            assert transport.benchmark_memory()["status"] == "generating"
            activate_pending_probes(db, me.id)
            newer_run = transport.benchmark_memory()
            assert newer_run["status"] == "started"
            newer = open_page(tmp_path, "judging-after-score", render_to_file(transport, tmp_path, "judging-newer"))

    assert len(tile["trend"]) == 3 and len(set(tile["trend"])) > 1
    assert several.text("rate") == percent(tile["exclusive_rate"]) == percent(tile["trend"][-1])
    svg = several.find("svg")
    assert len(svg) == 1 and svg[0]["aria-label"].endswith(", ".join(percent(r) for r in tile["trend"]))
    points = several.find("polyline")[0]["points"].split()
    assert len(points) == 3
    assert several.text("sparkline").endswith("Trend over 3 completed runs (0–100%)")
    assert len(run_rows(several)) == 3
    # Each run is paired with the one before it, on the questions both judged.
    assert runs[0]["previous_run_id"] == runs[1]["run_id"] and runs[0]["paired_count"] > 0
    assert several.text("paired") == diagnostics.paired_line(runs[0])
    assert runs[0]["regressed_count"] > 0, "the look-alikes crowded some sources out"
    assert re.fullmatch(
        r"\+\d+ / −\d+ against the previous run on \d+ shared questions, p [=<] [\d.]+.*\.", several.text("paired")
    )

    assert newer.find("section", id="tile")[0]["data-state"] == "judging"
    assert newer.text("rate") == percent(tile["exclusive_rate"]), "the last score stays while a newer run is judged"
    assert newer.text("note") == f"A newer run of {newer_run['probes']} questions is being judged."
    assert newer.has("sparkline")
    assert len(run_rows(newer)) == 4
    assert newer.text("paired") == several.text("paired"), "the diagnostics explain the scored run, not the newer one"


def test_the_served_dashboard_renders_per_request_as_the_token_user(cluster, email, tmp_path):
    with benchmark_user(cluster, email, knowledge(2)) as me:
        token = {"value": me.token}
        server = dashboard.http_server(lambda: LocalTransport(cluster.url(), cluster.jwt_secret(), token["value"]), 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            assert server.server_address[0] == "127.0.0.1"
            dom = open_page(tmp_path, "served", f"{base}/")
            assert dom.text("headline") == "No benchmark yet"
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


def skip_every_question_of_the_open_run(db_url: str, user_id) -> None:
    """What the worker does when the judge fails for every question: skipped verdicts, then the run closes."""
    with psycopg.connect(db_url) as conn:
        run_id = conn.execute(
            """insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
               select j.run_id, j.probe_id, j.owner_id, p.memory_id, true, 'judge_failed', 'llm'
               from roi.work j join roi.probes p on p.id = j.probe_id where j.kind = 'judge' and j.owner_id = %s
               returning run_id""",
            (user_id,),
        ).fetchone()[0]
        assert conn.execute("select roi.close_run_if_done(%s)", (run_id,)).fetchone()[0]


class Canned:
    """A transport with fixed answers, for states that are slow or odd to reach through SQL."""

    def __init__(self, tile: dict | None, runs: list[dict], breakdown: list[dict] | None = None) -> None:
        self._tile, self._runs, self._breakdown = tile, runs, breakdown or []

    def tile(self) -> dict | None:
        return self._tile

    def runs(self) -> list[dict]:
        return self._runs

    def breakdown(self) -> list[dict]:
        return self._breakdown


def test_a_run_whose_every_question_was_skipped_shows_no_score_rather_than_judging_forever(cluster, email, tmp_path):
    # Before the fix the view said state 'ready' with "Judging 5 questions…" for this run, forever.
    db = cluster.url()
    with extractor(db, "llm"), benchmark_user(cluster, email, knowledge(5)) as me:
        transport = local(cluster, me)
        assert transport.benchmark_memory()["status"] == "generating"
        activate_pending_probes(db, me.id)
        assert transport.benchmark_memory()["status"] == "started"
        skip_every_question_of_the_open_run(db, me.id)
        tile = transport.tile()
        dom = open_page(tmp_path, "no-score", render_to_file(transport, tmp_path, "no-score"))
    assert tile["state"] == "no_score"
    assert dom.find("section", id="tile")[0]["data-state"] == "no_score"
    assert dom.text("headline") == tile["headline"] == "No score yet"
    assert dom.text("hint") == tile["hint"], "the page says what the view says"
    assert "Judging" not in dom.all_text() and "run benchmark_memory again" in tile["hint"]
    assert not dom.has("note") and not dom.has("rate") and not dom.has("caveat")
    assert not dom.find("meta", **{"http-equiv": "refresh"}), "nothing is being judged: no refresh loop"
    assert not re.search(r"\d+\s*%", dom.all_text())
    assert "0 of 5 (5 skipped)" in dom.text("runs")
    assert mcp_server.tile_sentence(tile) == tile["hint"], "the MCP reply says what the view says"
    assert demo.describe_tile(tile) == ["  state: no_score", f"  {tile['hint']}"]


def llm_run(**changes) -> dict:
    """A completed LLM-mode run as the runs view returns it, diagnostics included."""
    run = {
        "run_id": "r2",
        "started_at": "2026-11-30T10:00:00+00:00",
        "status": "complete",
        "mode": "llm",
        "probe_count": 20,
        "judged_count": 20,
        "skipped_count": 0,
        "exclusive_count": 7,
        "exclusive_rate": 0.35,
        "source_surfaced_count": 17,
        "source_mrr": 0.6125,
        "source_median_rank": 2,
        "retrieval_agreement_count": 18,
        "previous_run_id": "r1",
        "paired_count": 17,
        "improved_count": 3,
        "regressed_count": 1,
        "paired_p_value": 0.625,
        "input_tokens": 36000,
        "output_tokens": 2400,
        "cost_usd": 0.00684,
        "own_key_calls": 0,
        "closed_book_checked": 5,
        "closed_book_correct": 1,
        "closed_book_agreement_count": 4,
    }
    return {**run, **changes}


BREAKDOWN = [
    {"run_id": "r2", "dimension": d, "value": v, "judged_count": j, "exclusive_count": e, "exclusive_rate": e / j}
    for d, v, j, e in [
        ("kind", "decision", 9, 5),
        ("kind", "gotcha", 6, 1),
        ("kind", "convention", 5, 1),
        ("scope", "personal", 4, 0),
        ("scope", "project", 12, 6),
        ("scope", "team", 4, 1),
    ]
]
READY = {
    "state": "ready",
    "exclusive_rate": 0.35,
    "exclusive_rate_low": 0.18,
    "exclusive_rate_high": 0.57,
    "exclusive_count": 7,
    "judged_count": 20,
    "hint": "7 of 20 questions only memory answered",
    "trend": [0.3, 0.35],
    "scored_run_id": "r2",
    "explanation": "The share of questions from your own memory that memory answered and a bare agent could not.",
}


def test_an_llm_run_explains_itself_with_agreement_paired_change_cost_and_the_spot_check(tmp_path):
    page = tmp_path / "llm.html"
    page.write_text(dashboard.render(Canned(READY, [llm_run()], BREAKDOWN)), encoding="utf-8")
    dom = open_page(tmp_path, "diagnostics-llm", page.as_uri())
    tall_shots(tmp_path, "diagnostics-llm", page.as_uri())
    assert dom.text("retrieval") == "Search surfaced the source memory for 17 of 20 judged questions, median rank 2."
    assert dom.text("agreement").startswith("The judge and search agreed on 18 of 20;")
    assert dom.text("paired") == (
        "+3 / −1 against the previous run on 17 shared questions, p = 0.63 (could be chance); it compares raw "
        "verdicts, not the judge-corrected rate."
    )
    assert dom.text("cost") == "Cost $0.006840 (36,000 + 2,400 tokens)."
    assert dom.text("closed-book") == (
        "Closed-book spot-check: with no memory the model answered 1 of 5 questions correctly; "
        "the judge's “answerable without memory” agreed on 4 of 5."
    )
    assert "9 of 9" not in dom.text("breakdown") and "5 of 9" in dom.text("breakdown-kind")
    assert "6 of 12" in dom.text("breakdown-scope")
    fills = [a["style"] for a in dom.find("span", **{"class": "fill"})]
    assert fills[:3] == ["width: 56%", "width: 17%", "width: 20%"]


def test_an_unpriced_run_on_the_owners_key_with_no_shared_questions(tmp_path):
    run = llm_run(
        cost_usd=None,
        own_key_calls=40,
        paired_count=0,
        improved_count=0,
        regressed_count=0,
        paired_p_value=None,
        closed_book_checked=0,
        source_surfaced_count=0,
        source_median_rank=None,
    )
    page = tmp_path / "unpriced.html"
    page.write_text(dashboard.render(Canned(READY, [run], BREAKDOWN)), encoding="utf-8")
    dom = open_page(tmp_path, "diagnostics-own-key", page.as_uri())
    tall_shots(tmp_path, "diagnostics-own-key", page.as_uri())
    assert dom.text("retrieval") == "Search surfaced the source memory for none of the 20 judged questions."
    assert dom.text("paired") == "No question in common with the previous run, so no paired comparison."
    assert dom.text("cost") == "36,000 + 2,400 tokens, no price known for the model; 40 calls on your own provider key."
    assert not dom.has("closed-book"), "the spot-check shows only when it ran"


def test_a_changed_judge_is_not_compared_and_the_trend_marks_the_point(tmp_path):
    judge = "openai/gpt-4o#judge.j2@0123456789ab"
    older = llm_run(run_id="r1", started_at="2026-11-29T10:00:00+00:00", previous_run_id=None, judge_changed=False)
    run = llm_run(judge_fingerprint=judge, judge_changed=True, paired_p_value=None, questions_regenerated=2,
                  template_questions=1)  # fmt: skip
    page = tmp_path / "judge-changed.html"
    page.write_text(dashboard.render(Canned(READY, [run, older], BREAKDOWN)), encoding="utf-8")
    dom = open_page(tmp_path, "diagnostics-judge-changed", page.as_uri())
    tall_shots(tmp_path, "diagnostics-judge-changed", page.as_uri())
    assert dom.text("paired") == "Not comparable with the previous run: the judge changed."
    assert "p =" not in dom.text("diagnostics")
    assert dom.text("judge") == (
        f"Judged by {judge}; questions: 2 rewritten after the gate refused them, 1 from templates; "
        "the judge changed since the previous run."
    )
    marks = dom.find("line", **{"class": "judge-changed"})
    assert len(marks) == 1, "the second trend point, where the judge changed, is marked"
    assert "35% (judge changed)" in dom.find("svg")[0]["aria-label"]


JUDGE = "openai/gpt-4o#judge.j2@0123456789ab"


@pytest.mark.parametrize(
    ("state", "checks", "said"),
    [
        (
            "both",
            {"withheld_checked": 3, "withheld_answered_count": 1, "order_checked": 3, "order_agreement_count": 3},
            "judge checks: said answerable without its source for 1 of 3; same verdict in reverse order for 3 of 3; ",
        ),
        (
            "order-only",
            {"withheld_checked": 0, "withheld_answered_count": 0, "order_checked": 2, "order_agreement_count": 1},
            "judge checks: same verdict in reverse order for 1 of 2; ",
        ),
        ("none", {"withheld_checked": 0, "order_checked": 0}, ""),
    ],
)
def test_the_judge_line_says_what_the_checks_of_the_judge_found(tmp_path, state, checks, said):
    run = llm_run(judge_fingerprint=JUDGE, judge_changed=False, questions_regenerated=2, template_questions=0, **checks)
    page = tmp_path / f"judge-checks-{state}.html"
    page.write_text(dashboard.render(Canned(READY, [run], BREAKDOWN)), encoding="utf-8")
    dom = open_page(tmp_path, f"diagnostics-judge-checks-{state}", page.as_uri())
    tall_shots(tmp_path, f"diagnostics-judge-checks-{state}", page.as_uri())
    assert dom.text("judge") == (
        f"Judged by {JUDGE}; {said}questions: 2 rewritten after the gate refused them, 0 from templates."
    )


def test_the_same_judge_draws_no_mark_and_keeps_the_p_value(tmp_path):
    run = llm_run(judge_fingerprint="openai/gpt-4o#judge.j2@0123456789ab", judge_changed=False)
    older = llm_run(run_id="r1", started_at="2026-11-29T10:00:00+00:00", judge_changed=False)
    model = dashboard.view_model(READY, [run, older], BREAKDOWN)
    assert model["sparkline"]["judge_marks"] == []
    assert "p = 0.63 (could be chance); it compares raw verdicts" in model["diagnostics"]["paired"]
    assert model["diagnostics"]["judge"].startswith(
        "Judged by openai/gpt-4o#judge.j2@0123456789ab; questions: 0 rewritten"
    )


LAYOUT_PROBE = """<pre id="layout"></pre><script>
const wrap = document.querySelector(".table-wrap");
const shown = [...document.querySelectorAll("#runs th")].filter(th => getComputedStyle(th).display !== "none");
document.getElementById("layout").textContent = JSON.stringify({
  overflow: wrap.scrollWidth - wrap.clientWidth,
  columns: shown.map(th => th.textContent.trim()),
});
</script></body>"""


def layout_at(tmp_path: Path, page: str, width: int) -> dict:
    """How Chromium lays the runs table out at `width` px: overflow (px hidden behind a scrollbar) and the
    columns shown. The probe is a script, so it runs on a copy of the page without its CSP."""
    probed = tmp_path / f"layout-{width}.html"
    probed.write_text(
        re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page).replace("</body>", LAYOUT_PROBE)
    )
    dom = Dom(chromium(tmp_path, f"--window-size={width},900", "--dump-dom", probed.as_uri()).stdout)
    return json.loads(dom.text("layout"))


@pytest.mark.parametrize("width", [1200, 1000, 900, 400])
def test_the_runs_table_fits_its_card_and_keeps_the_judged_column(tmp_path, width):
    """Before: at 1,200 px the Recall column sat behind a scrollbar; at 400 px the Judged column was
    hidden, so an all-skipped run read only "complete —"."""
    skipped = llm_run(
        run_id="r3",
        started_at="2026-12-01T10:32:00+00:00",
        judged_count=0,
        skipped_count=20,
        exclusive_count=0,
        exclusive_rate=None,
        recall_function="public.recall_lexical(text,uuid,uuid,integer,boolean)",
    )
    hybrid = llm_run(recall_function="public.recall(text,uuid,uuid,integer,boolean,extensions.vector)", skipped_count=3)
    page = dashboard.render(Canned(READY, [skipped, hybrid], BREAKDOWN))
    layout = layout_at(tmp_path, page, width)
    assert layout["overflow"] <= 0, f"{layout['overflow']} px of the runs table hidden at {width} px"
    assert "Judged" in layout["columns"], layout["columns"]
    shot = ARTIFACTS / f"dashboard-runs-{width}.png"
    chromium(tmp_path, f"--window-size={width},900", f"--screenshot={shot}", f"file://{tmp_path}/layout-{width}.html")
    assert shot.stat().st_size > 5_000


def test_percentages_are_formatted_in_one_place_rounded_half_up():
    """One home for a rate as a percent (it was round() in four places: 0.625 read 62% there)."""
    assert [diagnostics.percent(r) for r in (0.625, 0.0049, 0.995, 1, None)] == [63, 0, 100, 100, None]
    assert diagnostics.percent_text(0.125) == "13%" and diagnostics.percent_text(None) == "—"
    tile = {**READY, "exclusive_rate": 0.625, "exclusive_rate_low": 0.3545, "exclusive_rate_high": 0.8477}
    assert mcp_server.tile_sentence(tile).startswith("Only memory knows 63% (95% interval 35%–85%)")
    assert "  exclusive rate: 63%  (95% interval 35–85%)" in demo.describe_tile(tile)
    assert dashboard.view_model(tile, [llm_run()])["rate"] == 63


def stop_the_open_run_at_the_cap(db_url: str, user_id, judged: int, cost: str) -> None:
    """What the worker leaves when a spending cap refuses a run's next call: `judged` verdicts and the
    calls they cost, then roi.abort_run_for_budget (the rest skipped, the run closed aborted_budget)."""
    with psycopg.connect(db_url) as conn:
        jobs = conn.execute(
            "select w.id, w.run_id, w.probe_id from roi.work w where w.kind = 'judge' and w.owner_id = %s "
            "order by w.id",
            (user_id,),
        ).fetchall()
        for job_id, run_id, probe_id in jobs[:judged]:
            conn.execute(
                "select roi.record_usage(%s, 'judgment', 'openai/gpt-4', %s, %s, 600, 40, false, %s::numeric)",
                (user_id, run_id, probe_id, cost),
            )
            conn.execute("select roi.settle_judgment(%s, true, false, 0.9, 'scripted')", (job_id,))
        assert conn.execute("select roi.abort_run_for_budget(%s)", (jobs[0][1],)).fetchone()[0]


def test_a_run_stopped_by_the_spending_cap_is_its_own_state_and_says_what_it_spent(cluster, email, tmp_path):
    db = cluster.url()
    with extractor(db, "llm"), benchmark_user(cluster, email, knowledge(5)) as me:
        transport = local(cluster, me)
        assert transport.benchmark_memory()["status"] == "generating"
        activate_pending_probes(db, me.id)
        assert transport.benchmark_memory()["status"] == "started"
        stop_the_open_run_at_the_cap(db, me.id, judged=2, cost="0.0213")
        tile = transport.tile()
        dom = open_page(tmp_path, "aborted-budget", render_to_file(transport, tmp_path, "aborted-budget"))
        assert tile["state"] == "aborted_budget" and tile["exclusive_rate"] is None and tile["trend"] == []
        assert dom.find("section", id="tile")[0]["data-state"] == "aborted_budget"
        assert dom.text("headline") == tile["headline"] == "Stopped at the spending cap"
        assert dom.text("hint") == tile["hint"]
        assert "after $0.0426, with 2 of 5 questions judged" in tile["hint"]
        assert not dom.has("rate") and not dom.find("meta", **{"http-equiv": "refresh"})
        assert mcp_server.tile_sentence(tile) == tile["hint"]

        # A complete run, then one the cap stops: the score stays the complete run's, with a note.
        assert transport.benchmark_memory()["status"] == "started"
        with psycopg.connect(db) as conn:
            for (job_id,) in conn.execute(
                "select id from roi.work where kind = 'judge' and owner_id = %s", (me.id,)
            ).fetchall():
                conn.execute("select roi.settle_judgment(%s, true, false, 0.9, 'scripted')", (job_id,))
        assert transport.benchmark_memory()["status"] == "started"
        stop_the_open_run_at_the_cap(db, me.id, judged=1, cost="0.0213")
        tile = transport.tile()
        dom = open_page(tmp_path, "aborted-budget-after-score", render_to_file(transport, tmp_path, "after-score"))
    assert tile["state"] == "aborted_budget" and tile["exclusive_rate"] == 1
    assert "stopped at the spending cap after $0.0213 (1 of 5 questions judged)" in tile["note"]
    assert dom.text("note") == tile["note"] and dom.has("rate")
    assert tile["trend"] == [1], "the stopped runs are not in the trend"
    listed = dom.text("runs")
    assert listed.count("aborted_budget") == 2 and "1 of 5 (4 skipped)" in listed and "2 of 5 (3 skipped)" in listed


# The scored run's judge, three ways, with the words the views give for each
# (tests/worker/test_judge_correction.py checks those words against the views themselves).
JUDGE_STATES = {
    "calibrated": (
        {
            "judge_calibrated": True,
            "judge_sensitivity": 0.91,
            "judge_specificity": 0.88,
            "exclusive_rate_corrected": 0.2886,
            "exclusive_rate_corrected_low": 0.0894,
            "exclusive_rate_corrected_high": 0.5471,
            "correction_note": "corrected for the judge's measured error on its newest calibration (240 cases)",
        },
        "judge calibrated on 240 cases (sensitivity 91%, specificity 88%): corrected rate 29% (95% 9–55%)",
    ),
    "uncalibrated": (
        {
            "judge_calibrated": False,
            "correction_note": "judge not calibrated: an operator runs zm-roi judge-check --record",
        },
        "judge not calibrated: an operator runs zm-roi judge-check --record",
    ),
    "refused": (
        {
            "judge_calibrated": True,
            "judge_sensitivity": 1.0,
            "judge_specificity": 0.0,
            "correction_note": "no corrected rate: the judge is too close to chance (sensitivity 100% + specificity "
            "0% - 100% = 0 points, below the 30 a correction needs)",
        },
        "judge calibrated on 240 cases (sensitivity 100%, specificity 0%): too close to chance to correct, so the "
        "rate above is only what the judge said",
    ),
}


@pytest.mark.parametrize("state", list(JUDGE_STATES))
def test_the_raw_and_the_corrected_rate_stand_side_by_side(tmp_path, state):
    figures, note = JUDGE_STATES[state]
    run = llm_run(**figures)
    page = tmp_path / f"judge-{state}.html"
    page.write_text(dashboard.render(Canned({**READY, "judge_note": note}, [run], BREAKDOWN)), encoding="utf-8")
    dom = open_page(tmp_path, f"judge-{state}", page.as_uri())
    assert dom.text("rate") == "35%" and dom.text("interval") == "95% interval 18–57%", "the headline stays raw"
    assert dom.text("raw-rate") == "Raw: what the judge said 35% 95% 18–57%"
    assert dom.text("judge-note") == note
    corrected = dom.text("corrected-rate")
    if state == "calibrated":
        assert corrected == "Corrected for the judge's measured error 29% 95% 9–55%"
    elif state == "uncalibrated":
        assert corrected == "Corrected for the judge's measured error — judge not calibrated"
    else:
        assert corrected == "Corrected for the judge's measured error — refused: judge too close to chance"
    assert "compares raw verdicts" in dom.text("paired")
    sentence = mcp_server.tile_sentence({**READY, "judge_note": note})
    assert sentence.endswith(note), "the MCP reply carries the same note"


def test_deterministic_mode_shows_no_corrected_rate_and_the_caveat_speaks(tmp_path):
    run = llm_run(mode="deterministic", correction_note="no corrected rate in deterministic mode")
    caveat = "In deterministic mode only the source memory counts as an answer."
    page = tmp_path / "judge-deterministic.html"
    page.write_text(
        dashboard.render(Canned({**READY, "caveat": caveat, "judge_note": None}, [run], BREAKDOWN)), encoding="utf-8"
    )
    dom = Dom(chromium(tmp_path, "--dump-dom", page.as_uri()).stdout)
    assert not dom.has("rates") and not dom.has("judge-note") and dom.text("caveat") == caveat


def test_the_served_dashboard_renders_again_only_when_the_tile_changes(cluster, email, tmp_path, monkeypatch):
    """Before: every request rendered the page afresh and opened three database sessions (tile, runs,
    breakdown), about 3 requests a second. Now the page is kept while the user's tile is unchanged, and
    requests share a few connections."""
    renders, sessions = [], []
    real_view_model, real_connect = dashboard.view_model, localdb.connect
    monkeypatch.setattr(dashboard, "view_model", lambda *a, **k: renders.append(1) or real_view_model(*a, **k))
    monkeypatch.setattr(localdb, "connect", lambda *a, **k: sessions.append(1) or real_connect(*a, **k))
    with benchmark_user(cluster, email, knowledge(2)) as me:
        token = {"value": me.token}
        server = dashboard.http_server(lambda: LocalTransport(cluster.url(), cluster.jwt_secret(), token["value"]), 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"

        def get() -> str:
            with urllib.request.urlopen(base, timeout=30) as response:  # noqa: S310 (a local test server)
                return response.read().decode()

        try:
            first = get()
            assert 'data-state="invite"' in first and len(renders) == 1
            for _ in range(4):
                assert get() == first
            assert len(renders) == 1, "nothing changed: the page is served again, not rendered again"
            assert len(sessions) <= 2, f"{len(sessions)} database sessions for 5 requests, one after another"

            with extractor(cluster.url(), "deterministic"):
                assert local(cluster, me).benchmark_memory()["status"] in ("generating", "started")
            changed = get()
            assert len(renders) == 2 and changed != first, "a changed tile renders the page again"

            token["value"] = tokens.mint(cluster.jwt_secret(), me.id, me.email, ttl=-10)
            with pytest.raises(urllib.error.HTTPError) as refused:
                get()
            assert refused.value.code == 503, "the token is checked on every request, cached page or not"
        finally:
            server.shutdown()
            server.server_close()
