"""The embedded, Supabase-compatible PostgreSQL 15 cluster.

A cluster is a folder (`pgdata/` plus a JWT secret) started with pg_cron preloaded, listening on
127.0.0.1 only. PostgreSQL refuses to run as root, so when we are root every server command runs as
the unprivileged `postgres` OS user that Debian's packages create.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from zm_roi import baseline
from zm_roi.errors import UserError
from zm_roi.queries import query

# The embedded cluster listens on 127.0.0.1 only and uses Supabase's local-development passwords.
SUPERUSER_PASSWORD = "postgres"  # noqa: S105
AUTHENTICATOR_PASSWORD = "postgres"  # noqa: S105
WORKER_PASSWORD = "roi_worker"  # noqa: S105
EMBEDDER_PASSWORD = "roi_embedder"  # noqa: S105
SERVER_USER = "postgres"
DEBIAN_PG_BINDIR = "/usr/lib/postgresql/15/bin"
# What makes plain PostgreSQL look like Supabase (roles, auth schema), applied before the migrations;
# relative to the checkout. The Supabase CLI reads supabase/migrations only, never this folder.
COMPAT_LAYER = "supabase/compat/supabase_compat.sql"
# The mode a new embedded database starts in: offline-first, so the demo and the quick start need no
# model key. (A database built by the migrations alone starts in roi.settings' column default, llm.)
EMBEDDED_FIRST_MODE = "deterministic"
# Seconds a connection waits before giving up on a peer that accepts and never answers (the CLI also
# makes it the PGCONNECT_TIMEOUT default for the tools it starts).
CONNECT_TIMEOUT = 10

# postgresql.conf of the embedded cluster. pg_cron runs its jobs in background workers: its default,
# a libpq connection to 127.0.0.1, carries no password and scram-sha-256 refuses it, so the upkeep job
# failed every minute with "connection failed". Each running job takes one worker process, hence
# pg_cron's advice of 20 over the default 8 (parallel queries draw on the same pool).
SERVER_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "shared_preload_libraries": "'pg_cron'",
    "cron.database_name": "'postgres'",
    "cron.use_background_workers": "on",
    "max_worker_processes": "20",
    "max_connections": "200",
    "shared_buffers": "'256MB'",
    "logging_collector": "off",
}


def connect(url: str, **kwargs) -> psycopg.Connection:
    """psycopg.connect that gives up after CONNECT_TIMEOUT seconds (the CLI's, importer's, recall's and
    local transport's connections open here), unless the user chose a timeout: in the URL or in
    PGCONNECT_TIMEOUT, which libpq reads only when the connection string names none."""
    if "PGCONNECT_TIMEOUT" not in os.environ and "connect_timeout" not in conninfo_to_dict(url):
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT)
    return psycopg.connect(url, **kwargs)


def project_root() -> Path:
    """The checkout that holds `supabase/config.toml` (migrations, compat SQL, CLI)."""
    here = Path(__file__).resolve()
    for parent in [Path.cwd(), *Path.cwd().parents, *here.parents]:
        if (parent / "supabase" / "config.toml").is_file():
            return parent
    raise UserError("cannot find the zm-roi checkout (supabase/config.toml); run from inside it")


def pg_bindir() -> Path:
    """Where PostgreSQL 15's server binaries live (Debian keeps them off PATH)."""
    candidates = [os.environ.get("ZM_PG_BINDIR"), DEBIAN_PG_BINDIR]
    for candidate in candidates:
        if candidate and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    raise UserError(
        "PostgreSQL 15 server binaries not found: run `make install` "
        "(apt-get install postgresql-15 postgresql-15-cron) or set ZM_PG_BINDIR"
    )


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _as_server_user(argv: list[str]) -> list[str]:
    if not _running_as_root():
        return argv
    return ["runuser", "-u", SERVER_USER, "--", *argv]


def _grant_traverse(path: Path) -> None:
    """Let the server user walk down to `path` (a `mktemp -d` parent is mode 700)."""
    server_uid = pwd.getpwnam(SERVER_USER).pw_uid
    for parent in reversed(path.resolve().parents):
        st = parent.stat()
        if st.st_uid == server_uid or st.st_mode & 0o001:
            continue
        os.chmod(parent, st.st_mode | 0o001)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nobody listens on right now, for throwaway clusters."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Cluster:
    """One PostgreSQL cluster in `home` (data in `home/pgdata`), served on 127.0.0.1:`port`."""

    home: Path
    port: int

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def jwt_secret_file(self) -> Path:
        return self.home / "jwt_secret"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    @property
    def lock_file(self) -> Path:
        return self.home / ".zm-roi.lock"

    @contextlib.contextmanager
    def exclusive(self, waiting=lambda: None):
        """Hold the folder's lock (flock on a file inside it) while creating, starting or resetting the
        cluster: two `zm-roi db up` at once would otherwise both run initdb on one data directory. The
        second waits (after calling `waiting`), then finds the cluster the first made. The kernel drops
        the lock when the process ends, however it ends."""
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.lock_file, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waiting()
                fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def url(self, user: str = "postgres", password: str = SUPERUSER_PASSWORD, dbname: str = "postgres") -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{dbname}?sslmode=disable"

    def jwt_secret(self) -> str:
        return self.jwt_secret_file.read_text().strip()

    # ---- lifecycle ---------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.pgdata / "PG_VERSION").is_file()

    def running_port(self) -> int | None:
        """The port the postmaster in `pgdata` really listens on (line 4 of postmaster.pid), if it runs."""
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
            os.kill(int(lines[0]), 0)
            return int(lines[3])
        except (OSError, ValueError, IndexError):
            return None

    def server_version(self) -> str:
        """The version of the running postmaster, e.g. "15.18" (what it was started from, not what is installed)."""
        with connect(self.url()) as conn:
            return conn.execute("show server_version").fetchone()[0].split()[0]

    def stale_server(self) -> tuple[str, str] | None:
        """(running, installed) when the postmaster predates the installed binaries (a minor upgrade by apt
        under a running cluster): its backends then fail to load the new extension libraries."""
        running, installed = self.server_version(), installed_version()
        return None if running == installed else (running, installed)

    def restart(self) -> None:
        """Stop and start again from the installed binaries; the data stays."""
        self.stop()
        self.start()

    def serves_this_folder(self) -> bool:
        """Whether the server on `port` is this folder's own (its data directory is `pgdata`): a
        postmaster.pid can outlive its server, and its pid be reused, while another cluster takes the port."""
        try:
            with psycopg.connect(self.url(), connect_timeout=5) as conn:
                served = conn.execute(query("data_directory")).fetchone()[0]
        except psycopg.Error:
            return False
        return Path(served).resolve() == self.pgdata.resolve()

    def is_running(self) -> bool:
        if not self.exists():
            return False
        result = subprocess.run(
            _as_server_user([str(pg_bindir() / "pg_ctl"), "status", "-D", str(self.pgdata)]),
            capture_output=True,
            text=True,
        )
        return result.returncode == 0

    def create(self) -> None:
        """initdb with Supabase's superuser password, local-only access and pg_cron preloaded."""
        self.home.mkdir(parents=True, exist_ok=True)
        if _running_as_root():
            _grant_traverse(self.home)
            server = pwd.getpwnam(SERVER_USER)
            os.chown(self.home, server.pw_uid, server.pw_gid)
        if not self.jwt_secret_file.exists():
            self.jwt_secret_file.write_text(secrets.token_urlsafe(48))
            self.jwt_secret_file.chmod(0o600)
        pwfile = self.home / ".pwfile"
        pwfile.write_text(SUPERUSER_PASSWORD)
        if _running_as_root():
            os.chown(pwfile, pwd.getpwnam(SERVER_USER).pw_uid, -1)
        try:
            self._run_server_tool(
                "initdb",
                "-D",
                str(self.pgdata),
                "-U",
                "postgres",
                "--pwfile",
                str(pwfile),
                "--auth-host=scram-sha-256",
                "--auth-local=peer",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            )
        finally:
            pwfile.unlink(missing_ok=True)
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write("\n# zm-roi embedded cluster\n")
            conf.writelines(f"{key} = {value}\n" for key, value in SERVER_SETTINGS.items())

    def missing_settings(self) -> dict[str, str]:
        """SERVER_SETTINGS that this cluster's postgresql.conf does not say yet (made by an older zm-roi)."""
        written = {}
        for line in (self.pgdata / "postgresql.conf").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.strip().startswith("#"):
                written[key.strip()] = value.split("#", 1)[0].strip()
        return {key: value for key, value in SERVER_SETTINGS.items() if written.get(key) != value}

    def update_settings(self) -> bool:
        """Append what `missing_settings()` lists (the last line of a key wins); True when it wrote any."""
        missing = self.missing_settings()
        if missing:
            with open(self.pgdata / "postgresql.conf", "a") as conf:
                conf.write("\n# zm-roi embedded cluster, settings added by a later version\n")
                conf.writelines(f"{key} = {value}\n" for key, value in missing.items())
        return bool(missing)

    def start(self) -> None:
        self._check_stale_lock()
        if not _port_is_free(self.port):
            raise UserError(
                f"port {self.port} is already in use by another process: stop it, or set ZM_DB_PORT to a free port"
            )
        if _running_as_root():
            self.log_file.touch()
            os.chown(self.log_file, pwd.getpwnam(SERVER_USER).pw_uid, -1)
        self._run_server_tool(
            "pg_ctl",
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.pgdata),
            "-l",
            str(self.log_file),
            "-o",
            f"-p {self.port}",
        )
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        if self.is_running():
            self._run_server_tool("pg_ctl", "stop", "-w", "-m", mode, "-D", str(self.pgdata))

    def destroy(self, keep_lock: bool = False) -> None:
        """Stop the cluster and remove what `create()` and `start()` made; the folder itself (and
        anything else the user keeps in it) stays, and goes only when nothing else is left. A reset
        holding the folder's lock keeps its file (a new file would be a second, free lock)."""
        self.stop("immediate")
        shutil.rmtree(self.pgdata, ignore_errors=True)
        made = [self.jwt_secret_file, self.log_file, self.home / ".pwfile"]
        for path in made if keep_lock else [*made, self.lock_file]:
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty (the user's files), or already gone
            self.home.rmdir()

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise UserError(f"the database did not accept connections; see {self.log_file}") from None
                time.sleep(0.2)

    # ---- helpers -----------------------------------------------------------------------------

    def _check_stale_lock(self) -> None:
        lock = self.pgdata / "postmaster.pid"
        if not lock.exists():
            return
        pid = int(lock.read_text().splitlines()[0])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise UserError(
                f"stale lock file {lock} (process {pid} is gone): remove it and run `zm-roi db up` again"
            ) from None

    def _run_server_tool(self, tool: str, *args: str) -> None:
        argv = _as_server_user([str(pg_bindir() / tool), *args])
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise UserError(f"{tool} failed: {detail[-1] if detail else 'no output'} (log: {self.log_file})")


def installed_version() -> str:
    """The version of the installed server binaries, e.g. "15.20" (`postgres --version`)."""
    result = subprocess.run([str(pg_bindir() / "postgres"), "--version"], capture_output=True, text=True)
    # "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)"
    return result.stdout.split(")", 1)[1].split()[0] if ")" in result.stdout else result.stdout.strip()


def apply_sql_file(url: str, path: Path) -> None:
    """Run a whole SQL file in one transaction."""
    with connect(url) as conn:
        conn.execute(path.read_text())


def supabase_cli(root: Path) -> Path:
    cli = root / "node_modules" / ".bin" / "supabase"
    if not cli.exists():
        raise UserError("the Supabase CLI is not installed: run `make install` (npm ci)")
    return cli


def push_migrations(root: Path, url: str) -> str:
    """Apply pending migrations with the real Supabase CLI, exactly as against a hosted project."""
    result = subprocess.run(
        [
            str(supabase_cli(root)),
            "db",
            "push",
            "--db-url",
            url,
            "--include-all",
            "--include-roles",
            "--yes",
            "--workdir",
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise UserError(f"supabase db push failed:\n{result.stderr.strip() or result.stdout.strip()}")
    return result.stdout + result.stderr


def apply_schema_files(root: Path, url: str) -> str:
    """Build the schema from the declarative files (`supabase/schemas/*.sql`, in name order) instead of
    the migrations; tests compare the two databases."""
    for path in sorted((root / "supabase" / "schemas").glob("*.sql")):
        apply_sql_file(url, path)
    return ""


def prepare_database(
    cluster: Cluster, root: Path, migrate=push_migrations, compat: Path | None = None, say=lambda message: None
) -> str:
    """Compat layer (`compat`, default the checkout's COMPAT_LAYER), then migrations (or `migrate`, e.g.
    apply_schema_files), then the local login passwords. Idempotent. A database the old migration
    history built is first moved onto the baseline (zm_roi.baseline; `say` tells of it), or refused if
    it is older."""
    compat = compat or root / COMPAT_LAYER
    apply_sql_file(cluster.url(), compat)
    _set_login_password(cluster, "authenticator", AUTHENTICATOR_PASSWORD)
    if migrate is push_migrations and baseline.move_onto_baseline(root, cluster.url(), compat, supabase_cli(root)):
        say("moved this database onto the migration baseline: its schema was the baseline's (docs/deploy.md)")
    output = migrate(root, cluster.url())
    _set_login_password(cluster, "roi_worker", WORKER_PASSWORD)
    _set_login_password(cluster, "roi_embedder", EMBEDDER_PASSWORD)
    return output


def _set_login_password(cluster: Cluster, role: str, password: str) -> None:
    """The local login password of `role`, when the role exists (DDL takes no parameters: SQL quotes them)."""
    with connect(cluster.url(), autocommit=True) as conn:
        statement = conn.execute(query("login_password_statement"), {"role": role, "password": password}).fetchone()
        if statement:
            conn.execute(statement[0])


def set_recall_function(url: str, name: str) -> str:
    """Point the benchmark at another recall function; the database refuses a wrong one (one line)."""
    # The four SQLSTATEs are roi.resolve_recall_function's own refusals, worded for the user: errors.py's
    # mapper would call "no function public.x" a missing zm-roi schema and tell the user to migrate.
    # Everything else (no roi schema, a dropped connection) leaves here for the mapper.
    try:
        with connect(url) as conn:
            return conn.execute(query("configure_recall"), {"name": name}).fetchone()[0]
    except (
        psycopg.errors.UndefinedFunction,
        psycopg.errors.InvalidParameterValue,
        psycopg.errors.InsufficientPrivilege,
        psycopg.errors.DatatypeMismatch,
    ) as exc:
        raise UserError(exc.diag.message_primary or str(exc)) from None


def set_extractor(url: str, extractor: str) -> None:
    """Write the question/judge mode (`llm` or `deterministic`) into roi.settings."""
    with connect(url) as conn:
        conn.execute(query("set_extractor"), {"extractor": extractor})


# `zm-roi configure --max-…-usd none`: clear the cap (a flag left out leaves its cap as it is).
CLEAR = object()


def set_spending_caps(url: str, max_run: object | None, max_owner: object | None) -> None:
    """Write the caps given (a Decimal, or CLEAR for none) into roi.settings; None leaves one as it is."""
    params = {
        "set_run": max_run is not None,
        "max_run": None if max_run is CLEAR else max_run,
        "set_owner": max_owner is not None,
        "max_owner": None if max_owner is CLEAR else max_owner,
    }
    with connect(url) as conn:
        conn.execute(query("set_spending_caps"), params)


def get_spending_caps(url: str) -> tuple:
    with connect(url) as conn:
        return conn.execute(query("get_spending_caps")).fetchone()


def has_benchmark_schema(url: str) -> bool:
    """Whether the migrations ran here before (a fresh database gets its first settings)."""
    with connect(url) as conn:
        return conn.execute(query("has_benchmark_schema")).fetchone()[0]


def get_extractor(url: str) -> str:
    with connect(url) as conn:
        return conn.execute(query("get_extractor")).fetchone()[0]


def get_recall_function(url: str) -> str:
    with connect(url) as conn:
        return conn.execute(query("get_recall_function")).fetchone()[0]


def upkeep_report(url: str) -> str:
    """The pg_cron upkeep job's state and its last run's outcome, in one line."""
    with connect(url) as conn:
        if not conn.execute(query("has_pg_cron")).fetchone()[0]:
            return "pg_cron is not installed here: run `select roi.upkeep()` every minute yourself"
        job = conn.execute(query("upkeep_job")).fetchone()
    if job is None:
        return "the pg_cron job zm-roi-upkeep is not scheduled: run `zm-roi db up`"
    active, status, message, started = job
    paused = "" if active else " (the job is paused: cron.job.active = false)"
    if status is None:
        return f"scheduled every minute, no run yet{paused}"
    outcome = status if status == "succeeded" else f"{status}: {(message or 'no message').strip()}"
    return f"every minute; last run {started:%Y-%m-%d %H:%M:%S %Z} {outcome}{paused}"
