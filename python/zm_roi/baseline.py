"""Moving a database that ran the old migration history onto the baseline.

The migrations were squashed into a baseline (`supabase/baseline.toml` names its files and the commit
that holds the old history). A database that ran the old files has their versions in
`supabase_migrations.schema_migrations`, none of the baseline's, and the baseline refuses to run over
its `roi` schema. When such a database reads exactly like one built from the baseline, `zm-roi db up`
rewrites its migration history the way a hosted project is told to (`supabase migration repair`, the
commands in docs/deploy.md): the old versions reverted, the baseline's applied. Any other database with
a `roi` schema and no baseline is older, and is refused with what to do.
"""

from __future__ import annotations

import subprocess
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from zm_roi.errors import UserError
from zm_roi.queries import query

BASELINE_FILE = "supabase/baseline.toml"


@dataclass(frozen=True)
class Baseline:
    versions: list[str]  # the baseline's migration versions, in order
    old_history_commit: str  # the commit whose supabase/migrations holds the old history
    last_old_version: str

    @classmethod
    def read(cls, root: Path) -> Baseline:
        data = tomllib.loads((root / BASELINE_FILE).read_text())
        return cls(data["baseline_versions"], data["old_history_commit"], data["last_old_version"])

    def files(self, root: Path) -> list[Path]:
        migrations = root / "supabase" / "migrations"
        return [next(migrations.glob(f"{version}_*.sql")) for version in self.versions]


def applied_versions(url: str) -> list[str] | None:
    """The versions in the Supabase CLI's migration history; None when the database has none."""
    with psycopg.connect(url) as conn:
        if conn.execute("select to_regclass('supabase_migrations.schema_migrations')").fetchone()[0] is None:
            return None
        return [row[0] for row in conn.execute("select version from supabase_migrations.schema_migrations order by 1")]


def has_roi_schema(url: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("select to_regnamespace('roi') is not null").fetchone()[0]


def schema_outline(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query("schema_outline")).fetchall()


def baseline_outline(root: Path, url: str, compat: Path, baseline: Baseline) -> list[tuple[str, str, str]]:
    """The outline of a scratch database beside `url`'s, built by the compat layer and the baseline's files
    (no pg_cron there: its schedules are outside the outline), dropped afterwards."""
    name = f"zm_roi_baseline_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    scratch = make_conninfo(url, dbname=name)
    try:
        for path in [compat, *baseline.files(root)]:
            with psycopg.connect(scratch) as conn:
                conn.execute(path.read_text())
        return schema_outline(scratch)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def first_difference(found: list[tuple], expected: list[tuple]) -> str:
    """The first object that differs, named for the refusal message."""
    found_by_name = {(kind, name): text for kind, name, text in found}
    expected_by_name = {(kind, name): text for kind, name, text in expected}
    for key in sorted(found_by_name.keys() | expected_by_name.keys()):
        if key not in expected_by_name:
            return f"{key[0]} {key[1]} is not in the baseline"
        if key not in found_by_name:
            return f"{key[0]} {key[1]} is missing"
        if found_by_name[key] != expected_by_name[key]:
            return f"{key[0]} {key[1]} differs"
    return "nothing"


def repair(root: Path, cli: Path, url: str, status: str, versions: list[str]) -> None:
    """`supabase migration repair`, the command a hosted project runs (docs/deploy.md)."""
    if not versions:
        return
    argv = [str(cli), "migration", "repair", "--db-url", url, "--status", status, *versions, "--workdir", str(root)]
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError(f"supabase migration repair failed:\n{result.stderr.strip() or result.stdout.strip()}")


def move_onto_baseline(root: Path, url: str, compat: Path, cli: Path) -> bool:
    """Move a database built by the old history onto the baseline, if it needs it; True when it moved.
    A fresh database, or one already on the baseline, is left to `supabase db push`."""
    if not (root / BASELINE_FILE).is_file():
        return False  # a checkout from before the squash (e.g. `make bench BASE=<older commit>`)
    baseline = Baseline.read(root)
    applied = applied_versions(url) or []
    if set(baseline.versions) <= set(applied) or not has_roi_schema(url):
        return False
    difference = first_difference(schema_outline(url), baseline_outline(root, url, compat, baseline))
    if difference != "nothing":
        newest = applied[-1] if applied else "none recorded"
        raise UserError(
            f"this database was built by an older zm-roi (newest migration: {newest}; {difference}), and the "
            f"migrations have since been squashed into a baseline that cannot run over it. Bring it to the last "
            f"migration of the old history first: `git checkout {baseline.old_history_commit[:12]} && zm-roi db up`, "
            f"then come back to this version and run `zm-roi db up` again, which moves it onto the baseline. "
            f"Or start afresh with `zm-roi db reset` (its data is lost)."
        )
    local = {path.name.split("_", 1)[0] for path in (root / "supabase" / "migrations").glob("*.sql")}
    repair(root, cli, url, "reverted", [version for version in applied if version not in local])
    repair(root, cli, url, "applied", baseline.versions)
    return True
