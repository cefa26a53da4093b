"""Small helpers the pytest suites share: a user with knowledge, and SQL run as that user."""

from __future__ import annotations

import uuid

import psycopg
from psycopg.rows import dict_row

from zm_roi.identity import act_as, claims_for


def user_with_knowledge(db_url: str, email: str, count: int = 5, kind: str = "decision") -> uuid.UUID:
    """A user with `count` personal knowledge memories, committed."""
    with psycopg.connect(db_url) as conn:
        user_id = conn.execute("insert into auth.users (email) values (%s) returning id", (email,)).fetchone()[0]
        conn.execute(
            """insert into public.memories (author_id, scope, kind, title, body)
               select %s, 'personal', %s, format('Fact %%s of %%s', i, %s::text), format('Body %%s of %%s', i, %s::text)
               from generate_series(1, %s) i""",
            (user_id, kind, email, email, count),
        )
    return user_id


def as_user(db_url: str, user_id: uuid.UUID, sql: str, params: tuple = ()) -> list[dict]:
    """Run one statement as the user, in its own transaction, as PostgREST would."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn, conn.transaction():
        act_as(conn, claims_for(user_id))
        return conn.execute(sql, params).fetchall()


def benchmark(db_url: str, user_id: uuid.UUID) -> dict:
    return as_user(db_url, user_id, "select public.benchmark_memory() as r")[0]["r"]


def set_settings(db_url: str, **values) -> dict:
    """Change roi.settings and return the previous values, for restoring afterwards."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        before = conn.execute("select * from roi.settings").fetchone()
        for column, value in values.items():
            conn.execute(f"update roi.settings set {column} = %s", (value,))  # noqa: S608 - column names are ours
        return {column: before[column] for column in values}


def activate_pending_probes(db_url: str, user_id: uuid.UUID) -> int:
    """Play the worker's part in LLM mode: give every pending probe a question."""
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            """update roi.probes set question = 'What about ' || source_title || '?', state = 'active',
                      activated_at = now() where owner_id = %s and state = 'pending'""",
            (user_id,),
        ).rowcount
