"""One throwaway PostgreSQL 15 cluster for the whole test session, built exactly like the embedded
database: compat layer, then the migrations through the real Supabase CLI, then the test helpers."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests import readme_tables
from tests.support import FakeOpenAI, Owners, extractor, remove_created_users
from zm_roi import localdb

ROOT = Path(__file__).resolve().parent.parent

# Embeddings are off for the suite (recall is lexical alone), so the many suites that
# count usage events or import thousands of rows measure what they were written for. The hybrid path
# is tested with the real offline model where it matters: tests/db/test_recall.py turns it on, and
# test_demo runs the demo with its default (the offline model).
os.environ.setdefault("ZM_EMBEDDING_MODEL", "none")


@contextmanager
def throwaway_cluster(migrate=localdb.push_migrations):
    """A migrated cluster in a temporary folder on a free port, destroyed afterwards. The pg_cron job is
    paused: tests run upkeep by hand, at the moments they choose, and the scheduled job would race them.
    `migrate` builds the schema (default: the migrations through the Supabase CLI)."""
    home = Path(tempfile.mkdtemp(prefix="zm-roi-test-"))
    home.chmod(0o755)
    made = localdb.Cluster(home=home, port=localdb.free_port())
    made.create()
    made.start()
    try:
        localdb.prepare_database(made, ROOT, migrate=migrate)
        with psycopg.connect(made.url(), autocommit=True) as conn:
            conn.execute("update cron.job set active = false where jobname = 'zm-roi-upkeep'")
        yield made
    finally:
        made.destroy()


@pytest.fixture(scope="session")
def cluster():
    with throwaway_cluster() as session_cluster:
        localdb.apply_sql_file(session_cluster.url(), ROOT / "supabase" / "tests" / "helpers.sql")
        yield session_cluster


@pytest.fixture(scope="session")
def db_url(cluster) -> str:
    return cluster.url()


@pytest.fixture
def conn(db_url):
    """A superuser connection whose transaction is rolled back after the test."""
    with psycopg.connect(db_url) as connection:
        yield connection
        connection.rollback()


@pytest.fixture(autouse=True)
def _remove_users_made_by_the_test(request):
    yield
    if "cluster" in request.fixturenames:
        remove_created_users(request.getfixturevalue("cluster").url())


@pytest.fixture
def email() -> str:
    """A fresh user's email, so tests that commit never share data."""
    return f"user-{uuid.uuid4().hex[:12]}@example.test"


@pytest.fixture
def llm_mode(db_url):
    """roi.settings.extractor = 'llm' for one test, restored afterwards."""
    with extractor(db_url, "llm"):
        yield


@pytest.fixture
def deterministic_mode(db_url):
    """roi.settings.extractor = 'deterministic' for one test, restored afterwards."""
    with extractor(db_url, "deterministic"):
        yield


@pytest.fixture
def owners(db_url):
    """Users with knowledge made by the test (Owners.create), deleted again with everything recorded."""
    made = Owners(db_url)
    yield made
    made.delete_all()


@pytest.fixture(scope="session")
def worker_url(cluster) -> str:
    """The test cluster as the least-privilege worker role, exactly as `zm-roi worker` connects."""
    return cluster.url(user="roi_worker", password=localdb.WORKER_PASSWORD)


@pytest.fixture
def fake_openai():
    """An OpenAI-compatible endpoint on 127.0.0.1 that writes questions and verdicts, stopped afterwards."""
    server = FakeOpenAI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.let_go.set()
    server.shutdown()
    server.server_close()


class ReliabilityLog:
    """What the reliability scenarios tried and lost, summarised in test-artifacts/reliability.md."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, int, int]] = []

    def record(self, area: str, scenario: str, tried: int, lost: int) -> None:
        self.rows.append((area, scenario, tried, lost))

    def count(self, area: str, scenario: str, lost: int) -> None:
        """One more try of a scenario (a property test's example), with what that try measured it lost:
        the properties it broke. Counted before the example's asserts, so a failing example shows."""
        for index, (a, s, tried, lost_before) in enumerate(self.rows):
            if (a, s) == (area, scenario):
                self.rows[index] = (a, s, tried + 1, lost_before + lost)
                return
        self.rows.append((area, scenario, 1, lost))

    def write(self, path: Path) -> None:
        lines = [
            "# Reliability report",
            "",
            "| area | scenario | tried | lost, duplicated or leaked |",
            "|---|---|---|---|",
        ]
        lines += [f"| {area} | {scenario} | {tried} | {lost} |" for area, scenario, tried, lost in sorted(self.rows)]
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n")


_reliability = ReliabilityLog()


@pytest.fixture(scope="session")
def reliability() -> ReliabilityLog:
    return _reliability


def pytest_sessionfinish(session, exitstatus):
    if _reliability.rows:
        _reliability.write(readme_tables.REPORT)
        # A run that measured every scenario docs/reliability.md quotes holds the page to its figures.
        differences = readme_tables.reliability_differences(
            readme_tables.PAGE.read_text(), readme_tables.REPORT.read_text()
        )
        if differences:
            print(
                "\ndocs/reliability.md's reliability table differs from what this run measured "
                "(regenerate it: python -m tests.readme_tables):\n  " + "\n  ".join(differences),
                file=sys.stderr,
            )
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
