"""Every file in the top-level sql/ (the saved queries a Supabase user runs by hand in Studio's SQL
editor) runs as a signed-in user under row-level security, exactly as Studio's role impersonation and
PostgREST run it (`set local role authenticated` plus `request.jwt.claims`), returns rows, and shows no
probe question: the seeded owner has one probe whose question is a unique marker, and the marker must
appear nowhere in any file's output."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support import (
    KNOWLEDGE,
    Owners,
    activate_pending_probes,
    benchmark,
    extractor,
    fetch,
    forget_calibrations,
    set_settings,
)
from zm_roi.identity import act_as, claims_for
from zm_roi.queries import query

SQL_FOLDER = Path(__file__).resolve().parents[2] / "sql"
FILES = sorted(SQL_FOLDER.glob("*.sql"))
# What a signed-in user may read and these files may name: the public contract's views, the user's own
# usage events, and the settings every caller reads. Never roi.* tables of results or questions.
READABLE = {
    "public.roi_benchmark_tile",
    "public.roi_benchmark_runs",
    "public.roi_benchmark_breakdown",
    "public.usage_events",
    "roi.settings",
}


def run_file(db_url: str, user_id: uuid.UUID, path: Path) -> list[dict]:
    """The whole file as Studio's editor sends it (one script, every statement), as the user under RLS;
    the rows of every result set it produced."""
    rows: list[dict] = []
    with psycopg.connect(db_url, row_factory=dict_row) as conn, conn.transaction():
        act_as(conn, claims_for(user_id))
        cursor = conn.execute(path.read_text())
        while True:
            if cursor.description is not None:
                rows.extend(cursor.fetchall())
            if not cursor.nextset():
                break
    return rows


@pytest.fixture(scope="module")
def seeded(cluster):
    """One owner with two LLM runs (one judged by a calibrated judge, one still judging), usage events,
    and a probe whose question is a marker no output may show."""
    db_url = cluster.url()
    marker = f"ZMMARKER{uuid.uuid4().hex}"
    fingerprint = f"openai/sql-folder#judge.j2@{uuid.uuid4().hex[:12]}"
    # Owners, not user_with_knowledge: the users that makes are removed after each test, this one
    # serves the whole module.
    owners = Owners(db_url)
    owner = owners.create(KNOWLEDGE[:4])
    try:
        with extractor(db_url, "llm"):
            set_settings(db_url, closed_book_checks=0, withheld_source_checks=0, order_checks=0)
            assert benchmark(db_url, owner)["status"] == "generating"
            assert activate_pending_probes(db_url, owner) == 4
            with psycopg.connect(db_url) as conn:
                conn.execute(
                    "update roi.probes set question = %s where id = (select min(id::text)::uuid"
                    " from roi.probes where owner_id = %s)",
                    (f"What does {marker} say?", owner),
                )
            first = benchmark(db_url, owner)
            assert first["status"] == "started", first
            with psycopg.connect(db_url) as conn:
                judged = [
                    conn.execute(
                        query("record_verdict"),
                        {
                            "run_id": run_id,
                            "probe_id": probe_id,
                            "with_memory": True,
                            "without_memory": n % 2 == 1,
                            "confidence": 0.9,
                            "reason": "The first result says so.",
                            "judge_fingerprint": fingerprint,
                        },
                    ).fetchone()[0]
                    for n, (run_id, probe_id) in enumerate(
                        conn.execute(
                            "select run_id, probe_id from roi.work where kind = 'judge' and run_id = %s",
                            (first["run_id"],),
                        ).fetchall()
                    )
                ]
                assert judged == [True] * 4, judged
                conn.execute(
                    query("record_judge_calibration"),
                    {"check_id": uuid.uuid4(), "judge_fingerprint": fingerprint, "model": "openai/m", "case_count": 100}
                    | {
                        f"{label}_{count}": value
                        for label in ("with_memory", "without_memory", "exclusive")
                        for count, value in zip(("tp", "fp", "tn", "fn"), (40, 10, 45, 5), strict=True)
                    },
                )
                for purpose, model, cost in (("probe_generation", "openai/g", 0.001), ("judgment", "openai/j", 0.002)):
                    conn.execute(
                        "insert into public.usage_events (owner_id, purpose, model, input_tokens, output_tokens,"
                        " run_id, cost_usd) values (%s, %s, %s, 100, 20, %s, %s)",
                        (owner, purpose, model, first["run_id"], cost),
                    )
            second = benchmark(db_url, owner)
            assert second["status"] == "started", second
        yield db_url, owner, marker
    finally:
        owners.delete_all()
        forget_calibrations(db_url, [fingerprint])


def test_the_folder_holds_the_saved_queries():
    names = {path.stem for path in FILES}
    wanted = {"tile", "runs", "breakdown", "cost_by_purpose", "queue_depth", "stale_runs", "calibrations"}
    assert wanted <= names, f"sql/ lacks {sorted(wanted - names)}"
    for path in FILES:
        assert path.read_text().startswith("-- "), f"{path.name} opens with a comment saying what it shows"


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_each_file_reads_only_what_the_public_contract_offers(path):
    statements = re.sub(r"--[^\n]*", "", path.read_text()).lower()  # the comments may name what it does not read
    named = set(re.findall(r"\b(?:public|roi|auth|extensions)\.\w+", statements))
    named |= set(re.findall(r"\b(?:from|join)\s+(?!lateral\b)([a-z_][\w.]*)", statements))
    assert named <= READABLE, f"sql/{path.name} reads {sorted(named - READABLE)}, outside the public contract"


def test_the_marker_question_exists_behind_the_curtain(seeded):
    db_url, owner, marker = seeded
    rows = fetch(
        db_url, "select question from roi.probes where owner_id = %s and question like %s", (owner, "%" + marker + "%")
    )
    assert len(rows) == 1, "the seeded probe carries the marker, so its absence below means something"


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_each_file_runs_as_a_signed_in_user_returns_rows_and_no_question(seeded, path):
    db_url, owner, marker = seeded
    rows = run_file(db_url, owner, path)
    assert rows, f"sql/{path.name} returned no rows as a signed-in user with two runs"
    shown = json.dumps(rows, default=str)
    assert marker not in shown, f"sql/{path.name} shows a probe question to a signed-in user"
