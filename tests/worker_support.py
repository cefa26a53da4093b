"""Shared cast and props for the worker tests: owners with knowledge, calls made as them, the worker's
own connection URL, and a scripted model that answers through litellm's `mock_response`.
Registered as a pytest plugin by conftest.py, so its fixtures are available to every test."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support import as_user, benchmark, remove_users  # noqa: F401 - as_user, benchmark re-exported for the worker suites
from zm_roi import localdb
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.llm import litellm

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
EPISODE = {"kind": "episode", "title": "Standup notes", "body": "We talked about the release train."}

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


@pytest.fixture
def owners(db_url):
    made = Owners(db_url)
    yield made
    made.delete_all()


def set_settings(db_url: str, **values) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("update roi.settings set " + ", ".join(f"{k} = %({k})s" for k in values), values)


@pytest.fixture(scope="session")
def worker_url(cluster) -> str:
    """The test cluster as the least-privilege worker role, exactly as `zm-roi worker` connects."""
    return cluster.url(user="roi_worker", password=localdb.WORKER_PASSWORD)


def tile(db_url: str, owner: uuid.UUID) -> dict:
    return as_user(db_url, owner, "select * from public.roi_benchmark_tile")[0]


def fetch(db_url: str, sql: str, params: dict | tuple | None = None) -> list[dict]:
    """A superuser read, to look behind the curtain."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        return conn.execute(sql, params).fetchall()


def seed_queued_judgments(db_url: str, owner: uuid.UUID, count: int) -> uuid.UUID:
    """A run of `count` probes whose judgments are queued, as start_run() leaves them in LLM mode,
    written directly so a test can queue hundreds without hundreds of memories."""
    with psycopg.connect(db_url) as conn, conn.transaction():
        run_id = conn.execute(
            "insert into roi.runs (owner_id, mode, probe_count) values (%s, 'llm', %s) returning id", (owner, count)
        ).fetchone()[0]
        conn.execute(
            "insert into roi.pending_runs (run_id, owner_id, started_at) values (%s, %s, now())", (run_id, owner)
        )
        # Embedded already, as the worker leaves the questions it writes: no embed_question work.
        probes = conn.execute(
            """insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                                       question, state, activated_at, question_embedding, question_embedding_model)
               select %s, gen_random_uuid(), 'decision', 'personal', 'Seeded decision ' || g,
                      'The seeded body of decision ' || g, 'Which way did seeded decision ' || g || ' go?',
                      'active', now(), array_fill(0.05::real, array[384])::extensions.vector, 'seeded'
               from generate_series(1, %s) g
               returning id""",
            (owner, count),
        ).fetchall()
        conn.execute(
            """insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
               select %s, p.id, p.owner_id, '{}', '[]' from roi.probes p where p.id = any(%s)""",
            (run_id, [row[0] for row in probes]),
        )
        conn.execute("select roi.note_recall_outcomes(%s)", (run_id,))
        conn.execute("select roi.enqueue('judge', %s, %s, %s)", (owner, [row[0] for row in probes], run_id))
    return run_id


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


@pytest.fixture
def fake_openai():
    server = FakeOpenAI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.let_go.set()
    server.shutdown()
    server.server_close()
