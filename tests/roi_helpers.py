"""Users, tokens and extractor modes for the tests that go through the transport, the MCP server and
the dashboard. Every user made here is deleted again (with everything the benchmark recorded for
them), so queued judgments from these tests never linger for another test's worker to find."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from zm_roi import tokens
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.queries import query

KINDS = ("decision", "gotcha", "convention")


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
        with psycopg.connect(db_url) as conn:
            conn.execute("delete from auth.users where id = %s", (user_id,))


@contextmanager
def extractor(db_url: str, mode: str):
    """Switch roi.settings.extractor for one test and put back what was there (the cluster is shared)."""
    with psycopg.connect(db_url) as conn:
        before = conn.execute(query("get_extractor")).fetchone()[0]
        conn.execute(query("set_extractor"), {"extractor": mode})
    try:
        yield
    finally:
        with psycopg.connect(db_url) as conn:
            conn.execute(query("set_extractor"), {"extractor": before})


def activate_pending_probes(db_url: str, user_id: uuid.UUID) -> int:
    """Do the worker's job by hand (LLM mode, no worker in tests): give pending probes a question."""
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            """update roi.probes set question = 'What do we know about ' || source_title || '?',
                      state = 'active', activated_at = now()
               where owner_id = %s and state = 'pending'""",
            (user_id,),
        ).rowcount
