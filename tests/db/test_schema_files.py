"""One readable schema, and migrations that never change once merged.

`supabase/schemas/*.sql` hold the current definition of every SQL object; `supabase/migrations/` hold
its history (procrastinate's `schema.sql` + migrations, tested the way its test_migration.py does).
A database built from each must be the same, and a migration that has landed on main never changes:
`supabase/migrations.sha256` records each one's checksum, and git history (where the checkout has it)
shows any later commit that touched one.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT, throwaway_cluster
from zm_roi import localdb
from zm_roi.baseline import Baseline

MIGRATIONS = ROOT / "supabase" / "migrations"
SCHEMAS = ROOT / "supabase" / "schemas"
CHECKSUMS = ROOT / "supabase" / "migrations.sha256"

# The history before the baseline is gone from supabase/migrations/ (squashed; baseline.toml names the
# commit that holds it): only commits after it can change a migration that is still here.
HISTORY_STARTS_AFTER = Baseline.read(ROOT).old_history_commit

# What pg_dump does not show: the roles the migrations create, the scheduled job and the seeded rows
# (as seeded: not what pg_cron's jobs write into them afterwards).
FACTS = {
    "roles": """
        select r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
               r.rolreplication, r.rolbypassrls, r.rolconnlimit,
               array(select g.rolname from pg_auth_members m join pg_roles g on g.oid = m.roleid
                     where m.member = r.oid order by 1) as member_of
        from pg_roles r where r.rolname !~ '^pg_' order by r.rolname""",
    "cron jobs": "select jobname, schedule, command, database, username from cron.job order by jobname",
    "roi.settings": "select to_jsonb(s) from roi.settings s",
    "roi.work_kinds": "select to_jsonb(k) from roi.work_kinds k order by k.kind",
    # last_run_at is written by the upkeep job itself once the cluster lives through a minute's turn.
    "roi.upkeep_state": "select to_jsonb(u) - 'last_run_at' from roi.upkeep_state u",
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


def named_hunks(expected: list[str], diff) -> list[str]:
    """The unified diff with each hunk header followed by the object it is in (pg_dump's `-- Name:`
    line), so a change deep inside a long function body still says which function."""
    out = []
    for line in diff:
        out.append(line)
        if line.startswith("@@ -"):
            start = int(line[4:].split(",")[0].split(" ")[0])
            name = next((e for e in reversed(expected[: start + 3]) if e.startswith("-- Name: ")), None)
            if name:
                out.append(f"   (in {name[len('-- Name: ') :]})")
    return out


def facts(cluster: localdb.Cluster) -> dict[str, list[tuple]]:
    with psycopg.connect(cluster.url()) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in FACTS.items()}


def test_schema_files_build_the_database_the_migrations_build(both_builds):
    from_migrations, from_schemas = both_builds
    expected, actual = schema_dump(from_migrations), schema_dump(from_schemas)
    assert any("CREATE FUNCTION public.benchmark_memory()" in line for line in expected), "the dump is empty"
    labels = ("built from supabase/migrations", "built from supabase/schemas")
    diff = "\n".join(named_hunks(expected, difflib.unified_diff(expected, actual, *labels, n=4, lineterm="")))
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


# ---- migrations are immutable once merged --------------------------------------------------------


def recorded_checksums() -> dict[str, str]:
    """supabase/migrations.sha256, in `sha256sum` format: `<hex>  <file name>` per line."""
    recorded = {}
    for line in CHECKSUMS.read_text().splitlines():
        digest, name = line.split("  ", 1)
        recorded[name] = digest
    return recorded


def test_every_migration_matches_its_recorded_checksum():
    recorded = recorded_checksums()
    changed = [
        path.name
        for path in sorted(MIGRATIONS.glob("*.sql"))
        if path.name in recorded and hashlib.sha256(path.read_bytes()).hexdigest() != recorded[path.name]
    ]
    assert not changed, (
        f"{changed} changed after their checksum was recorded: a migration is never edited once merged; "
        "put the change in a new migration (and in supabase/schemas/)"
    )
    missing = sorted(set(recorded) - {path.name for path in MIGRATIONS.glob("*.sql")})
    assert not missing, f"{missing} are recorded in {CHECKSUMS.name} but gone: a merged migration is never removed"


def test_every_migration_is_recorded():
    unrecorded = sorted(path.name for path in MIGRATIONS.glob("*.sql") if path.name not in recorded_checksums())
    assert not unrecorded, f"{unrecorded} have no checksum: run `make migration-checksums` and commit the result"


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def is_ancestor(repo: Path, commit: str, of: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", commit, of]).returncode == 0


def history_since_created(repo: Path, path: Path, since: str | None = None) -> list[str]:
    """The commits after `since` that touched `path`, newest first, back to the one that created it:
    renames are followed (renaming a landed migration changes it), but a new file git finds similar to
    another (a copy, e.g. a migration that repeats a function of supabase/schemas/) starts its own
    history."""
    commits_range = [f"{since}..HEAD"] if since else []
    log = git(
        repo,
        "log",
        "--follow",
        "--name-status",
        "--format=commit %H",
        *commits_range,
        "--",
        os.path.relpath(path, repo),
    )
    commits: list[str] = []
    for line in log.splitlines():
        if line.startswith("commit "):
            commits.append(line.split()[1])
        elif line[:1] in ("A", "C"):
            break
    return commits


def changed_after_landing(repo: Path, files: list[Path], since: str | None = None) -> list[str]:
    """Commits that changed one of `files` after it landed on main: after the first commit of main's
    first-parent history (its merges and direct commits) that contained the file's adding commit. A
    file not on main yet may still be fixed by its author; commits up to `since` are not read."""
    ref = next((r for r in ("main", "origin/main") if git(repo, "rev-parse", "--verify", "--quiet", r)), "HEAD")
    mainline = git(repo, "rev-list", "--first-parent", ref).split()
    found = []
    for path in files:
        commits = history_since_created(repo, path, since)
        if not commits:
            continue  # not committed yet
        added, later = commits[-1], commits[:-1]
        landing = next((c for c in reversed(mainline) if c == added or is_ancestor(repo, added, c)), None)
        if landing is None:
            continue
        for commit in later:
            if is_ancestor(repo, commit, landing):
                continue
            found.append(f"{path.name}: changed by {git(repo, 'log', '-1', '--format=%h %s', commit)}")
    return found


def test_no_migration_changed_after_it_landed_on_main():
    if shutil.which("git") is None or not git(ROOT, "rev-parse", "--verify", "--quiet", HISTORY_STARTS_AFTER):
        pytest.skip("no git history in this checkout (tarball or shallow clone); the checksums still apply")
    violations = changed_after_landing(ROOT, sorted(MIGRATIONS.glob("*.sql")), HISTORY_STARTS_AFTER)
    assert not violations, (
        "migrations changed after they landed on main (a database that applied the old version never gets "
        "the change; put it in a new migration and in supabase/schemas/):\n" + "\n".join(violations)
    )


def test_the_history_check_catches_an_edit_after_landing_and_forgives_one_before(tmp_path):
    """The check above can fail: in a scratch repository, a migration edited after it landed on main is
    caught, one fixed on its branch before the merge is not, and history up to a squash is not read."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"

    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout

    def commit(name: str, text: str, message: str) -> None:
        (tmp_path / name).write_text(text)
        run("add", name)
        run("commit", "-q", "-m", message)

    run("init", "-q", "-b", "main")
    commit("a.sql", "create table a ();\n", "add a")
    run("checkout", "-q", "-b", "feature")
    commit("b.sql", "create table b ();\n", "add b")
    commit("b.sql", "create table b (id int);\n", "fix b before it lands")
    run("checkout", "-q", "main")
    run("merge", "-q", "--no-ff", "-m", "land feature", "feature")
    commit("a.sql", "create table a (id int);\n", "edit a after it landed")
    files = [tmp_path / "a.sql", tmp_path / "b.sql"]

    found = changed_after_landing(tmp_path, files)
    assert len(found) == 1 and found[0].startswith("a.sql: changed by ") and "edit a after it landed" in found[0]
    assert changed_after_landing(tmp_path, files, since=run("rev-parse", "HEAD").strip()) == []
    # A new file that copies most of a landed one (git --follow calls it a copy) has a history of its own.
    commit("c.sql", "create table a (id int);\n-- and a comment\n", "add c, much like a")
    assert changed_after_landing(tmp_path, [tmp_path / "c.sql"]) == []


def _function_body(sql: str, name: str) -> str:
    start = sql.index(f"create function {name}(")
    return sql[start : sql.index("\n$$;\n", start)]


def _cte(body: str, name: str, following: str) -> str:
    """The text of CTE `name` in a recall body, up to the CTE that follows it, whitespace-normalised."""
    return " ".join(body[body.index(f"{name} as (") : body.index(f"), {following} as (")].split())


def test_the_two_semantic_legs_of_recall_read_alike():
    """The e5 leg (`semantic`) and the MiniLM leg (`minilm`) of public.recall are one function
    (roi.recall_semantic_leg) over two columns, called twice, so this holds the calls equal but for the
    column and the query embedding: a pin or a depth changed in one leg alone fails here."""
    body = _function_body((SCHEMAS / "20_recall.sql").read_text(), "public.recall")
    semantic, minilm = _cte(body, "semantic", "minilm"), _cte(body, "minilm", "fused")
    assert "'embedding_minilm', query_embedding_minilm" in minilm
    renamed = minilm.replace("embedding_minilm", "embedding").replace("minilm as (", "semantic as (")
    assert renamed == semantic, "the MiniLM leg reads other layers or rows than the e5 leg"


def test_every_schema_file_reads_on_its_own_and_stays_short():
    """One file per topic, each opening with what it holds, none longer than 600 lines: a topic that
    grows past that is cut in two (recall is three files), not left to grow."""
    for path in sorted(SCHEMAS.glob("*.sql")):
        lines = path.read_text().splitlines()
        assert len(lines) <= 600, f"{path.name}: {len(lines)} lines; cut the topic in two"
        assert lines[0].startswith("--") and lines[5].startswith("-- "), f"{path.name} has no header"
