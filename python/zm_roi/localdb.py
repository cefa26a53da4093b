"""The embedded, Supabase-compatible PostgreSQL 15 cluster.

A cluster is a folder (`pgdata/` plus a JWT secret) started with pg_cron preloaded, listening on
127.0.0.1 only. PostgreSQL refuses to run as root, so when we are root every server command runs as
the unprivileged `postgres` OS user that Debian's packages create.
"""

from __future__ import annotations

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

from zm_roi.errors import UserError
from zm_roi.queries import query

# The embedded cluster listens on 127.0.0.1 only and uses Supabase's local-development passwords.
SUPERUSER_PASSWORD = "postgres"  # noqa: S105
AUTHENTICATOR_PASSWORD = "postgres"  # noqa: S105
WORKER_PASSWORD = "roi_worker"  # noqa: S105
EMBEDDER_PASSWORD = "roi_embedder"  # noqa: S105
SERVER_USER = "postgres"
DEBIAN_PG_BINDIR = "/usr/lib/postgresql/15/bin"


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

    def url(self, user: str = "postgres", password: str = SUPERUSER_PASSWORD, dbname: str = "postgres") -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{dbname}?sslmode=disable"

    def jwt_secret(self) -> str:
        return self.jwt_secret_file.read_text().strip()

    # ---- lifecycle ---------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.pgdata / "PG_VERSION").is_file()

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
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": "''",
            "shared_preload_libraries": "'pg_cron'",
            "cron.database_name": "'postgres'",
            "max_connections": "200",
            "shared_buffers": "'256MB'",
            "logging_collector": "off",
        }
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write("\n# zm-roi embedded cluster\n")
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

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

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.home, ignore_errors=True)

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


def apply_sql_file(url: str, path: Path) -> None:
    """Run a whole SQL file in one transaction."""
    with psycopg.connect(url) as conn:
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


def prepare_database(cluster: Cluster, root: Path) -> str:
    """Compat layer, then migrations, then the local login passwords. Idempotent."""
    apply_sql_file(cluster.url(), root / "sql" / "supabase_compat.sql")
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f"alter role authenticator with login password '{AUTHENTICATOR_PASSWORD}'")
    output = push_migrations(root, cluster.url())
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        for role, password in (("roi_worker", WORKER_PASSWORD), ("roi_embedder", EMBEDDER_PASSWORD)):
            if conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone():
                conn.execute(f"alter role {role} with login password '{password}'")
    return output


def set_recall_function(url: str, name: str) -> str:
    """Point the benchmark at another recall function; the database refuses a wrong one (one line)."""
    try:
        with psycopg.connect(url) as conn:
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
    with psycopg.connect(url) as conn:
        conn.execute(query("set_extractor"), {"extractor": extractor})
