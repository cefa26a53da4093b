"""Helpers the pytest suites share: users with knowledge (removed again with everything the benchmark
recorded for them), tokens, SQL run as a user the way PostgREST runs it, and extractor modes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from zm_roi import tokens
from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.prompts import QuestionBounds
from zm_roi.queries import query

KINDS = ("decision", "gotcha", "convention")
# A question's length limits as the schema writes them (roi.probes' check probes_question_length), for
# tests of the pure prompt functions; tests/worker/test_worker_one_home.py holds them equal to the database's.
QUESTION_BOUNDS = QuestionBounds(10, 300)


@dataclass
class User:
    id: uuid.UUID
    email: str
    token: str


def knowledge(count: int, prefix: str = "") -> list[MemoryLine]:
    """`count` distinct knowledge memories, each easy for recall to find by its own title."""
    return [
        MemoryLine(
            title=f"{prefix}Topic {n} {uuid.uuid4().hex[:8]}",
            body=f"We settled item {n} of {prefix or 'the'} list after a long review; keep it as agreed.",
            kind=KINDS[n % len(KINDS)],
        )
        for n in range(count)
    ]


def add_memories(db_url: str, email: str, memories: list[MemoryLine]) -> None:
    with psycopg.connect(db_url) as conn, conn.transaction():
        insert_memories(conn, memories, Target(email))


@contextmanager
def benchmark_user(cluster, email: str, memories: list[MemoryLine] | None = None, ttl: int = 3600):
    """A user with personal memories and a valid token; removed afterwards with all their results."""
    db_url = cluster.url()
    with psycopg.connect(db_url) as conn, conn.transaction():
        if memories:
            insert_memories(conn, memories, Target(email))
        user_id = conn.execute(query("ensure_user"), {"email": email}).fetchone()[0]
    try:
        yield User(user_id, email, tokens.mint(cluster.jwt_secret(), user_id, email, ttl))
    finally:
        remove_users(db_url, [user_id])


@contextmanager
def pool_target(db_url: str, target: int):
    """roi.settings.pool_target at `target` for one test (the whole row is put back, as by extractor())."""
    with extractor(db_url, current_extractor(db_url)), psycopg.connect(db_url) as conn:
        conn.execute("update roi.settings set pool_target = %s", (target,))
        conn.commit()
        yield


def current_extractor(db_url: str) -> str:
    with psycopg.connect(db_url) as conn:
        return conn.execute(query("get_extractor")).fetchone()[0]


@contextmanager
def extractor(db_url: str, mode: str):
    """roi.settings in `mode` for one test; the whole row is put back afterwards, so whatever else the
    test tunes (leases, attempts, timeouts) does not leak into the next test on the shared cluster."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        before = conn.execute("select * from roi.settings").fetchone()
        conn.execute(query("set_extractor"), {"extractor": mode})
    try:
        yield
    finally:
        with psycopg.connect(db_url) as conn:
            conn.execute(
                "update roi.settings set "  # noqa: S608 - the column names come from the table itself
                + ", ".join(f"{column} = %({column})s" for column in before if column != "singleton"),
                before,
            )


def activate_pending_probes(db_url: str, user_id: uuid.UUID) -> int:
    """Do the worker's job by hand (LLM mode, no worker in tests): give pending probes a question."""
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            """update roi.probes set question = 'What do we know about ' || source_title || '?',
                      state = 'active', activated_at = now()
               where owner_id = %s and state = 'pending'""",
            (user_id,),
        ).rowcount


CREATED_USERS: list[uuid.UUID] = []


def remove_users(db_url: str, user_ids: list[uuid.UUID]) -> None:
    """The one way tests remove users: deleting from auth.users cascades to everything the benchmark
    recorded for them (the only delete the append-only results allow)."""
    if user_ids:
        with psycopg.connect(db_url) as conn:
            conn.execute("delete from auth.users where id = any(%s)", (list(user_ids),))


def remove_created_users(db_url: str) -> None:
    """Delete the users made by user_with_knowledge, with everything the benchmark recorded for them, so
    no queued work of one test is left for another test's worker to find."""
    remove_users(db_url, CREATED_USERS)
    CREATED_USERS.clear()


def user_with_knowledge(db_url: str, email: str, count: int = 5, kind: str = "decision") -> uuid.UUID:
    """A user with `count` personal knowledge memories, committed; removed after the test."""
    with psycopg.connect(db_url) as conn:
        user_id = conn.execute("insert into auth.users (email) values (%s) returning id", (email,)).fetchone()[0]
        CREATED_USERS.append(user_id)
        conn.execute(
            """insert into public.memories (author_id, scope, kind, title, body)
               select %s, 'personal', %s, format('Fact %%s of %%s', i, %s::text), format('Body %%s of %%s', i, %s::text)
               from generate_series(1, %s) i""",
            (user_id, kind, email, email, count),
        )
    return user_id


def as_user(db_url: str, user_id: uuid.UUID, sql: str, params: tuple | dict = ()) -> list[dict]:
    """Run one statement as the user, in its own transaction, as PostgREST would."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn, conn.transaction():
        act_as(conn, claims_for(user_id))
        return conn.execute(sql, params).fetchall()


def benchmark(db_url: str, user_id: uuid.UUID) -> dict:
    return as_user(db_url, user_id, "select public.benchmark_memory() as r")[0]["r"]


# auto_explain's plans of every statement a call runs, nested ones included, as notices.
NESTED_PLANS = """
load 'auto_explain';
set auto_explain.log_min_duration = 0;
set auto_explain.log_nested_statements = on;
set auto_explain.log_level = notice;
set client_min_messages = notice;
"""


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, fail: bool = True) -> bool:
    """Poll observable state until `predicate()` holds (never a fixed sleep standing in for it). At the
    timeout: an assertion error, or False with `fail=False` so a test can record what it measured first."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            assert not fail, (
                f"timed out after {timeout:.0f} s waiting for {getattr(predicate, '__name__', 'a condition')}"
            )
            return False
        time.sleep(0.05)
    return True


def forget_calibrations(db_url: str, fingerprints: list[str] = (), check_ids: list = ()) -> None:
    """Cleanup only: judge calibrations a test recorded. The append-only triggers stand down for a
    superuser session in replica mode, which no client role can enter."""
    with psycopg.connect(db_url) as conn:
        conn.execute("set local session_replication_role = replica")
        conn.execute(
            "delete from roi.judge_calibrations where judge_fingerprint = any(%s) or check_id = any(%s::uuid[])",
            (list(fingerprints), [str(check_id) for check_id in check_ids]),
        )
