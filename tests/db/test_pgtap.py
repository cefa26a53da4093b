"""Runs every pgTAP suite in supabase/tests/database with pg_prove against the test cluster."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT


def test_pgtap_suites_pass(cluster):
    pg_prove = shutil.which("pg_prove")
    if pg_prove is None:
        pytest.fail("pg_prove is missing: run `make install-test` (libtap-parser-sourcehandler-pgtap-perl)")
    env = {
        **os.environ,
        "PGHOST": "127.0.0.1",
        "PGPORT": str(cluster.port),
        "PGUSER": "postgres",
        "PGPASSWORD": "postgres",
        "PGDATABASE": "postgres",
    }
    result = subprocess.run(
        [pg_prove, "--ext", ".sql", "-r", "--verbose", str(ROOT / "supabase" / "tests" / "database")],
        capture_output=True,
        text=True,
        env=env,
    )
    print(result.stdout[-20000:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "Result: PASS" in result.stdout
