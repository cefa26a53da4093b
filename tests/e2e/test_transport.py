"""The two transports: the local one verifies the token before any SQL and then acts exactly as
PostgREST would; the Supabase one sends the request PostgREST expects (checked on a recorded exchange)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import psycopg
import pytest

from tests.conftest import ROOT
from tests.support import benchmark_user, extractor, knowledge
from zm_roi import localdb, settings, tokens, transport
from zm_roi.errors import AuthError, UserError
from zm_roi.identity import act_as, claims_for
from zm_roi.transport import LocalTransport, SupabaseTransport


@pytest.fixture
def connections(monkeypatch):
    """Every psycopg connection opened during the test, by the role it logs in as (from no kept ones)."""
    transport.close_pools()
    opened: list[str] = []
    real_connect = psycopg.connect

    def spy(conninfo, *args, **kwargs):
        opened.append(psycopg.conninfo.conninfo_to_dict(conninfo).get("user", "?"))
        return real_connect(conninfo, *args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", spy)
    return opened


def claims(**overrides) -> dict:
    now = int(time.time())
    base = {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated", "iat": now, "exp": now + 600}
    return {k: v for k, v in (base | overrides).items() if v is not None}


def bad_tokens(secret: str) -> dict[str, tuple[str | None, str]]:
    """Token → the phrase its refusal must contain."""
    return {
        "missing": (None, "no access token"),
        "blank": ("  ", "no access token"),
        "malformed": ("not-a-jwt", "not a valid JWT"),
        "garbage segments": ("abc.def.ghi", "not a valid JWT"),
        "expired": (jwt.encode(claims(exp=int(time.time()) - 60), secret, algorithm="HS256"), "expired"),
        "wrong secret": (jwt.encode(claims(), "another-secret-of-sufficient-length!", algorithm="HS256"), "signature"),
        "unsigned (alg none)": (jwt.encode(claims(), None, algorithm="none"), "not signed with HS256"),
        "other algorithm": (jwt.encode(claims(), secret, algorithm="HS512"), "not signed with HS256"),
        "no exp": (jwt.encode(claims(exp=None), secret, algorithm="HS256"), "'exp'"),
        "wrong audience": (jwt.encode(claims(aud="service"), secret, algorithm="HS256"), "audience"),
        "anon role": (jwt.encode(claims(role="anon"), secret, algorithm="HS256"), "'anon'"),
        "service role": (jwt.encode(claims(role="service_role"), secret, algorithm="HS256"), "'service_role'"),
        "sub not a uuid": (jwt.encode(claims(sub="admin"), secret, algorithm="HS256"), "not a user id"),
    }


CASES = list(bad_tokens("x" * 64))


@pytest.mark.parametrize("case", CASES)
def test_a_bad_token_is_refused_before_any_sql(cluster, connections, case):
    token, phrase = bad_tokens(cluster.jwt_secret())[case]
    local = LocalTransport(cluster.url(), cluster.jwt_secret(), token)
    for call in (local.benchmark_memory, local.tile, local.runs):
        with pytest.raises(AuthError, match=phrase):
            call()
    assert connections == [], "a refused token must not open a single connection"


def test_a_token_for_a_user_who_does_not_exist_is_refused_before_the_benchmark(cluster, connections):
    ghost = str(uuid.uuid4())
    local = LocalTransport(cluster.url(), cluster.jwt_secret(), tokens.mint(cluster.jwt_secret(), ghost))
    with pytest.raises(AuthError, match="does not exist"):
        local.benchmark_memory()
    # The lookup ran as the (absent) user through authenticator, and the benchmark never ran.
    assert connections == ["authenticator"]
    with psycopg.connect(cluster.url()) as conn:
        assert conn.execute("select count(*) from roi.runs where owner_id = %s", (ghost,)).fetchone()[0] == 0


def test_the_local_transport_acts_as_the_token_user_through_authenticator(cluster, email, connections):
    with (
        extractor(cluster.url(), "deterministic"),
        benchmark_user(cluster, email, knowledge(4)) as me,
        benchmark_user(cluster, "other-" + email, knowledge(3)) as other,
    ):
        LocalTransport(cluster.url(), cluster.jwt_secret(), other.token).benchmark_memory()
        transport.close_pools()
        connections.clear()
        local = LocalTransport(cluster.url(), cluster.jwt_secret(), me.token)
        before = local.tile()
        started = local.benchmark_memory()
        tile = local.tile()
        runs = local.runs()
        breakdown = local.breakdown()
        opened = list(connections)
    # PostgREST's login, never the superuser, carries the user's calls and the lookup before each: one
    # kept session for the five calls, one after another (before the pool: five sessions).
    assert opened == ["authenticator"]
    assert (before["state"], before["exclusive_rate"], before["trend"]) == ("invite", None, [])
    assert started["status"] == "started" and started["probes"] == 4
    assert tile["state"] == "ready" and tile["latest_run_id"] == started["run_id"]
    # Four memories, each found by its own title: 4 of 4, Wilson 95% from 4 / (4 + 1.96²) = 0.5101 to 1.
    assert (tile["judged_count"], tile["exclusive_count"]) == (4, 4)
    assert (tile["exclusive_rate"], tile["exclusive_rate_low"], tile["exclusive_rate_high"]) == (1, 0.5101, 1)
    assert isinstance(tile["latest_run_at"], str)  # the JSON shapes PostgREST sends, not Python objects
    assert [run["run_id"] for run in runs] == [started["run_id"]], "the other user's run is not visible"
    assert {row["run_id"] for row in breakdown} == {started["run_id"]}
    assert sum(row["judged_count"] for row in breakdown if row["dimension"] == "kind") == 4


def test_the_local_transport_holds_no_superuser_credentials(cluster, email):
    # Given a database URL whose superuser password is wrong, everything still works: the transport
    # only ever logs in as authenticator. Before, the user lookup connected with the superuser URL.
    wrong_superuser = cluster.url(password="not-the-superuser-password")
    with (
        extractor(cluster.url(), "deterministic"),
        benchmark_user(cluster, email, knowledge(3)) as me,
        benchmark_user(cluster, "other-" + email, knowledge(2, prefix="Secret ")) as other,
    ):
        local = LocalTransport(wrong_superuser, cluster.jwt_secret(), me.token)
        assert local.benchmark_memory()["status"] == "started"
        assert local.tile()["state"] == "ready"
        ghost = LocalTransport(
            wrong_superuser, cluster.jwt_secret(), tokens.mint(cluster.jwt_secret(), str(uuid.uuid4()))
        )
        with pytest.raises(AuthError, match="does not exist"):
            ghost.tile()

        # What that login can do: not a superuser, cannot become one, reads nothing by itself, and as a
        # user reads only that user's memories and own auth.users row.
        with psycopg.connect(local.authenticator_url) as conn:
            whoami = "select current_user, rolsuper, rolbypassrls from pg_roles where rolname = current_user"
            assert conn.execute(whoami).fetchone() == ("authenticator", False, False)
            # It may become anon or authenticated, nothing else: not the superuser, not service_role
            # (which bypasses RLS), not the worker.
            for forbidden in ("postgres", "service_role", "roi_worker"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(f"set local role {forbidden}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute("select count(*) from public.memories")
            with conn.transaction():
                act_as(conn, claims_for(me.id))
                authors = {row[0] for row in conn.execute("select author_id from public.memories")}
                users = [row[0] for row in conn.execute("select id from auth.users")]
            assert authors == {me.id} and users == [me.id], "only the user's own rows, never the other's"
            assert other.id not in authors


def test_a_session_token_minted_by_the_cli_is_a_supabase_style_access_token(cluster, email):
    env = {**os.environ, "ZM_DB_URL": cluster.url(), "ZM_JWT_SECRET": cluster.jwt_secret()}
    with benchmark_user(cluster, email) as me:
        minted = subprocess.run(
            [sys.executable, "-m", "zm_roi.cli", "token", "--user", email, "--ttl", "120"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert minted.returncode == 0, minted.stderr
        token = minted.stdout.strip()
        decoded = tokens.verify(token, cluster.jwt_secret())
        assert decoded["sub"] == str(me.id) and decoded["email"] == email
        assert decoded["role"] == "authenticated" and decoded["aud"] == "authenticated"
        assert decoded["exp"] - decoded["iat"] == 120
        assert LocalTransport(cluster.url(), cluster.jwt_secret(), token).tile()["state"] == "invite"
    unknown = subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", "token", "--user", "nobody-" + email],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == f"zm-roi: no user nobody-{email}: import memories for them first"


def test_settings_choose_the_transport(tmp_path):
    nowhere = localdb.Cluster(tmp_path / "db", 1)
    supa = transport.from_settings(
        settings.load({"SUPABASE_URL": "https://x.supabase.co", "SUPABASE_ANON_KEY": "anon", "ZM_DB_URL": "pg://"}),
        nowhere,
    )
    assert isinstance(supa, SupabaseTransport)
    with pytest.raises(UserError, match="SUPABASE_ANON_KEY is not set"):
        transport.from_settings(settings.load({"SUPABASE_URL": "https://x.supabase.co"}), nowhere)
    local = transport.from_settings(
        settings.load({"ZM_DB_URL": "postgresql://postgres:pw@127.0.0.1:5/postgres", "ZM_JWT_SECRET": "s"}), nowhere
    )
    assert isinstance(local, LocalTransport) and "user=authenticator" in local.authenticator_url
    with pytest.raises(UserError, match="ZM_JWT_SECRET"):
        transport.from_settings(settings.load({"ZM_DB_URL": "postgresql://x"}), nowhere)
    with pytest.raises(UserError, match="zm-roi db up"):
        transport.from_settings(settings.load({}), nowhere)


# ---- Supabase: the recorded HTTP exchange ---------------------------------------------------


class FakePostgREST:
    """A tiny real HTTP server on 127.0.0.1 that records requests and answers like PostgREST."""

    def __init__(self, replies: dict[tuple[str, str], tuple[int, object]]):
        self.replies = replies
        self.requests: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path, _, query_string = self.path.partition("?")
                recorder.requests.append(
                    {
                        "method": self.command,
                        "path": path,
                        "query": query_string,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body.decode(),
                    }
                )
                status, payload = recorder.replies.get((self.command, path), (404, {"message": "no route"}))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer  # noqa: N815 (http.server's naming)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakePostgREST:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


ANON_KEY = "anon-key-for-the-test"
RUN_ID = str(uuid.uuid4())
TILE = {"state": "judging", "exclusive_rate": None, "hint": "Judging 20 questions from your memory…", "trend": []}


def user_token() -> str:
    return jwt.encode(claims(), "the-project-secret-we-do-not-know-here!!", algorithm="HS256")


def test_the_supabase_transport_calls_the_rpc_through_postgrest_with_the_users_token():
    token = user_token()
    replies = {
        ("POST", "/rest/v1/rpc/benchmark_memory"): (200, {"status": "started", "run_id": RUN_ID, "probes": 20}),
        ("GET", "/rest/v1/roi_benchmark_tile"): (200, [TILE]),
        ("GET", "/rest/v1/roi_benchmark_runs"): (200, []),
        ("GET", "/rest/v1/roi_benchmark_breakdown"): (200, []),
    }
    with FakePostgREST(replies) as api:
        supa = SupabaseTransport(api.url, ANON_KEY, token)
        assert supa.benchmark_memory() == {"status": "started", "run_id": RUN_ID, "probes": 20}
        assert supa.tile() == TILE
        assert supa.runs() == []
        assert supa.breakdown() == []
    rpc, tile, runs, breakdown = api.requests
    assert (breakdown["method"], breakdown["path"]) == ("GET", "/rest/v1/roi_benchmark_breakdown")
    assert (rpc["method"], rpc["path"]) == ("POST", "/rest/v1/rpc/benchmark_memory")
    assert json.loads(rpc["body"] or "{}") == {}
    for request in (rpc, tile, runs, breakdown):
        assert request["headers"]["apikey"] == ANON_KEY
        assert request["headers"]["authorization"] == f"Bearer {token}"
    assert (tile["method"], tile["path"]) == ("GET", "/rest/v1/roi_benchmark_tile")
    assert (runs["method"], runs["path"]) == ("GET", "/rest/v1/roi_benchmark_runs")
    assert "order=started_at.desc" in runs["query"]


@pytest.mark.parametrize(
    ("status", "payload", "error", "phrase"),
    [
        (401, {"code": "PGRST301", "message": "JWT expired", "details": None, "hint": None}, AuthError, "JWT expired"),
        (401, {"code": "28000", "message": "benchmark_memory() needs a signed-in user"}, AuthError, "signed-in user"),
        (400, {"code": "P0001", "message": "something broke in SQL"}, UserError, "something broke in SQL"),
        (502, "<html>bad gateway</html>", UserError, "refused the call"),
    ],
)
def test_a_postgrest_error_becomes_a_clear_error(status, payload, error, phrase):
    route = {("POST", "/rest/v1/rpc/benchmark_memory"): (status, payload)}
    with FakePostgREST(route) as api, pytest.raises(error, match=phrase) as raised:
        SupabaseTransport(api.url, ANON_KEY, user_token()).benchmark_memory()
    assert len(api.requests) == 1
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("token", "phrase"),
    [
        (None, "no access token"),
        ("not-a-jwt", "not a valid JWT"),
        (jwt.encode(claims(exp=int(time.time()) - 60), "k" * 40, algorithm="HS256"), "expired"),
    ],
)
def test_the_supabase_transport_sends_nothing_for_a_missing_or_broken_token(token, phrase):
    with FakePostgREST({}) as api, pytest.raises(AuthError, match=phrase):
        SupabaseTransport(api.url, ANON_KEY, token).benchmark_memory()
    assert api.requests == []


def test_an_unreachable_supabase_is_one_clear_line():
    with pytest.raises(UserError, match="cannot reach http://127.0.0.1:1"):
        SupabaseTransport(f"http://127.0.0.1:{1}", ANON_KEY, user_token(), timeout=2).benchmark_memory()


def test_a_supabase_url_without_a_scheme_is_one_clear_line():
    with pytest.raises(UserError, match="SUPABASE_URL or SUPABASE_ANON_KEY is not usable: Invalid URL"):
        SupabaseTransport("project.supabase.co", ANON_KEY, user_token()).benchmark_memory()
