"""`zm-roi worker`: the LLM half of the benchmark. It claims one queued row at a time (a queued judgment
first, since a user is waiting for that run, else a pending probe), asks the model, and hands the
outcome back to SQL together with the call's usage event, in one transaction.

Every state change goes through the roi_worker verbs (claim_…, record_…, release_…); the worker
connects as `roi_worker` and sees only what the claimed row carries. NOTIFY wakes it, polling
guarantees it, and a crashed worker's row comes back by itself when its lease runs out.
Logs carry ids and outcomes, never question or memory text.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row

from zm_roi import embeddings, llm, prompts
from zm_roi.queries import query

log = logging.getLogger("zm_roi.worker")
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 30.0


@dataclass(frozen=True)
class WorkerConfig:
    generation_model: str
    judge_model: str
    key_encryption_key: str | None = field(default=None, repr=False)
    poll_seconds: float = 5.0
    timeout_seconds: float = 90.0
    # Probe questions are embedded as they are written; None when embeddings are off.
    embedding_model: str | None = field(default_factory=embeddings.configured_model)


@dataclass(frozen=True)
class Outcome:
    """One model call for one row: the reply if one came back, whose key paid, and the parsed value
    or why the attempt failed."""

    reply: llm.Reply | None
    byok: bool
    value: Any = None
    failure: str | None = None


def describe(exc: BaseException) -> str:
    """One line about a failure, short enough for a log line and the queue row's last_error."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text[:300]


class Worker:
    """Processes queued rows until stopped. `complete` is litellm.completion unless a test injects one."""

    def __init__(self, db_url: str, config: WorkerConfig, complete: llm.Complete | None = None):
        self.db_url = db_url
        self.config = config
        self.complete = complete or llm.litellm.completion
        self.stopping = threading.Event()
        self.listening = threading.Event()  # set once LISTEN is in place, for whoever starts a thread
        self.handled = 0

    def stop(self) -> None:
        """Finish the row in hand, then return from run()."""
        self.stopping.set()

    def run(self, once: bool = False) -> int:
        """Work until stopped; with `once`, until nothing is claimable right now. Returns rows handled.

        A long-running worker outlives the database: when the connection is lost (a restart, a
        failover) it reconnects with backoff, and the row it had in hand comes back when its lease ends.
        """
        delay = RECONNECT_FIRST_DELAY
        while True:
            try:
                self._run_connected(once)
                return self.handled
            except psycopg.OperationalError as exc:
                if once or self.stopping.is_set():
                    raise
                log.warning("lost the database (%s); reconnecting in %gs", describe(exc), delay)
                self.listening.clear()
                if self.stopping.wait(delay):
                    return self.handled
                delay = min(delay * 2, RECONNECT_MAX_DELAY)

    def _run_connected(self, once: bool) -> None:
        with psycopg.connect(self.db_url, autocommit=True, row_factory=dict_row) as conn:
            conn.execute(query("worker_listen"))
            self.listening.set()
            while not self.stopping.is_set():
                if self.step(conn):
                    continue
                if once:
                    break
                self._wait(conn)

    def step(self, conn: psycopg.Connection) -> bool:
        """Claim one row and finish it; False when nothing is claimable."""
        job = conn.execute(query("claim_judgment")).fetchone()
        if job is not None:
            self._judge(conn, job)
        else:
            job = conn.execute(query("claim_generation")).fetchone()
            if job is None:
                return False
            self._generate(conn, job)
        self.handled += 1
        return True

    # ---- the two kinds of row ----------------------------------------------------------------

    def _generate(self, conn: psycopg.Connection, job: dict) -> None:
        model = self.config.generation_model
        prompt = prompts.generation_prompt(job["source_kind"], job["source_title"], job["source_body"])
        release = {"probe_id": job["probe_id"], "attempt": job["attempt"]}
        outcome = self._ask(
            conn,
            job,
            model,
            prompt,
            lambda text: prompts.parse_question(text, job["source_title"], job["source_body"]),
            release_query="release_generation",
            release_args=release,
        )
        with conn.transaction():
            self._meter(conn, "probe_generation", model, job, outcome)
            if outcome.failure is None:
                done = self._record_question(conn, job, outcome.value)
                result = "question recorded" if done else "question dropped: the probe is no longer pending"
            else:
                state = _scalar(conn, "release_generation", {**release, "failure": outcome.failure})
                result = f"{_FAILED[state]}: {outcome.failure}"
        log.info(
            "generation probe=%s owner=%s attempt=%s: %s%s",
            job["probe_id"],
            job["owner_id"],
            job["attempt"],
            result,
            _usage_note(outcome),
        )

    def _record_question(self, conn: psycopg.Connection, job: dict, question: str) -> bool:
        """Record the question with its embedding (one more metered call), so the probe joins the pool
        ready for both legs of the recall; without one if embeddings are off or the call failed (the
        lexical leg still serves it, and `zm-roi embed` fills it in later)."""
        args = {"probe_id": job["probe_id"], "question": question}
        model = self.config.embedding_model
        if model is None:
            return _scalar(conn, "record_question", args)
        try:
            embedded = embeddings.embed([question], as_query=True, model=model)
        except Exception as exc:
            log.info("generation probe=%s: question not embedded: %s", job["probe_id"], describe(exc))
            return _scalar(conn, "record_question", args)
        conn.execute(
            query("record_usage"),
            {
                "owner_id": job["owner_id"],
                "purpose": "embedding",
                "model": model,
                "run_id": None,
                "probe_id": job["probe_id"],
                "input_tokens": embedded.input_tokens,
                "output_tokens": 0,
                "byok": False,
            },
        )
        return _scalar(
            conn,
            "record_question_embedded",
            {**args, "embedding": embeddings.literal(embedded.vectors[0]), "embedding_model": model},
        )

    def _judge(self, conn: psycopg.Connection, job: dict) -> None:
        model = self.config.judge_model
        prompt = prompts.judge_prompt(
            job["question"], job["source_kind"], job["source_title"], job["source_body"], job["surfaced"]
        )
        release = {"run_id": job["run_id"], "probe_id": job["probe_id"], "attempt": job["attempt"]}
        outcome = self._ask(
            conn, job, model, prompt, prompts.parse_judgment, release_query="release_judgment", release_args=release
        )
        with conn.transaction():
            self._meter(conn, "judgment", model, job, outcome)
            if outcome.failure is None:
                verdict: prompts.Judgment = outcome.value
                done = _scalar(
                    conn,
                    "record_verdict",
                    {
                        "run_id": job["run_id"],
                        "probe_id": job["probe_id"],
                        "with_memory": verdict.with_memory,
                        "without_memory": verdict.without_memory,
                        "confidence": verdict.confidence,
                        "reason": verdict.reason,
                    },
                )
                result = (
                    f"verdict recorded (with_memory={_yes(verdict.with_memory)}, "
                    f"without_memory={_yes(verdict.without_memory)})"
                    if done
                    else "verdict dropped: the judgment is no longer queued"
                )
            else:
                state = _scalar(conn, "release_judgment", {**release, "failure": outcome.failure})
                result = f"{_FAILED[state]}: {outcome.failure}"
        log.info(
            "judgment run=%s probe=%s owner=%s attempt=%s: %s%s",
            job["run_id"],
            job["probe_id"],
            job["owner_id"],
            job["attempt"],
            result,
            _usage_note(outcome),
        )

    # ---- shared steps ------------------------------------------------------------------------

    def _ask(
        self,
        conn: psycopg.Connection,
        job: dict,
        model: str,
        prompt: str,
        parse: Callable[[str], Any],
        *,
        release_query: str,
        release_args: dict,
    ) -> Outcome:
        """Call the model on the owner's own key when they stored one, else the deployment's. Any
        failure becomes an Outcome the queue retries; an interrupt releases the row and propagates."""
        reply = None
        byok = False
        try:
            api_key = _scalar(
                conn,
                "owner_provider_key",
                {
                    "owner_id": job["owner_id"],
                    "provider": llm.provider_of(model),
                    "passphrase": self.config.key_encryption_key,
                },
            )
            byok = api_key is not None
            reply = llm.call(
                self.complete,
                model=model,
                prompt=prompt,
                temperature=0,
                api_key=api_key,
                timeout=self.config.timeout_seconds,
            )
            return Outcome(reply, byok, value=parse(reply.text))
        except Exception as exc:
            return Outcome(reply, byok, failure=describe(exc))
        except BaseException:
            conn.execute(query(release_query), {**release_args, "failure": "the worker was interrupted"})
            log.info("%s: interrupted, row released", release_query.removeprefix("release_"))
            raise

    def _meter(self, conn: psycopg.Connection, purpose: str, model: str, job: dict, outcome: Outcome) -> None:
        """A call that came back is metered with the tokens the provider reported, result or not."""
        if outcome.reply is None:
            return
        conn.execute(
            query("record_usage"),
            {
                "owner_id": job["owner_id"],
                "purpose": purpose,
                "model": model,
                "run_id": job.get("run_id"),
                "probe_id": job["probe_id"],
                "input_tokens": outcome.reply.input_tokens,
                "output_tokens": outcome.reply.output_tokens,
                "byok": outcome.byok,
            },
        )

    def _wait(self, conn: psycopg.Connection) -> None:
        """NOTIFY wakes, polling guarantees: wait at most poll_seconds, in short slices so a stop is prompt."""
        deadline = time.monotonic() + self.config.poll_seconds
        while not self.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for _ in conn.notifies(timeout=min(remaining, 0.5), stop_after=1):
                return


_FAILED = {
    "retry": "failed, will retry",
    "retired": "failed for the last time, probe retired",
    "skipped": "failed for the last time, recorded as skipped",
    "stale": "failed, and the row had already moved on",
}


def _scalar(conn: psycopg.Connection, name: str, params: dict) -> Any:
    row = conn.execute(query(name), params).fetchone()
    return next(iter(row.values()))


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _usage_note(outcome: Outcome) -> str:
    if outcome.reply is None:
        return ""
    key = "own key" if outcome.byok else "deployment key"
    return f" [{outcome.reply.input_tokens}+{outcome.reply.output_tokens} tokens, {key}]"


def run_worker(db_url: str, config: WorkerConfig, once: bool = False) -> int:
    """The `zm-roi worker` process: keys checked once, SIGTERM finishes the row in hand."""
    llm.check_keys([config.generation_model, config.judge_model])
    worker = Worker(db_url, config)

    def on_sigterm(signum: int, frame: object) -> None:
        log.info("stopping after the row in hand")
        worker.stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    log.info(
        "worker up: generation %s, judge %s%s",
        config.generation_model,
        config.judge_model,
        ", draining the queue once" if once else f", woken by NOTIFY roi_work, polling every {config.poll_seconds:g}s",
    )
    handled = worker.run(once=once)
    log.info("worker done: %s row%s handled", handled, "" if handled == 1 else "s")
    return handled
