"""`zm-roi db …` on its own throwaway home: idempotent `up`, and one-line errors users can act on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT
from zm_roi import localdb


def zm(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT
    )


@pytest.fixture
def own_home():
    home = Path(tempfile.mkdtemp(prefix="zm-roi-dbup-"))
    home.chmod(0o755)
    env = {**os.environ, "ZM_DB_HOME": str(home / "db"), "ZM_DB_PORT": str(localdb.free_port())}
    for inherited in ("ZM_DB_URL", "ZM_EXTRACTOR"):
        env.pop(inherited, None)
    yield env
    localdb.Cluster(home / "db", int(env["ZM_DB_PORT"])).destroy()
    subprocess.run(["rm", "-rf", str(home)], check=False)


def migration_rows(url: str) -> list:
    with psycopg.connect(url) as conn:
        return conn.execute("select version, name from supabase_migrations.schema_migrations order by 1").fetchall()


def test_db_up_twice_changes_nothing_the_second_time(own_home):
    first = zm(own_home, "db", "up")
    assert first.returncode == 0, first.stderr
    assert "creating the embedded database" in first.stdout
    url = zm(own_home, "db", "url").stdout.strip()
    before = migration_rows(url)
    assert len(before) == len(list((ROOT / "supabase" / "migrations").glob("*.sql")))

    with psycopg.connect(url) as conn:
        assert conn.execute("select extractor from roi.settings").fetchone()[0] == "deterministic"

    second = zm({**own_home, "ZM_EXTRACTOR": "llm"}, "db", "up")
    assert second.returncode == 0, second.stderr
    assert "creating" not in second.stdout and "starting" not in second.stdout
    assert migration_rows(url) == before
    assert "extractor: llm" in second.stdout
    configured = zm(own_home, "configure", "--extractor", "deterministic")
    assert configured.returncode == 0 and configured.stdout.strip() == "extractor: deterministic"
    with psycopg.connect(url) as conn:
        assert conn.execute("select extractor from roi.settings").fetchone()[0] == "deterministic"

    # Settings stay where the user put them. Before: a plain `db up` reset LLM mode to deterministic, and
    # a bare `configure` switched to LLM mode.
    assert zm(own_home, "configure", "--extractor", "llm").returncode == 0
    again = zm(own_home, "db", "up")
    assert again.returncode == 0 and "extractor: llm" in again.stdout
    assert zm(own_home, "configure", "--extractor", "deterministic").returncode == 0
    bare = zm(own_home, "configure")
    assert bare.returncode == 0
    assert bare.stdout.splitlines() == [
        "extractor: deterministic",
        "recall function: public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)",
        "max run cost: none",
        "max owner cost per month: none",
    ], "a bare configure prints every setting it writes (before: the extractor only)"
    with psycopg.connect(url) as conn:
        assert conn.execute("select extractor from roi.settings").fetchone()[0] == "deterministic"

    status = zm(own_home, "db", "status")
    assert status.stdout.startswith("running")
    down = zm(own_home, "db", "down")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert zm(own_home, "db", "status").stdout.startswith("created, stopped")


def test_a_busy_port_is_a_one_line_error(own_home):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(own_home["ZM_DB_PORT"])))
        squatter.listen()
        result = zm(own_home, "db", "up")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "already in use" in result.stderr and "ZM_DB_PORT" in result.stderr


def test_a_stale_lock_file_is_a_one_line_error(own_home):
    assert zm(own_home, "db", "up").returncode == 0
    assert zm(own_home, "db", "down").returncode == 0
    lock = Path(own_home["ZM_DB_HOME"]) / "pgdata" / "postmaster.pid"
    lock.write_text("999999\n")
    result = zm(own_home, "db", "up")
    assert result.returncode == 2
    assert "stale lock file" in result.stderr and "remove it" in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_postgres_binaries_say_what_to_install(monkeypatch):
    monkeypatch.setattr(localdb, "DEBIAN_PG_BINDIR", "/nonexistent")
    monkeypatch.delenv("ZM_PG_BINDIR", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(localdb.UserError, match="make install"):
        localdb.pg_bindir()


def test_db_up_brings_a_cluster_made_by_an_older_version_up_to_date(own_home):
    """A cluster created before pg_cron ran in background workers gets the setting and a restart."""
    assert zm(own_home, "db", "up").returncode == 0
    url = zm(own_home, "db", "url").stdout.strip()
    conf = Path(own_home["ZM_DB_HOME"]) / "pgdata" / "postgresql.conf"
    conf.write_text("".join(line for line in conf.read_text().splitlines(True) if "use_background_workers" not in line))
    # Running with the old settings, as it would after an older zm-roi started it.
    localdb.Cluster(Path(own_home["ZM_DB_HOME"]), int(own_home["ZM_DB_PORT"])).restart()
    with psycopg.connect(url) as conn:
        assert conn.execute("show cron.use_background_workers").fetchone()[0] == "off"
        conn.execute("insert into auth.users (email) values ('kept@example.test')")

    result = zm(own_home, "db", "up")
    assert result.returncode == 0, result.stderr
    assert "restarting PostgreSQL to apply the new server settings" in result.stdout
    with psycopg.connect(url) as conn:
        assert conn.execute("show cron.use_background_workers").fetchone()[0] == "on"
        assert conn.execute("select count(*) from auth.users where email = 'kept@example.test'").fetchone()[0] == 1


def postmaster_pid(env: dict) -> int:
    return int((Path(env["ZM_DB_HOME"]) / "pgdata" / "postmaster.pid").read_text().split()[0])


def test_db_up_restarts_a_postmaster_older_than_the_installed_binaries(own_home, monkeypatch, capsys):
    """apt upgraded postgresql-15 under the running cluster (seen: 15.18 → 15.20): `db up` restarts it from
    the new binaries and keeps the data; `db status` says what to run. The upgrade is faked by reporting a
    newer installed version; the restart is the real one."""
    from zm_roi import cli

    assert zm(own_home, "db", "up").returncode == 0
    url = zm(own_home, "db", "url").stdout.strip()
    with psycopg.connect(url) as conn:
        running = conn.execute("show server_version").fetchone()[0].split()[0]
        conn.execute("insert into auth.users (email) values ('kept@example.test')")
    before = postmaster_pid(own_home)
    for name in ("ZM_DB_HOME", "ZM_DB_PORT"):
        monkeypatch.setenv(name, own_home[name])
    for name in ("ZM_DB_URL", "ZM_EXTRACTOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(localdb, "installed_version", lambda: "15.99")

    assert cli.main(["db", "status"]) == 0
    status = capsys.readouterr().out
    assert "stale: PostgreSQL 15.99 is installed since it started; run `zm-roi db up` to restart it" in status

    assert cli.main(["db", "up"]) == 0
    out = capsys.readouterr().out
    assert f"restarting PostgreSQL: it runs {running} but 15.99 is installed (the data is kept)" in out
    assert postmaster_pid(own_home) != before
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from auth.users where email = 'kept@example.test'").fetchone()[0] == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="as root the server runs as the postgres user; otherwise as you")
def test_a_home_under_private_folders_gets_search_permission_only():
    # Every other test chmods its home first; here the folders above the home are mode 700, as
    # `mktemp -d` makes them, and initdb, run as the server user (not root), must reach the home.
    top = Path(tempfile.mkdtemp(prefix="zm-roi-private-"))
    home = top / "a" / "b" / "db"
    home.parent.mkdir(mode=0o700, parents=True)
    (top / "a").chmod(0o700)
    made = localdb.Cluster(home=home, port=localdb.free_port())
    try:
        made.create()
        modes = {folder: folder.stat().st_mode & 0o777 for folder in (top, top / "a", top / "a" / "b")}
    finally:
        made.destroy()
        subprocess.run(["rm", "-rf", str(top)], check=False)
    assert modes == {folder: 0o701 for folder in modes}, "search permission for others (o+x), nothing more"


def test_db_up_on_a_running_current_database_waits_for_no_open_import(own_home):
    """Before: the compatibility SQL enabled RLS and re-created a policy on auth.users on every `db up`
    (an exclusive lock), so `db up` queued behind an import's open transaction (14.5 minutes seen) and
    every token, recall and MCP call queued behind `db up`."""
    assert zm(own_home, "db", "up").returncode == 0
    url = zm(own_home, "db", "url").stdout.strip()
    with psycopg.connect(url) as importing:
        # What an import holds until it commits: a new user's row in auth.users.
        importing.execute("insert into auth.users (email) values ('importing@example.test')")
        try:
            again = subprocess.run(
                [sys.executable, "-m", "zm_roi.cli", "db", "up"],
                capture_output=True,
                text=True,
                env=own_home,
                cwd=ROOT,
                timeout=120,
            )
        except subprocess.TimeoutExpired:
            pytest.fail("`db up` waited behind the open transaction on auth.users")
        assert again.returncode == 0, again.stderr
        assert importing.execute("select count(*) from auth.users where email = 'importing@example.test'").fetchone()
    with psycopg.connect(url) as conn:
        rls, policies = conn.execute(
            "select c.relrowsecurity, (select count(*) from pg_policy p where p.polrelid = c.oid) "
            "from pg_class c where c.oid = 'auth.users'::regclass"
        ).fetchone()
    assert (rls, policies) == (True, 1), "the own-row policy is still in force"


def test_db_reset_removes_only_the_cluster_it_made(own_home):
    """Before: `db reset --yes` deleted the whole ZM_DB_HOME folder, files the user kept there included."""
    assert zm(own_home, "db", "up").returncode == 0
    home = Path(own_home["ZM_DB_HOME"])
    kept = home / "notes.txt"
    kept.write_text("mine")
    (home / "exports").mkdir()
    (home / "exports" / "tile.html").write_text("<p>mine</p>")
    old_secret = (home / "jwt_secret").read_text()

    reset = zm(own_home, "db", "reset", "--yes")
    assert reset.returncode == 0, reset.stderr
    assert kept.read_text() == "mine" and (home / "exports" / "tile.html").read_text() == "<p>mine</p>"
    assert (home / "pgdata" / "PG_VERSION").is_file(), "a new cluster was made"
    assert (home / "jwt_secret").read_text() != old_secret, "the old tokens are void with the old cluster"
    url = zm(own_home, "db", "url").stdout.strip()
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from auth.users").fetchone()[0] == 0


def test_two_db_up_at_once_on_a_fresh_folder_take_turns(own_home):
    """Before: both ran initdb; one failed with initdb's advice to "remove or empty the data directory",
    the very database the other was creating. Now the second waits for the first, then finds it up."""
    both = [
        subprocess.Popen(
            [sys.executable, "-m", "zm_roi.cli", "db", "up"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=own_home,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    results = [(process.wait(timeout=600), *process.communicate()) for process in both]
    for code, out, err in results:
        assert code == 0, out + err
        assert "remove or empty" not in out + err
        assert "ready: postgresql://" in out
    assert sum("creating the embedded database" in out for _, out, _ in results) == 1
    assert sum("waiting for another `zm-roi db up`" in out for _, out, _ in results) == 1
