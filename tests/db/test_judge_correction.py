"""roi.judge_corrected_rate, the one home of the judge-corrected exclusive rate, against values worked
by hand (tests/unit/test_judge_correction.py shows the working) and against its Python port on a grid of
inputs (the port runs the coverage simulation); and roi.judge_calibrations, the operator's record of a
judge's measured error: append-only for every role, written by no client role, read by an owner only for
the judges of their own runs."""

from __future__ import annotations

import itertools
import uuid
from decimal import Decimal

import psycopg
import pytest

from tests.judge_correction import corrected_rate
from tests.support import as_user, benchmark, forget_calibrations, remove_users, user_with_knowledge
from zm_roi.queries import query

SQL = "select estimate, low, high, note from roi.judge_corrected_rate(%s, %s, %s, %s, %s, %s)"


def figures(conn, *arguments) -> tuple:
    return conn.execute(SQL, arguments).fetchone()


def test_the_sql_matches_values_worked_by_hand(conn):
    assert figures(conn, 8, 20, 85, 15, 80, 20) == (Decimal("0.3077"), Decimal("0.0000"), Decimal("0.6570"), None)
    assert figures(conn, 14, 20, 85, 15, 80, 20) == (Decimal("0.7692"), Decimal("0.4134"), Decimal("1.0000"), None)
    assert figures(conn, 20, 20, 85, 15, 80, 20)[:3] == (Decimal("1.0000"), Decimal("0.7522"), Decimal("1.0000"))
    # At either clamp the interval keeps the width of the run's sampling error (it once printed 1.0–1.0).
    assert figures(conn, 18, 20, 50, 50, 133, 7)[:3] == (Decimal("1.0000"), Decimal("0.3931"), Decimal("1.0000"))
    assert figures(conn, 0, 20, 85, 15, 80, 20)[:3] == (Decimal("0.0000"), Decimal("0.0000"), Decimal("0.2478"))


def test_the_sql_says_why_it_refuses(conn):
    always_yes = figures(conn, 12, 20, 100, 0, 0, 140)
    assert always_yes[:3] == (None, None, None)
    assert always_yes[3].startswith("no corrected rate: the judge is too close to chance (sensitivity 100% + ")
    assert figures(conn, 12, 20, None, None, None, None)[3] == (
        "judge not calibrated: an operator runs zm-roi judge-check --record"
    )
    assert figures(conn, 0, 0, 85, 15, 80, 20)[3] == "no judged question to correct"
    assert "no case whose exclusive label is true" in figures(conn, 12, 20, 0, 0, 80, 20)[3]


GRID = [
    (k, n, tp, m1 - tp, tn, m0 - tn)
    for n, m1, m0 in ((1, 10, 10), (5, 40, 60), (20, 100, 140), (50, 240, 240))
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n})
    for tp, tn in itertools.product(
        sorted({0, m1 // 2, (m1 * 7) // 10, (m1 * 17) // 20, m1 - 1, m1}),
        sorted({0, m0 // 2, (m0 * 8) // 10, m0 - 1, m0}),
    )
    if 0 <= k <= n
]


def test_the_python_port_equals_the_sql_on_a_grid(conn):
    columns = list(zip(*GRID, strict=True))
    rows = conn.execute(
        "select g.k, g.n, g.tp, g.fn, g.tn, g.fp, c.estimate, c.low, c.high, c.note"
        " from unnest(%s::int[], %s::int[], %s::int[], %s::int[], %s::int[], %s::int[]) g (k, n, tp, fn, tn, fp)"
        " cross join lateral roi.judge_corrected_rate(g.k, g.n, g.tp, g.fn, g.tn, g.fp) c",
        [list(column) for column in columns],
    ).fetchall()
    assert len(rows) == len(GRID) > 500
    refused = corrected = 0
    for *arguments, estimate, low, high, note in rows:
        port = corrected_rate(*arguments)
        if port.refused:
            refused += 1
            assert (estimate, low, high) == (None, None, None) and note, arguments
            continue
        corrected += 1
        assert note is None, arguments
        sql_figures = (float(estimate), float(low), float(high))
        # Both round to 4 places; float and numeric may round a last digit apart.
        assert all(abs(a - b) <= 1.5e-4 for a, b in zip(sql_figures, port[:3], strict=True)), (arguments, port)
    assert refused > 50 and corrected > 200, "the grid holds both kinds of answer"


CALIBRATION_COUNTS = {
    f"{label}_{count}": value
    for label in ("with_memory", "without_memory", "exclusive")
    for count, value in zip(("tp", "fp", "tn", "fn"), (40, 10, 45, 5), strict=True)
}


def insert_calibration(conn, fingerprint: str) -> tuple:
    return conn.execute(
        query("record_judge_calibration"),
        {"check_id": uuid.uuid4(), "judge_fingerprint": fingerprint, "model": "openai/m", "case_count": 100}
        | CALIBRATION_COUNTS,
    ).fetchone()


def test_a_recorded_calibration_is_append_only_for_every_role(db_url):
    fingerprint = f"openai/append-only#judge.j2@{uuid.uuid4().hex[:12]}"
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = insert_calibration(conn, fingerprint)[0]
        for statement in (
            "update roi.judge_calibrations set exclusive_tp = 0 where id = %s",
            "delete from roi.judge_calibrations where id = %s",
            "truncate roi.judge_calibrations",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="recorded results are append-only"):
                conn.execute(statement, (row,) if "%s" in statement else ())
        privileges = conn.execute(
            "select r.rolname, p.privilege from pg_roles r"
            " cross join unnest(array['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p (privilege)"
            " where r.rolname in ('anon', 'authenticated', 'roi_worker', 'authenticator', 'service_role')"
            " and has_table_privilege(r.oid, 'roi.judge_calibrations', p.privilege)"
        ).fetchall()
        assert privileges == [], "no client role may write a calibration"
    forget_calibrations(db_url, [fingerprint])


def test_an_owner_reads_the_calibrations_of_their_runs_judges_only(db_url, conn):
    owner, other = (
        conn.execute(query("ensure_user"), {"email": f"{who}-{uuid.uuid4().hex[:8]}@o.test"}).fetchone()[0]
        for who in ("owner", "other")
    )
    mine = f"openai/mine#judge.j2@{uuid.uuid4().hex[:12]}"
    theirs = f"openai/theirs#judge.j2@{uuid.uuid4().hex[:12]}"
    run = conn.execute(
        "insert into roi.runs (owner_id, mode, probe_count) values (%s, 'llm', 1) returning id", (owner,)
    ).fetchone()[0]
    conn.execute(
        "insert into roi.run_judges (run_id, owner_id, judge_fingerprint) values (%s, %s, %s)", (run, owner, mine)
    )
    insert_calibration(conn, mine)
    insert_calibration(conn, theirs)
    conn.commit()
    try:
        read = "select judge_fingerprint from roi.judge_calibrations where judge_fingerprint in (%s, %s)"
        assert [r["judge_fingerprint"] for r in as_user(db_url, owner, read, (mine, theirs))] == [mine]
        assert as_user(db_url, other, read, (mine, theirs)) == []
    finally:
        remove_users(db_url, [owner, other])
        forget_calibrations(db_url, [mine, theirs])


def test_a_deterministic_run_has_no_corrected_rate_and_says_why(db_url, deterministic_mode, email):
    owner = user_with_knowledge(db_url, email, count=3)
    assert benchmark(db_url, owner)["status"] == "started"
    [run] = as_user(db_url, owner, "select * from public.roi_benchmark_runs")
    assert run["exclusive_rate"] is not None
    assert (run["judge_calibrated"], run["judge_sensitivity"], run["exclusive_rate_corrected"]) == (False, None, None)
    assert run["correction_note"].startswith("no corrected rate in deterministic mode: the strict retrieval check")
    [tile] = as_user(db_url, owner, "select judge_note, caveat from public.roi_benchmark_tile")
    assert tile["judge_note"] is None and tile["caveat"], "the caveat speaks in deterministic mode"
