"""Odd but realistic input to every command: one line saying what is wrong and what to do, exit 2, no
traceback and no hang. Each case below printed a traceback, hung, or gave the wrong diagnosis before."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.conftest import ROOT
from tests.support import cli_subcommands
from zm_roi import localdb, settings
from zm_roi.errors import database_error

INHERITED = ("ZM_DB_URL", "ZM_DB_HOME", "ZM_DB_PORT", "ZM_ACCESS_TOKEN", "SUPABASE_URL", "SUPABASE_ANON_KEY")


def zm(*args: str, **env: str) -> subprocess.CompletedProcess:
    merged = {key: value for key, value in os.environ.items() if key not in INHERITED}
    merged.update(env)
    return subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", *args], capture_output=True, text=True, env=merged, cwd=ROOT, timeout=120
    )


def one_line_error(result: subprocess.CompletedProcess, expected: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("zm-roi: ") and result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr, result.stderr


@pytest.fixture
def jsonl(tmp_path) -> Path:
    path = tmp_path / "m.jsonl"
    path.write_text('{"title": "Pin the SDK", "body": "We pin it at 4.2.", "kind": "decision"}\n')
    return path


def test_bad_arguments_are_one_line_errors(db_url, email, jsonl, tmp_path):
    cases = [
        (["import", str(tmp_path), "--user", email], "is a directory"),
        (["import", str(jsonl), "--user", email, "--project", " "], "--project must name a project"),
        (["import", str(jsonl), "--user", " "], "is not an email address"),
        (["recall", "word " * 20_000, "--user", email], "ask in at most 2,000"),
        (["recall", "   ", "--user", email], "the question is empty"),
        (["dashboard", "--out", str(tmp_path / "missing" / "x.html")], "does not exist"),
    ]
    for args, expected in cases:
        one_line_error(zm(*args, ZM_DB_URL=db_url), expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["recall", "q", "--user", "a@b.co", "--limit", "0"], "--limit: a number of memories from 1 to 100, not '0'"),
        (["recall", "q", "--user", "a@b.co", "--limit", "99999999999"], "from 1 to 100"),
        (["token", "--user", "a@b.co", "--ttl", "99999999999999"], "--ttl: a lifetime in seconds from 1"),
        (["dashboard", "--serve", "70000"], "--serve: a port from 0 to 65,535, not '70000'"),
    ],
)
def test_numbers_out_of_range_are_refused_before_anything_runs(args, expected):
    result = zm(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert expected in result.stderr


def test_a_database_without_the_migrations_says_to_apply_them(cluster):
    """Before: `configure` on a database without the migrations printed a traceback, and
    `configure --recall-function` printed the server's bare "function roi.configure_recall… does not exist"."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("drop database if exists bare")
        conn.execute("create database bare")
    try:
        one_line_error(zm("configure", ZM_DB_URL=cluster.url(dbname="bare")), "`zm-roi db up`")
        bare = zm("configure", "--recall-function", "public.recall", ZM_DB_URL=cluster.url(dbname="bare"))
        one_line_error(bare, "lacks part of the zm-roi schema")
        assert "`zm-roi db up`" in bare.stderr
    finally:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("drop database bare with (force)")


def test_a_malformed_database_url_is_a_one_line_error():
    one_line_error(zm("configure", ZM_DB_URL="not a url"), "check ZM_DB_URL")


def test_only_a_malformed_connection_string_blames_zm_db_url(db_url):
    """Before: psycopg's ProgrammingError for a misused call (a wrong parameter count) said "check ZM_DB_URL" too."""
    for url in ("not a url", "postgresql://u@127.0.0.1/db?no_such_option=1"):
        with pytest.raises(psycopg.ProgrammingError) as caught:
            psycopg.connect(url)
        assert "check ZM_DB_URL" in str(database_error(caught.value)), url
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.ProgrammingError) as caught:
        conn.execute("select %s", (1, 2))
    misuse = str(database_error(caught.value))
    assert misuse.startswith("the database call failed: the query has 1 placeholder"), misuse
    assert "ZM_DB_URL" not in misuse


def test_a_peer_that_accepts_and_never_answers_is_given_up_on():
    """Before: the command waited forever on a listener that accepted the connection and said nothing."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"postgresql://u:p@127.0.0.1:{silent.getsockname()[1]}/db"
        started = time.monotonic()
        result = zm("recall", "anything", "--user", "a@b.co", ZM_DB_URL=url, PGCONNECT_TIMEOUT="2")
    one_line_error(result, "cannot reach the database")
    assert time.monotonic() - started < 60


def test_the_embedded_commands_never_write_to_whatever_else_listens_on_the_port(cluster, jsonl, tmp_path):
    """Before: with no embedded database in ZM_DB_HOME, `import` wrote into the cluster that happened to
    listen on ZM_DB_PORT (another checkout's, on a shared machine)."""
    env = {"ZM_DB_HOME": str(tmp_path / "db"), "ZM_DB_PORT": str(cluster.port)}
    result = zm("import", str(jsonl), "--user", "stray@example.test", **env)
    one_line_error(result, "there is no embedded database in")
    assert "run `zm-roi db up`" in result.stderr
    with psycopg.connect(cluster.url()) as conn:
        assert conn.execute("select count(*) from auth.users where email = 'stray@example.test'").fetchone()[0] == 0


def test_database_errors_say_what_they_mean(cluster, db_url):
    """The one mapper: a library the server cannot load (what apt's upgrade under a running server
    causes) says to restart it; the parser's stack overflow is a too-large request, not "cannot reach"."""
    # The server's OS user must read it, so not pytest's private tmp_path.
    with tempfile.TemporaryDirectory(prefix="zm-roi-lib-") as folder:
        Path(folder).chmod(0o755)
        fake = Path(folder) / "plpgsql.so"
        fake.write_text("not a shared object")
        fake.chmod(0o644)
        with psycopg.connect(db_url, autocommit=True) as conn, pytest.raises(psycopg.Error) as caught:
            conn.execute(sql.SQL("load {}").format(sql.Literal(str(fake))))
        stale = str(database_error(caught.value))
    with psycopg.connect(db_url, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("select count(*) from public.recall(%s)", ("word " * 20_000,))
        deep = str(database_error(caught.value))
    assert "could not load library" in stale and "`zm-roi db up`" in stale and "restart" in stale
    assert deep.startswith("the request is too large for the database"), deep
    assert "cannot reach" not in deep


def test_db_status_reports_the_port_the_cluster_really_runs_on(cluster):
    """Before: it printed ZM_DB_PORT, whatever port the cluster was started on. (`db down` reads the
    port the same way; it is not run here, as this is the session's shared cluster.)"""
    env = {"ZM_DB_HOME": str(cluster.home), "ZM_DB_PORT": str(localdb.free_port())}
    status = zm("db", "status", **env)
    assert status.returncode == 0 and f"on 127.0.0.1:{cluster.port} " in status.stdout


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("ZM_MODEL_TIMEOUT_SECONDS", "inf", "ZM_MODEL_TIMEOUT_SECONDS must be a positive number of seconds"),
        ("ZM_WORKER_POLL_SECONDS", "nan", "ZM_WORKER_POLL_SECONDS must be a positive number of seconds"),
        ("ZM_DB_PORT", "70000", "ZM_DB_PORT must be a port number"),
        ("ZM_EXTRACTOR", "gpt", "ZM_EXTRACTOR must be one of llm, deterministic"),
    ],
)
def test_malformed_settings_are_one_line_errors(name, value, expected):
    """Before: "inf" and "nan" were accepted as timeouts (a call that never times out)."""
    one_line_error(zm("configure", **{name: value}), expected)


def test_an_empty_port_setting_means_the_default():
    assert settings.load({"ZM_DB_PORT": " "}).db_port == settings.DEFAULT_PORT


def test_recall_in_a_misspelt_project_suggests_the_near_name(db_url, email, jsonl):
    project = f"atlas-{email[5:13]}"
    assert zm("import", str(jsonl), "--user", email, "--project", project, ZM_DB_URL=db_url).returncode == 0
    result = zm("recall", "sdk", "--user", email, "--project", project.upper(), ZM_DB_URL=db_url)
    one_line_error(result, f"no project named {project.upper()!r}; did you mean {project!r}?")


def test_connections_give_up_after_ten_seconds_unless_the_user_chose_a_timeout(db_url, monkeypatch):
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    with localdb.connect(db_url) as conn:
        assert "connect_timeout=10" in conn.info.dsn.split()
    with localdb.connect(f"{db_url}&connect_timeout=4") as conn:
        assert "connect_timeout=4" in conn.info.dsn.split(), "the URL's own timeout is kept"
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "3")
    with localdb.connect(db_url) as conn:
        assert "connect_timeout=3" in conn.info.dsn.split(), "and so is the environment's"


def test_a_missing_database_or_a_remote_host_is_not_told_to_run_db_up(db_url, cluster):
    """Before: both said "is it up? try `zm-roi db up`", which only manages the embedded database."""
    missing = zm("recall", "anything", "--user", "a@b.co", ZM_DB_URL=cluster.url(dbname="no_such_db"))
    one_line_error(missing, "has no database 'no_such_db'")
    assert "db up" not in missing.stderr and "ZM_DB_URL" in missing.stderr
    # TEST-NET-1 (RFC 5737): an address no server answers on.
    remote = zm(
        "recall", "anything", "--user", "a@b.co", ZM_DB_URL="postgresql://u:p@192.0.2.1:5432/db", PGCONNECT_TIMEOUT="2"
    )
    one_line_error(remote, "cannot reach the database at 192.0.2.1:5432")
    assert "db up" not in remote.stderr and "check the host and port in ZM_DB_URL" in remote.stderr
    local = zm(
        "recall", "anything", "--user", "a@b.co", ZM_DB_URL=f"postgresql://u:p@127.0.0.1:{localdb.free_port()}/db"
    )
    one_line_error(local, "`zm-roi db up`")


def test_recall_pins_to_a_team_as_a_team_probe_is_pinned(db_url, email, tmp_path):
    """Before: `recall` had --project but no --team, so a team-pinned probe's recall could not be checked."""
    team, project = f"crew-{email[5:13]}", f"side-{email[5:13]}"
    team_file, project_file = tmp_path / "team.jsonl", tmp_path / "project.jsonl"
    team_file.write_text('{"title": "Deploy window", "body": "We deploy on Tuesdays only.", "kind": "convention"}\n')
    project_file.write_text('{"title": "Deploy freeze", "body": "No deploy in December.", "kind": "decision"}\n')
    assert zm("import", str(team_file), "--user", email, "--team", team, ZM_DB_URL=db_url).returncode == 0
    assert zm("import", str(project_file), "--user", email, "--project", project, ZM_DB_URL=db_url).returncode == 0

    pinned = zm("recall", "deploy", "--user", email, "--team", team, "--json", ZM_DB_URL=db_url)
    assert pinned.returncode == 0, pinned.stderr
    assert [(hit["title"], hit["scope"]) for hit in json.loads(pinned.stdout)] == [("Deploy window", "team")]
    everything = zm("recall", "deploy", "--user", email, "--json", ZM_DB_URL=db_url)
    assert {hit["title"] for hit in json.loads(everything.stdout)} == {"Deploy window", "Deploy freeze"}
    one_line_error(
        zm("recall", "deploy", "--user", email, "--team", team.upper(), ZM_DB_URL=db_url),
        f"no team named {team.upper()!r}; did you mean {team!r}?",
    )
    both = zm("recall", "deploy", "--user", email, "--team", team, "--project", project, ZM_DB_URL=db_url)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_the_extractor_default_has_one_home_the_database():
    """Before: `llm` was the default in roi.settings and again in settings.py, while `db up` wrote
    `deterministic`. Unset, ZM_EXTRACTOR now means "keep the database's mode"; the two starting modes
    are the column default and localdb.EMBEDDED_FIRST_MODE, each stated in docs/configuration.md."""
    assert settings.load({}).extractor is None
    assert settings.load({"ZM_EXTRACTOR": " LLM "}).extractor == "llm"
    schema = (ROOT / "supabase" / "schemas" / "30_roi_probes_runs_and_work.sql").read_text()
    column_default = re.search(r"extractor text not null default '(\w+)'", schema).group(1)
    configuration = (ROOT / "docs" / "configuration.md").read_text()
    row = next(line for line in configuration.splitlines() if line.startswith("| `ZM_EXTRACTOR`"))
    assert f"`{localdb.EMBEDDED_FIRST_MODE}`, `localdb.EMBEDDED_FIRST_MODE`" in row
    assert f"`supabase db push`: `{column_default}`, the column default" in row


@pytest.mark.parametrize(
    "args",
    [["db", "url"], ["worker", "--once"], ["embed"], ["token", "--user", "a@b.co"], ["configure"]],
    ids=lambda args: " ".join(args),
)
def test_no_command_hands_out_or_uses_a_cluster_it_did_not_start(cluster, tmp_path, args):
    """Before: with no database in ZM_DB_HOME, `db url` printed the URL of whatever listened on ZM_DB_PORT
    (another user's cluster) and exited 0, and `worker --once` and `embed` logged into it."""
    env = {
        "ZM_DB_HOME": str(tmp_path / "db"),
        "ZM_DB_PORT": str(cluster.port),
        "ZM_EMBEDDING_MODEL": "openai/text-embedding-3-small",
    }
    result = zm(*args, **env)
    one_line_error(result, f"there is no embedded database in {tmp_path / 'db'} yet: run `zm-roi db up`")
    assert str(cluster.port) not in result.stdout


def test_a_cluster_folder_whose_server_is_not_the_one_listening_is_refused(cluster, tmp_path):
    """A folder that looks like a running cluster (its postmaster.pid names a live process and the port)
    while the server on that port serves another data directory: nothing is handed out or used."""
    home = tmp_path / "db"
    (home / "pgdata").mkdir(parents=True)
    (home / "pgdata" / "PG_VERSION").write_text("15\n")
    (home / "jwt_secret").write_text("not-the-other-clusters-secret")
    pid = (Path(cluster.pgdata) / "postmaster.pid").read_text().splitlines()
    (home / "pgdata" / "postmaster.pid").write_text(
        "\n".join([str(os.getpid()), str(home / "pgdata"), *pid[2:]]) + "\n"
    )
    env = {"ZM_DB_HOME": str(home), "ZM_DB_PORT": str(localdb.free_port())}
    for args in (["db", "url"], ["worker", "--once"], ["configure"]):
        result = zm(*args, **env)
        one_line_error(result, f"the server on 127.0.0.1:{cluster.port} is not the database in {home}")
        assert str(cluster.port) not in result.stdout


def test_dashboard_out_needs_a_file_name(tmp_path):
    """Before: `--out ""` fell through to the server branch and ended in a TypeError traceback."""
    one_line_error(zm("dashboard", "--out", ""), "--out needs a file name, not an empty string")
    one_line_error(zm("dashboard", "--out", str(tmp_path)), f"{tmp_path} is a folder: --out needs a file name")


@pytest.mark.parametrize("option", ["--project", "--team"])
def test_a_name_over_the_limit_is_refused_before_the_database_refuses_it(db_url, email, jsonl, option):
    """Before: a 3,000-character project or team ended in PostgreSQL's "index row size … exceeds btree
    version 4 maximum 2704" (while 100,000 repeated characters passed, because they compress)."""
    result = zm("import", str(jsonl), "--user", email, option, "Ω" * 3000, ZM_DB_URL=db_url)
    one_line_error(result, f"{option} has 3,000 characters; a name has at most 200")
    assert zm("import", str(jsonl), "--user", email, option, "n" * 200, ZM_DB_URL=db_url).returncode == 0


def test_an_email_over_the_limit_is_refused_before_the_database_refuses_it(db_url, jsonl):
    address = "x" * 3000 + "@example.test"
    result = zm("import", str(jsonl), "--user", address, ZM_DB_URL=db_url)
    one_line_error(result, "the email address has 3,013 characters; an address has at most 254")


def test_the_database_holds_the_name_limits_on_every_path(conn):
    """The same limits as check constraints, for paths that do not go through the CLI."""
    for table in ("public.projects", "public.teams"):
        with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
            conn.execute(sql.SQL("insert into {} (name) values (%s)").format(sql.SQL(table)), ("n" * 201,))
    with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
        conn.execute("insert into auth.users (email) values (%s)", ("x" * 250 + "@e.test",))


def test_a_line_nested_deeper_than_the_reader_goes_is_refused_with_its_number(db_url, email, tmp_path):
    """Before: a JSON line nested 3,000 deep ended in a RecursionError traceback."""
    path = tmp_path / "deep.jsonl"
    path.write_text('{"title": "ok", "body": "fine", "kind": "decision"}\n{"title": ' + "[" * 3000 + "]" * 3000 + "}\n")
    one_line_error(zm("import", str(path), "--user", email, ZM_DB_URL=db_url), f"{path}:2: nested too deeply to read")


def test_an_email_with_a_dotted_capital_i_is_found_by_every_command(db_url, jsonl):
    """Before: import created `İlker@…` (Python lower-cases İ to i + U+0307) and `token` looked it up with
    PostgreSQL's lower() (which gives a plain i): "no user"."""
    address = f"İlker-{os.urandom(4).hex()}@Example.test"
    assert zm("import", str(jsonl), "--user", address, ZM_DB_URL=db_url).returncode == 0
    minted = zm("token", "--user", address, ZM_DB_URL=db_url, ZM_JWT_SECRET="s" * 40)
    assert minted.returncode == 0, minted.stderr
    recalled = zm("recall", "sdk", "--user", f" {address.upper()} ", "--json", ZM_DB_URL=db_url)
    assert recalled.returncode == 0, recalled.stderr
    assert [hit["title"] for hit in json.loads(recalled.stdout)] == ["Pin the SDK"]


@pytest.mark.parametrize("option", ["--project", "--team"])
def test_recall_trims_a_name_as_import_does(db_url, email, jsonl, option):
    """Before: import trimmed ' name ' and recall looked for it with the spaces: "no project named"."""
    name = f"trim-{email[5:13]}"
    assert zm("import", str(jsonl), "--user", email, option, f" {name} ", ZM_DB_URL=db_url).returncode == 0
    recalled = zm("recall", "sdk", "--user", email, option, f"  {name} ", "--json", ZM_DB_URL=db_url)
    assert recalled.returncode == 0, recalled.stderr
    assert [hit["title"] for hit in json.loads(recalled.stdout)] == ["Pin the SDK"]


def test_output_into_a_pipe_whose_reader_has_gone_ends_quietly(db_url, email, jsonl):
    """`zm-roi recall … | head -1`: before, the rest of the output met a closed pipe and the command said
    "zm-roi: Broken pipe" and exited 2. Now it stops quietly, as a Unix tool killed by SIGPIPE (141)."""
    assert zm("import", str(jsonl), "--user", email, ZM_DB_URL=db_url).returncode == 0
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write meets a closed pipe
    merged = {key: value for key, value in os.environ.items() if key not in INHERITED}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "zm_roi.cli", "recall", "sdk", "--user", email, "--json"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**merged, "ZM_DB_URL": db_url},
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.stderr == "", result.stderr
    assert result.returncode == 141


@pytest.mark.parametrize(
    ("setting", "args"),
    [("ZM_WORKER_DB_URL", ["worker", "--once"]), ("ZM_EMBEDDER_DB_URL", ["embed"])],
)
def test_a_malformed_url_is_blamed_on_the_setting_the_user_set(setting, args):
    """Before: a malformed ZM_WORKER_DB_URL (or ZM_EMBEDDER_DB_URL) said "check ZM_DB_URL", which was not set."""
    result = zm(*args, **{setting: "garbage", "ZM_EMBEDDING_MODEL": "openai/text-embedding-3-small"})
    one_line_error(result, "the database connection settings are not usable")
    assert f"check {setting}" in result.stderr and "ZM_DB_URL" not in result.stderr.replace(setting, "")
    unreachable = zm(
        *args, **{setting: "postgresql://u:p@127.0.0.1:1/db", "ZM_EMBEDDING_MODEL": "openai/text-embedding-3-small"}
    )
    one_line_error(unreachable, "cannot reach the database at 127.0.0.1:1")
    assert f"fix {setting}" in unreachable.stderr and "ZM_DB_URL" not in unreachable.stderr.replace(setting, "")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["configure", "--recall-function", ""], "--recall-function needs a function name, not a blank"),
        (["judge-check", "--model", ""], "--model needs a model name, not a blank"),
    ],
)
def test_an_empty_option_value_is_refused_not_read_as_no_option(db_url, args, expected):
    """Before: `configure --recall-function ""` printed the settings as a bare `configure` does, and
    `judge-check --model ""` checked ZM_JUDGE_MODEL: the value the user gave was silently dropped."""
    one_line_error(zm(*args, ZM_DB_URL=db_url), expected)


# Every command, failing: (arguments, settings) that make it fail without a database to reach. The
# database URL names a port nobody listens on; ZM_DB_HOME an empty folder. `mcp` is left out: it
# starts whatever the settings say and reports each failure to the agent as a tool error
# (tests/e2e/test_mcp.py).
UNREACHABLE = "postgresql://u:p@127.0.0.1:1/postgres"
FAILING = {
    "db": (["db", "url"], {}),
    "configure": (["configure"], {"ZM_DB_URL": UNREACHABLE}),
    "import": (["import", "{file}", "--user", "a@b.co"], {"ZM_DB_URL": UNREACHABLE}),
    "recall": (["recall", "sdk", "--user", "a@b.co"], {"ZM_DB_URL": UNREACHABLE}),
    "schedule": (["schedule", "--daily", "--user", "a@b.co"], {"ZM_DB_URL": UNREACHABLE}),
    "embed": (["embed"], {"ZM_DB_URL": UNREACHABLE, "ZM_EMBEDDING_MODEL": "openai/text-embedding-3-small"}),
    "token": (["token", "--user", "a@b.co"], {"ZM_DB_URL": UNREACHABLE, "ZM_JWT_SECRET": "s" * 40}),
    "dashboard": (["dashboard", "--out", "{folder}/tile.html"], {"ZM_DB_URL": UNREACHABLE}),
    "gate": (["gate", "--min-rate", "0.5"], {"ZM_DB_URL": UNREACHABLE}),
    "worker": (["worker", "--once"], {"ZM_WORKER_DB_URL": UNREACHABLE}),
    "judge-check": (["judge-check", "--model", "openai/gpt-4o-mini"], {"OPENAI_API_KEY": ""}),
    "set-key": (["set-key", "--user", "a@b.co"], {"ZM_DB_URL": UNREACHABLE, "ZM_KEY_ENCRYPTION_KEY": ""}),
    "demo": (["demo"], {"ZM_DB_PORT": "not-a-port"}),
    # A model home of the test's own, so a server left up in the checkout's .zm/model cannot answer.
    "model": (["model", "url"], {"ZM_MODEL_HOME": "{folder}/model"}),
}
# What a sentence that names the fix says: what to run, set, fix, check, give or see, or what a
# setting must be.
NAMES_A_FIX = re.compile(
    r"\b(run|set|fix|check|give|see|pass|import|start|stop|use|remove|create|name|apply|make|choose|ask|must|needs)\b"
)


def subcommands() -> list[str]:
    return sorted(cli_subcommands())


def zm_in(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The CLI run from `folder` with an empty ZM_DB_HOME inside it and only the settings given."""
    merged = {key: value for key, value in os.environ.items() if key not in INHERITED}
    merged.update({"ZM_DB_HOME": str(folder / "home"), **env})
    return subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", *args],
        capture_output=True,
        text=True,
        env=merged,
        cwd=folder,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_every_command_has_a_failure_case():
    assert sorted([*FAILING, "mcp"]) == subcommands(), "a new command needs its failure case in FAILING"


@pytest.mark.parametrize("command", sorted(FAILING))
def test_every_command_fails_in_one_sentence_that_names_the_fix_and_writes_nothing(command, tmp_path, jsonl):
    args, env = FAILING[command]
    folder = tmp_path / "work"
    folder.mkdir()
    args = [arg.format(file=jsonl, folder=folder) for arg in args]
    env = {key: value.format(folder=folder) for key, value in env.items()}
    result = zm_in(folder, *args, **env)
    assert result.returncode != 0, f"zm-roi {command} failed with exit 0: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("zm-roi: ") and result.stderr.count("\n") == 1, result.stderr
    assert NAMES_A_FIX.search(result.stderr), f"zm-roi {command} says what failed but not what to do: {result.stderr}"
    assert list(folder.iterdir()) == [], f"zm-roi {command} failed and still wrote {list(folder.iterdir())}"


@pytest.mark.parametrize("command", subcommands())
def test_a_refused_command_line_is_one_sentence_that_names_the_fix(command, tmp_path):
    for args in ([command, "--no-such-flag"], [command, "--user"]):
        result = zm_in(tmp_path, *args)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.startswith("zm-roi: ") and result.stderr.count("\n") == 1, result.stderr
        assert "--help`)" in result.stderr, result.stderr


def test_the_page_lands_in_the_file_named_and_a_symlink_there_is_replaced_not_followed(cluster, email, tmp_path):
    """Before: `--out FILE` wrote through a symlink at FILE to wherever it pointed."""
    from tests.support import benchmark_user, knowledge

    outside, folder = tmp_path / "outside", tmp_path / "named"
    outside.mkdir()
    folder.mkdir()
    (outside / "keep.txt").write_text("the user's own file")
    (folder / "tile.html").symlink_to(outside / "keep.txt")
    env = {"ZM_DB_URL": cluster.url(), "ZM_JWT_SECRET": cluster.jwt_secret()}
    with benchmark_user(cluster, email, knowledge(2)) as me:
        wrote = zm_in(tmp_path, "dashboard", "--out", str(folder / "tile.html"), ZM_ACCESS_TOKEN=me.token, **env)
    assert wrote.returncode == 0, wrote.stderr
    assert (outside / "keep.txt").read_text() == "the user's own file", "the page went through the symlink"
    assert not (folder / "tile.html").is_symlink() and 'data-state="invite"' in (folder / "tile.html").read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["tile.html"], "no temporary file is left beside the page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["named", "outside"], "nothing else written"


def test_a_name_typed_with_a_combining_accent_finds_the_one_typed_precomposed(db_url, email, jsonl):
    """NFC in one place: import with `Café` (é precomposed), recall with `Cafe\u0301` (e + combining acute)."""
    name = f"Café-{email[5:13]}"
    assert zm("import", str(jsonl), "--user", email, "--project", name, ZM_DB_URL=db_url).returncode == 0
    decomposed = unicodedata.normalize("NFD", name)
    assert decomposed != name
    recalled = zm("recall", "sdk", "--user", email, "--project", decomposed, "--json", ZM_DB_URL=db_url)
    assert recalled.returncode == 0, recalled.stderr
    assert [hit["title"] for hit in json.loads(recalled.stdout)] == ["Pin the SDK"]
