"""The real Supabase CLI against the test cluster: migration history, schema lint and advisors."""

from __future__ import annotations

import json
import subprocess
from contextlib import contextmanager

import psycopg
from psycopg import sql

from tests.conftest import ROOT
from zm_roi import localdb


def supabase(*args: str) -> subprocess.CompletedProcess:
    cli = localdb.supabase_cli(ROOT)
    return subprocess.run([str(cli), *args, "--workdir", str(ROOT)], capture_output=True, text=True)


def advisor_findings(url: str) -> list[dict]:
    result = supabase("db", "advisors", "--db-url", url, "--level", "warn", "-o", "json")
    assert result.returncode == 0, result.stderr
    text = result.stdout.strip()
    # An empty report is the one non-JSON answer accepted; anything else is a failure, never "no findings".
    if not text:
        return []
    findings = json.loads(text)
    assert isinstance(findings, list), text[:2000]
    return findings


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


@contextmanager
def scratch_database(cluster, name: str):
    """A database beside the test one, with only the compat layer applied; dropped afterwards."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(sql.SQL("drop database if exists {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    url = cluster.url(dbname=name)
    try:
        localdb.apply_sql_file(url, ROOT / localdb.COMPAT_LAYER)
        yield url
    finally:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def test_db_advisors_catch_a_public_table_without_rls(cluster):
    """The advisor check above can fail: on a scratch database an unprotected table is flagged."""
    with scratch_database(cluster, "advisor_probe") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("create table public.unprotected (id int)")
        names = {finding["name"] for finding in advisor_findings(url)}
        assert "rls_disabled_in_public" in names


def test_migrations_apply_where_pg_cron_cannot_be_created(cluster):
    """pg_cron only lives in `cron.database_name`; elsewhere the upkeep migration skips the schedule."""
    with scratch_database(cluster, "without_cron") as url:
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
