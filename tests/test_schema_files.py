"""One readable schema, and migrations that never change once merged.

`supabase/schemas/*.sql` hold the current definition of every SQL object; `supabase/migrations/` hold
its history (procrastinate's `schema.sql` + migrations, tested the way its test_migration.py does).
A database built from each must be the same, and a migration that has landed on main never changes:
`supabase/migrations.sha256` records each one's checksum, and git history (where the checkout has it)
shows any later commit that touched one.
"""

from __future__ import annotations

import difflib
import subprocess

import psycopg
import pytest

from tests.conftest import ROOT, throwaway_cluster
from zm_roi import localdb

MIGRATIONS = ROOT / "supabase" / "migrations"
SCHEMAS = ROOT / "supabase" / "schemas"

# What pg_dump does not show: the roles the migrations create, the scheduled job and the seeded rows.
FACTS = {
    "roles": """
        select r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
               r.rolreplication, r.rolbypassrls, r.rolconnlimit,
               array(select g.rolname from pg_auth_members m join pg_roles g on g.oid = m.roleid
                     where m.member = r.oid order by 1) as member_of
        from pg_roles r where r.rolname !~ '^pg_' order by r.rolname""",
    "cron jobs": "select jobname, schedule, command, database, username from cron.job order by jobname",
    "roi.settings": "select to_jsonb(s) from roi.settings s",
    "roi.upkeep_state": "select to_jsonb(u) from roi.upkeep_state u",
}


# ---- a database from the migrations equals one from the schema files -----------------------------


@pytest.fixture(scope="module")
def both_builds():
    """Two throwaway clusters: one built by `supabase db push` of the migrations, one from the schema
    files, each after the same compat layer (pg_cron lives only in database `postgres`, so one cluster
    cannot hold both)."""
    with throwaway_cluster() as from_migrations, throwaway_cluster(localdb.apply_schema_files) as from_schemas:
        yield from_migrations, from_schemas


def schema_dump(cluster: localdb.Cluster) -> list[str]:
    """pg_dump --schema-only, minus what differs between any two dumps (the random \\restrict key) and
    the CLI's own migration history; grants are sorted within each object (the order of an ACL records
    the order of the GRANT statements, not a difference in privileges)."""
    result = subprocess.run(
        [
            str(localdb.pg_bindir() / "pg_dump"),
            "--schema-only",
            "--exclude-schema=supabase_migrations",
            f"--dbname={cluster.url()}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    lines: list[str] = []
    grants: list[str] = []
    in_acl = False
    for line in result.stdout.splitlines():
        if line.startswith(("\\restrict", "\\unrestrict")):
            continue
        if line.startswith("-- Name: "):
            in_acl = "; Type: ACL;" in line or "; Type: DEFAULT ACL;" in line
        if in_acl and line and not line.startswith("--"):
            grants.append(line)
            continue
        lines += sorted(grants) + [line]
        grants = []
    return lines + sorted(grants)


def facts(cluster: localdb.Cluster) -> dict[str, list[tuple]]:
    with psycopg.connect(cluster.url()) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in FACTS.items()}


def test_schema_files_build_the_database_the_migrations_build(both_builds):
    from_migrations, from_schemas = both_builds
    expected, actual = schema_dump(from_migrations), schema_dump(from_schemas)
    assert any("CREATE FUNCTION public.benchmark_memory()" in line for line in expected), "the dump is empty"
    labels = ("built from supabase/migrations", "built from supabase/schemas")
    diff = "\n".join(difflib.unified_diff(expected, actual, *labels, n=4, lineterm=""))
    assert expected == actual, (
        "supabase/schemas/ and supabase/migrations/ disagree (pg_dump of each; fix the side that is wrong, "
        "and change SQL with a new migration AND the schema file):\n" + diff
    )


def test_schema_files_create_the_roles_job_and_rows_the_migrations_create(both_builds):
    from_migrations, from_schemas = both_builds
    expected, actual = facts(from_migrations), facts(from_schemas)
    assert ("zm-roi-upkeep", "* * * * *", "select roi.upkeep()", "postgres", "postgres") in actual["cron jobs"]
    assert "roi_worker" in [row[0] for row in actual["roles"]]
    for name in FACTS:
        assert expected[name] == actual[name], f"{name}: migrations {expected[name]!r} vs schema files {actual[name]!r}"
