"""How the MCP tool and the dashboard reach the benchmark: always as the user named by an access token.

One interface, two ways in. On Supabase, supabase-py calls PostgREST with the anon key and the user's
token, and PostgREST does the verifying. Locally there is no PostgREST (Debian does not package it),
so `LocalTransport` does what it would: verify the token first, then connect as `authenticator` and
switch the transaction to the token's role and claims before running the one statement.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Protocol

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.pq import TransactionStatus

from zm_roi import localdb, tokens
from zm_roi.errors import AuthError, UserError, database_errors
from zm_roi.identity import act_as
from zm_roi.queries import query
from zm_roi.settings import Settings

TILE_VIEW = "roi_benchmark_tile"
RUNS_VIEW = "roi_benchmark_runs"
BREAKDOWN_VIEW = "roi_benchmark_breakdown"
COMPARISON_RPC = "roi_benchmark_comparison"


class Transport(Protocol):
    """The benchmark's public contract, called as one user. Values are plain JSON (PostgREST's shapes)."""

    def benchmark_memory(self) -> dict:
        """Call public.benchmark_memory(): {"status": generating | started | in_progress | empty, …}."""
        ...

    def benchmark_schedule(self, frequency: str) -> dict:
        """Call public.benchmark_schedule(frequency): daily, weekly or off, as the user."""
        ...

    def tile(self) -> dict | None:
        """The caller's row of public.roi_benchmark_tile, or None."""
        ...

    def runs(self) -> list[dict]:
        """The caller's rows of public.roi_benchmark_runs, newest first."""
        ...

    def breakdown(self) -> list[dict]:
        """The caller's rows of public.roi_benchmark_breakdown (every run, by kind and by scope)."""
        ...

    def comparison(self, run_id: str) -> dict | None:
        """public.roi_benchmark_comparison(run_id): the run paired with its previous comparable run."""
        ...


class ConnectionPool:
    """A few `authenticator` connections kept open between calls (psycopg_pool is not a dependency).
    Safe to share: every call runs in its own transaction and sets the role and claims transaction-
    locally, so a connection goes back with nothing of the previous caller left on it. At most `size`
    are open; a caller beyond that waits for one to come back."""

    def __init__(self, url: str, size: int = 4) -> None:
        self.url = url
        self.size = size
        self._idle: list[psycopg.Connection] = []
        self._open = 0
        self._available = threading.Condition()

    @contextmanager
    def connection(self):
        """An autocommit connection for one call (the call opens its own transaction); on an error it is
        closed instead of kept. Kept connections the server dropped meanwhile (a restart) are found by
        a `select 1` before use and replaced, so the call itself never meets one."""
        conn, reused = self._take()
        if reused:
            try:
                conn.execute("select 1")
            except psycopg.OperationalError:
                self._give_back(conn, broken=True)
                self._discard_idle()
                conn, _ = self._take()
        try:
            yield conn
        except BaseException as exc:
            # A database error may leave the session in any state; anything else (a refused token
            # after the transaction rolled back) leaves it idle and reusable.
            self._give_back(conn, broken=isinstance(exc, psycopg.Error))
            raise
        self._give_back(conn, broken=False)

    def _discard_idle(self) -> None:
        with self._available:
            dropped, self._idle = self._idle, []
            self._open -= len(dropped)
            self._available.notify_all()
        for conn in dropped:
            conn.close()

    def _take(self) -> tuple[psycopg.Connection, bool]:
        with self._available:
            while not self._idle and self._open >= self.size:
                self._available.wait()
            if self._idle:
                return self._idle.pop(), True
            self._open += 1
        try:
            return localdb.connect(self.url, autocommit=True), False
        except BaseException:
            with self._available:
                self._open -= 1
                self._available.notify()
            raise

    def _give_back(self, conn: psycopg.Connection, broken: bool) -> None:
        keep = not broken and not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        if not keep:
            conn.close()
        with self._available:
            if keep:
                self._idle.append(conn)
            else:
                self._open -= 1
            self._available.notify()


_pools: dict[str, ConnectionPool] = {}
_pools_lock = threading.Lock()


def shared_pool(url: str) -> ConnectionPool:
    """The process's pool for `url`: a long-running server (the dashboard, the MCP server) builds a
    transport per request, and each reuses these connections instead of opening its own sessions."""
    with _pools_lock:
        return _pools.setdefault(url, ConnectionPool(url))


def close_pools() -> None:
    """Close every kept connection (tests that count the sessions a call opens start from none)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool._discard_idle()


class LocalTransport:
    """psycopg to the embedded (or ZM_DB_URL) database, doing PostgREST's job per call."""

    def __init__(self, db_url: str, jwt_secret: str, token: str | None) -> None:
        self.jwt_secret = jwt_secret
        self.token = token
        # PostgREST's own login: it can become `anon` or `authenticated` and nothing more. The URL it was
        # given is only a host to reach: its (superuser) credentials are never used.
        self.authenticator_url = make_conninfo(db_url, user="authenticator", password=localdb.AUTHENTICATOR_PASSWORD)

    def claims(self) -> dict:
        """Verified claims. The signature is checked before any connection opens."""
        return tokens.verify(self.token, self.jwt_secret)

    def benchmark_memory(self) -> dict:
        return self._as_user("benchmark_memory", "/rpc/benchmark_memory")

    def benchmark_schedule(self, frequency: str) -> dict:
        return self._as_user("benchmark_schedule", "/rpc/benchmark_schedule", {"frequency": frequency})

    def tile(self) -> dict | None:
        return self._as_user("benchmark_tile", f"/{TILE_VIEW}")

    def runs(self) -> list[dict]:
        return self._as_user("benchmark_runs", f"/{RUNS_VIEW}")

    def breakdown(self) -> list[dict]:
        return self._as_user("benchmark_breakdown", f"/{BREAKDOWN_VIEW}")

    def comparison(self, run_id: str) -> dict | None:
        return self._as_user("benchmark_comparison", f"/rpc/{COMPARISON_RPC}", {"run_id": run_id})

    def _as_user(self, name: str, path: str, params: dict | None = None):
        claims = self.claims()
        with (
            database_errors(),
            shared_pool(self.authenticator_url).connection() as conn,
            conn.transaction(),
        ):
            act_as(conn, claims, path)
            # Supabase Auth only signs tokens for its users; a token for a removed user would otherwise
            # look like a user with no memories ("empty"), which is a lie. Asked as the user, through
            # authenticator: the transport never holds superuser credentials.
            if not conn.execute(query("caller_exists")).fetchone()[0]:
                raise AuthError(
                    f"the access token names user {claims['sub']}, who does not exist in this database: "
                    "mint a new one with `zm-roi token --user EMAIL`"
                )
            row = conn.execute(query(name), params).fetchone()
        return None if row is None else row[0]


class SupabaseTransport:
    """supabase-py against a Supabase project: PostgREST verifies the token and sets the claims."""

    def __init__(self, url: str, anon_key: str, token: str | None, timeout: float = 30.0) -> None:
        self.url = url
        self.anon_key = anon_key
        self.token = token
        self.timeout = timeout

    def benchmark_memory(self) -> dict:
        with self._client() as client:
            return client.rpc("benchmark_memory").execute().data

    def benchmark_schedule(self, frequency: str) -> dict:
        with self._client() as client:
            return client.rpc("benchmark_schedule", {"frequency": frequency}).execute().data

    def tile(self) -> dict | None:
        with self._client() as client:
            rows = client.table(TILE_VIEW).select("*").limit(1).execute().data
        return rows[0] if rows else None

    def runs(self) -> list[dict]:
        with self._client() as client:
            return client.table(RUNS_VIEW).select("*").order("started_at", desc=True).execute().data

    def breakdown(self) -> list[dict]:
        with self._client() as client:
            return client.table(BREAKDOWN_VIEW).select("*").execute().data

    def comparison(self, run_id: str) -> dict | None:
        with self._client() as client:
            return client.rpc(COMPARISON_RPC, {"target_run": run_id}).execute().data

    @contextmanager
    def _client(self):
        """A client for one call, carrying the user's token; API and network failures as one clear line."""
        import httpx
        from postgrest.exceptions import APIError
        from supabase import ClientOptions, SupabaseException, create_client

        # A missing, malformed or expired token fails here, before any request leaves.
        tokens.peek(self.token)
        try:
            with httpx.Client(timeout=self.timeout, follow_redirects=True) as http:
                options = ClientOptions(
                    headers={"Authorization": f"Bearer {self.token.strip()}"},
                    auto_refresh_token=False,
                    persist_session=False,
                    httpx_client=http,
                )
                yield create_client(self.url, self.anon_key, options)
        except APIError as exc:
            code = exc.code or ""
            # PGRST30x: PostgREST rejected the JWT; 28000: benchmark_memory() saw no signed-in user.
            if code.startswith("PGRST30") or code in ("28000", "401"):
                raise AuthError(f"Supabase refused the access token: {exc.message} ({code})") from None
            raise UserError(f"the Supabase API refused the call: {exc.message or 'no message'} ({code})") from None
        except httpx.HTTPError as exc:
            raise UserError(f"cannot reach {self.url}: {exc}") from None
        except SupabaseException as exc:
            raise UserError(f"SUPABASE_URL or SUPABASE_ANON_KEY is not usable: {exc.message}") from None


def local_database(config: Settings, embedded: localdb.Cluster) -> tuple[str, str]:
    """The local database's URL and the JWT secret its access tokens are signed with."""
    if config.db_url:
        if not config.jwt_secret:
            raise UserError("ZM_DB_URL is set but ZM_JWT_SECRET is not: local tokens are signed and verified with it")
        return config.db_url, config.jwt_secret
    if not embedded.jwt_secret_file.exists():
        raise UserError("the embedded database does not exist yet: run `zm-roi db up`")
    return embedded.url(), config.jwt_secret or embedded.jwt_secret()


def from_settings(config: Settings, embedded: localdb.Cluster) -> Transport:
    """Supabase when SUPABASE_URL and SUPABASE_ANON_KEY are set; otherwise ZM_DB_URL or the embedded database."""
    if config.supabase_url or config.supabase_anon_key:
        if not (config.supabase_url and config.supabase_anon_key):
            missing = "SUPABASE_ANON_KEY" if config.supabase_url else "SUPABASE_URL"
            raise UserError(f"{missing} is not set: the Supabase transport needs SUPABASE_URL and SUPABASE_ANON_KEY")
        return SupabaseTransport(config.supabase_url, config.supabase_anon_key, config.access_token)
    db_url, jwt_secret = local_database(config, embedded)
    return LocalTransport(db_url, jwt_secret, config.access_token)
