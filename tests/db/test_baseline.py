"""The baseline and the databases the old migration history built.

The old history is read from git at the commit `supabase/baseline.toml` records; a database built from
it by `supabase db push` stands for every database deployed before the squash.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT, throwaway_cluster
from tests.db.test_schema_files import schema_dump
from zm_roi import baseline, localdb
from zm_roi.errors import UserError

BASELINE = baseline.Baseline.read(ROOT)


def old_history(folder: Path, drop_last: int = 0) -> Path:
    """A project folder holding the old history's config.toml and migrations (less the last `drop_last`),
    as git has them at the recorded commit."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", BASELINE.old_history_commit, "supabase"],
        capture_output=True,
    )
    if archive.returncode != 0:
        pytest.skip(f"this checkout lacks the old history's commit {BASELINE.old_history_commit}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    migrations = sorted((folder / "supabase" / "migrations").glob("*.sql"))
    for path in migrations[len(migrations) - drop_last :]:
        path.unlink()
    (folder / "node_modules").symlink_to(ROOT / "node_modules")  # the same pinned CLI
    return folder


def pushed_from(project: Path):
    def migrate(root: Path, url: str) -> str:
        return localdb.push_migrations(project, url)

    return migrate


def local_versions() -> list[str]:
    return sorted(path.name.split("_", 1)[0] for path in (ROOT / "supabase" / "migrations").glob("*.sql"))


def old_versions(project: Path) -> list[str]:
    return sorted(path.name.split("_", 1)[0] for path in (project / "supabase" / "migrations").glob("*.sql"))


def test_the_baseline_is_what_a_fresh_database_applies():
    first, *rest = BASELINE.files(ROOT)
    assert local_versions()[: len(BASELINE.versions)] == BASELINE.versions
    assert "already has a roi schema" in first.read_text()
    assert all("_baseline_" in path.name for path in [first, *rest])


def test_a_database_at_the_last_old_migration_moves_onto_the_baseline(tmp_path):
    project = old_history(tmp_path)
    assert old_versions(project)[-1] == BASELINE.last_old_version
    with throwaway_cluster(pushed_from(project)) as old, throwaway_cluster(localdb.apply_schema_files) as fresh:
        assert baseline.applied_versions(old.url()) == old_versions(project)
        with psycopg.connect(old.url()) as conn:
            conn.execute("insert into auth.users (email) values ('kept@baseline.test')")
        # A second `zm-roi db up` of the old history applied its compat layer again.
        localdb.apply_sql_file(old.url(), project / localdb.COMPAT_LAYER)

        said = []
        localdb.prepare_database(old, ROOT, say=said.append)

        assert baseline.applied_versions(old.url()) == local_versions()
        assert said == [
            "moved this database onto the migration baseline: its schema was the baseline's (docs/deploy.md)"
        ]
        assert "Remote database is up to date" in localdb.push_migrations(ROOT, old.url())
        assert schema_dump(old) == schema_dump(fresh)
        with psycopg.connect(old.url()) as conn:
            assert conn.execute("select count(*) from auth.users where email = 'kept@baseline.test'").fetchone()[0] == 1


def test_an_older_database_is_refused_and_the_baseline_will_not_run_over_it(tmp_path):
    project = old_history(tmp_path, drop_last=1)
    with throwaway_cluster(pushed_from(project)) as older:
        before = baseline.applied_versions(older.url())
        with pytest.raises(UserError) as refused:
            localdb.prepare_database(older, ROOT)
        message = str(refused.value)
        assert "older zm-roi" in message and BASELINE.old_history_commit[:12] in message
        assert "zm-roi db reset" in message
        assert baseline.applied_versions(older.url()) == before

        # The CLI itself refuses to push while the old versions are in the history; once they are
        # reverted (the first repair command alone), the baseline's guard refuses to run over roi.
        baseline.repair(ROOT, localdb.supabase_cli(ROOT), older.url(), "reverted", before)
        with pytest.raises(UserError, match="already has a roi schema"):
            localdb.push_migrations(ROOT, older.url())
        assert baseline.applied_versions(older.url()) == []


def repair_commands(text: str) -> dict[str, list[str]]:
    """The versions each `supabase migration repair … --status <status>` command of a document names."""
    joined = text.replace("\\\n", " ")
    pattern = r"supabase migration repair (?:--\S+ )*--status (\w+)((?:\s+\d{14})+)"
    return {status: versions.split() for status, versions in re.findall(pattern, joined)}


def test_deploy_docs_give_the_exact_repair_commands(tmp_path):
    project = old_history(tmp_path)
    commands = repair_commands((ROOT / "docs" / "deploy.md").read_text())
    assert commands == {"reverted": old_versions(project), "applied": BASELINE.versions}
