"""Helpers the pytest suites share: users with knowledge (removed again with everything the benchmark
recorded for them), tokens, SQL run as a user the way PostgREST runs it, extractor modes, and the
worker's cast: scripted models (through litellm's `mock_response`), owners with knowledge, and a fake
OpenAI-compatible endpoint. The fixtures built on them (owners, worker_url, fake_openai) are in
conftest.py; helpers only the worker tier uses are in tests/worker/conftest.py."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
from psycopg.rows import dict_row

from zm_roi import tokens
from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.llm import litellm
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


def cli_subcommands() -> dict:
    """Every `zm-roi` subcommand's argparse parser, by name: what the tests of the CLI's options read."""
    import argparse

    from zm_roi.cli import build_parser

    [sub] = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(sub.choices)


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


# The worker's cast: the models a test scripts, the knowledge its owners hold, the verdict a judge gives.
GENERATION_MODEL = "openai/zm-test-generator"
JUDGE_MODEL = "openai/zm-test-judge"

KNOWLEDGE = [
    {
        "kind": "decision",
        "title": "Pin the payments SDK",
        "body": "We pin the payments SDK at 4.2 because 4.3 broke idempotent retries on refunds.",
    },
    {
        "kind": "gotcha",
        "title": "Staging cron runs in UTC",
        "body": "The staging scheduler ignores TZ and fires in UTC, so the nightly export lands at 01:00 local.",
    },
    {
        "kind": "convention",
        "title": "Feature-named migrations",
        "body": "Migration files are named for the feature they add, never for a ticket number.",
    },
    {
        "kind": "decision",
        "title": "Version conflicts answer 409",
        "body": "A write with a stale version answers HTTP 409 Conflict, as HTTP intends.",
    },
    {
        "kind": "gotcha",
        "title": "Webhook secrets rotate on Tuesdays",
        "body": "The billing provider rotates webhook signing secrets every Tuesday at 09:00; refetch on 401.",
    },
    {
        "kind": "convention",
        "title": "Feature flags carry an owner",
        "body": "Every feature flag names an owning team in its description, or the linter rejects it.",
    },
]
GOOD_VERDICT = {"with_memory": True, "without_memory": False, "confidence": 0.9, "reason": "The first result says so."}


def question_for(prompt: str) -> str:
    """A valid generated question, different for each source memory (found by its title)."""
    for number, memory in enumerate(KNOWLEDGE):
        if f"Title: {memory['title']}" in prompt:
            return json.dumps({"question": f"What did the team settle on for topic number {number}?"})
    return json.dumps({"question": "What did the team settle on for this topic?"})


@dataclass
class ScriptedModel:
    """A stand-in for litellm.completion: `answer(model, prompt)` picks each call's `mock_response`
    (text or Exception), and litellm builds the response, usage included, exactly as it would."""

    answer: Callable[[str, str], str | Exception]
    calls: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, **kwargs):
        prompt = kwargs["messages"][0]["content"]
        answer = self.answer(kwargs["model"], prompt)
        call = {"model": kwargs["model"], "api_key": kwargs.get("api_key"), "prompt": prompt, "usage": None}
        with self.lock:
            self.calls.append(call)
        response = litellm.completion(**kwargs, mock_response=answer)
        call["usage"] = (response.usage.prompt_tokens, response.usage.completion_tokens)
        return response


def default_answer(model: str, prompt: str) -> str:
    if model == GENERATION_MODEL:
        return question_for(prompt)
    return json.dumps(GOOD_VERDICT)


@dataclass
class Owners:
    """Users with memories, deleted again at teardown: the cascade takes their probes, runs, queued
    rows and usage events with them, so no test leaves data (or queued work) behind."""

    db_url: str
    ids: list = field(default_factory=list)

    def create(self, memories: list[dict]) -> uuid.UUID:
        email = f"worker-{uuid.uuid4().hex[:12]}@example.test"
        lines = [MemoryLine.model_validate(m) for m in memories]
        with psycopg.connect(self.db_url) as conn, conn.transaction():
            insert_memories(conn, lines, Target(email))
            owner = conn.execute("select id from auth.users where email = %s", (email,)).fetchone()[0]
        self.ids.append(owner)
        return owner

    def email(self, owner: uuid.UUID) -> str:
        with psycopg.connect(self.db_url) as conn:
            return conn.execute("select email from auth.users where id = %s", (owner,)).fetchone()[0]

    def add_memories(self, owner: uuid.UUID, memories: list[dict]) -> None:
        lines = [MemoryLine.model_validate(m) for m in memories]
        with psycopg.connect(self.db_url) as conn, conn.transaction():
            insert_memories(conn, lines, Target(self.email(owner)))

    def delete_all(self) -> None:
        remove_users(self.db_url, self.ids)


def set_settings(db_url: str, **values) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("update roi.settings set " + ", ".join(f"{k} = %({k})s" for k in values), values)


def fetch(db_url: str, sql: str, params: dict | tuple | None = None) -> list[dict]:
    """A superuser read, to look behind the curtain."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        return conn.execute(sql, params).fetchall()


REPORTED = {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168}


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.lock = threading.Lock()
        self.to_hold = 0
        self.held = threading.Event()
        self.let_go = threading.Event()
        self.requests: list[dict] = []
        self.holding = threading.Condition(self.lock)
        self.held_calls = 0
        # A judge's reply per prompt (text), when a test scripts one; otherwise GOOD_VERDICT.
        self.judge_reply: Callable[[str], str] | None = None

    def hold_next_judgment(self, count: int = 1) -> None:
        with self.lock:
            self.to_hold += count

    def take_hold(self) -> bool:
        with self.lock:
            if self.to_hold == 0:
                return False
            self.to_hold -= 1
            self.held_calls += 1
            self.holding.notify_all()
            return True

    def wait_until_held(self, count: int, timeout: float = 120) -> bool:
        """True once `count` judge calls are being held open (each a row in some worker's hand)."""
        with self.lock:
            return self.holding.wait_for(lambda: self.held_calls >= count, timeout)


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "model": body["model"], "auth": self.headers["Authorization"]})
        if "judge" in body["model"]:
            scripted = self.server.judge_reply
            content = scripted(body["messages"][0]["content"]) if scripted else json.dumps(GOOD_VERDICT)
            if self.server.take_hold():
                self.server.held.set()
                self.server.let_go.wait(120)
        else:
            content = question_for(body["messages"][0]["content"])
        reply = {
            "id": "chatcmpl-local",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": REPORTED,
        }
        data = json.dumps(reply).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the worker that asked was killed

    def log_message(self, *args):
        pass
