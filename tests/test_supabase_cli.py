"""The real Supabase CLI against the test cluster: migration history, schema lint and advisors."""

from __future__ import annotations

import json
import subprocess

import psycopg

from tests.conftest import ROOT
from zm_roi import localdb


def supabase(*args: str) -> subprocess.CompletedProcess:
    cli = localdb.supabase_cli(ROOT)
    return subprocess.run([str(cli), *args, "--workdir", str(ROOT)], capture_output=True, text=True)


def advisor_findings(url: str) -> list[dict]:
    result = supabase("db", "advisors", "--db-url", url, "--level", "warn", "-o", "json")
    assert result.returncode == 0, result.stderr
    text = result.stdout.strip()
    return json.loads(text) if text.startswith("[") else []


def test_every_migration_is_applied(cluster):
    result = supabase("migration", "list", "--db-url", cluster.url())
    assert result.returncode == 0, result.stderr
    local = sorted(p.name.split("_", 1)[0] for p in (ROOT / "supabase" / "migrations").glob("*.sql"))
    for version in local:
        assert result.stdout.count(version) == 2, f"{version} is not applied:\n{result.stdout}"


def test_db_lint_finds_no_error_in_project_schemas(cluster):
    # Extension schemas are left out: pgTAP's own functions reference its session temp tables.
    result = supabase(
        "db", "lint", "--db-url", cluster.url(), "--schema", "public,roi,auth,tests", "--fail-on", "error"
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_db_advisors_find_nothing_at_warn_or_above(cluster):
    findings = advisor_findings(cluster.url())
    assert findings == [], json.dumps(findings, indent=2)


def test_db_advisors_catch_a_public_table_without_rls(cluster):
    """The advisor check above can fail: on a scratch database an unprotected table is flagged."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("drop database if exists advisor_probe")
        conn.execute("create database advisor_probe")
    probe_url = cluster.url(dbname="advisor_probe")
    try:
        localdb.apply_sql_file(probe_url, ROOT / "sql" / "supabase_compat.sql")
        with psycopg.connect(probe_url, autocommit=True) as conn:
            conn.execute("create table public.unprotected (id int)")
        names = {finding["name"] for finding in advisor_findings(probe_url)}
        assert "rls_disabled_in_public" in names
    finally:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("drop database advisor_probe with (force)")


def test_migrations_apply_where_pg_cron_cannot_be_created(cluster):
    """pg_cron only lives in `cron.database_name`; elsewhere the upkeep migration skips the schedule."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("drop database if exists without_cron")
        conn.execute("create database without_cron")
    url = cluster.url(dbname="without_cron")
    try:
        localdb.apply_sql_file(url, ROOT / "sql" / "supabase_compat.sql")
        notices = []
        with psycopg.connect(url) as conn:
            conn.add_notice_handler(lambda diag: notices.append(diag.message_primary))
            for migration in sorted((ROOT / "supabase" / "migrations").glob("*.sql")):
                conn.execute(migration.read_text())
        assert any("run `select roi.upkeep()` every minute yourself" in n for n in notices), notices
        with psycopg.connect(url) as conn:
            assert conn.execute("select count(*) from pg_extension where extname = 'pg_cron'").fetchone()[0] == 0
            assert conn.execute("select to_regprocedure('roi.upkeep()') is not null").fetchone()[0]
            assert conn.execute("select roi.upkeep() ->> 'failures'").fetchone()[0] == "0"
    finally:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("drop database without_cron with (force)")
