"""`zm-roi worker`: the LLM half of the benchmark, and the one embedder of probe questions. Each of its
lanes (ZM_WORKER_CONCURRENCY threads, settings.DEFAULT_WORKER_CONCURRENCY by default, each with its own
connection) claims one row of the work queue at a time with one round trip (roi.claim_work() hands out
the most urgent: a waiting run's judgments first, then its checks of the judge (closed-book
spot-checks, source withheld, order reversed), questions to write, questions to embed), does its kind
of work (a model call, or an embedding, which needs no provider key), and hands the outcome back to
SQL together with the call's usage event, in one transaction.
Several calls are in flight at once, so a 20-question pool or run costs a few model round trips.
Before each call the spending caps are asked (roi.budget_refusal, with the call's cost estimated from its
prompt and litellm's local price map): a call they refuse is never made; its run closes as aborted_budget,
or its question waits (docs/spending-and-schedule.md).

Every state change goes through the roi_worker verbs (claim_work, record_…, release_work); the worker
connects as `roi_worker` and sees only what the claimed row carries. NOTIFY wakes it, polling
guarantees it, and a crashed worker's row comes back by itself when its lease runs out.
Logs carry ids and outcomes, never question or memory text.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import httpx
import openai
import psycopg
from psycopg.rows import dict_row, tuple_row

from zm_roi import embeddings, llm, prompts
from zm_roi.queries import query
from zm_roi.settings import DEFAULT_WORKER_CONCURRENCY

log = logging.getLogger("zm_roi.worker")
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 30.0
# The judge's reply schema, for a server that constrains its output to one (ZM_MODEL_SCHEMA).
JUDGMENT_SCHEMA = prompts.reply_schema(prompts.Judgment)

# What a model call can fail with that another attempt may fix: the provider's errors (litellm raises
# openai's classes), the network, and a reply that does not parse. Anything else is a bug in this code:
# the row is released and the worker stops loudly instead of burning the row's attempts.
RETRYABLE = (openai.OpenAIError, httpx.HTTPError, OSError, prompts.OutputError)

# A model call must end before the lease of its row does: past it, another worker may claim the row and
# make the same call (and a second verdict would be refused, but paid for). So each call's timeout is
# what is left of the lease roi.claim_work() handed out (lease_seconds, the database's lease_duration),
# less a margin for recording the outcome: a quarter of the lease, at most LEASE_MARGIN_SECONDS. A call
# that would get less than MIN_CALL_SECONDS is not made (its attempt fails and the queue retries it):
# flooring the timeout instead would let the call outlive the lease.
LEASE_MARGIN_SECONDS = 10.0
MIN_CALL_SECONDS = 0.5


def call_timeout(lease_seconds: float, elapsed: float) -> float | None:
    """Seconds a model call may take when the row's lease was `lease_seconds` long at the claim and
    `elapsed` seconds have passed since; None when too little of the lease is left for a call."""
    margin = min(LEASE_MARGIN_SECONDS, lease_seconds / 4)
    timeout = lease_seconds - elapsed - margin
    return timeout if timeout >= MIN_CALL_SECONDS else None


@dataclass(frozen=True)
class WorkerConfig:
    generation_model: str
    judge_model: str
    key_encryption_key: str | None = field(default=None, repr=False)
    poll_seconds: float = 5.0
    concurrency: int = DEFAULT_WORKER_CONCURRENCY
    # Probe questions are embedded (as they are written, and as embed_question work); None when off.
    embedding_model: str | None = field(default_factory=embeddings.configured_model)
    # The second leg's model (MiniLM, offline only): each question gets both, in one transaction.
    minilm_model: str | None = field(default_factory=lambda: embeddings.configured_models().get("embedding_minilm"))
    # A self-hosted model's context window and schema form (ZM_MODEL_CONTEXT_TOKENS, ZM_MODEL_SCHEMA).
    endpoint: llm.Endpoint = field(default_factory=llm.Endpoint)


class KindsDiffer(RuntimeError):
    """The worker's handlers (Worker._KINDS) are not the kinds of work the database lists
    (roi.work_kinds): a worker older or newer than its database. It refuses to start rather than
    claim a row it cannot handle or leave a kind unserved."""


class BudgetRefusal(Exception):
    """A spending cap refused the model call the worker was about to start (roi.budget_refusal): the
    message says which cap, what was spent and what the call was estimated at. Never retried: step()
    stops the run (aborted_budget) or puts the question off."""


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


# glibc's mallopt parameter for the most malloc arenas a process keeps (malloc.h).
M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def fewer_malloc_arenas() -> bool:
    """At most MALLOC_ARENAS malloc arenas in this process, before the lanes start; whether glibc took it.
    glibc gives threads that allocate at once arenas of their own (up to 8 a core), and each keeps what its
    thread freed: with two, the real worker's peak with 8 calls in flight fell by 2.5 MB (medians of 3 runs
    each, taking turns; decision 0047). The lanes hold the GIL while they allocate, so they rarely contend
    for an arena. Elsewhere than glibc, nothing changes."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return bool(mallopt and mallopt(M_ARENA_MAX, MALLOC_ARENAS) == 1)


class Worker:
    """Processes queued rows until stopped. `complete` is litellm.completion unless a test injects one."""

    def __init__(self, db_url: str, config: WorkerConfig, complete: llm.Complete | None = None):
        self.db_url = db_url
        self.config = config
        self.complete = complete or llm.litellm.completion
        self.stopping = threading.Event()
        self.listening = threading.Event()  # set once every lane's LISTEN is in place
        self.idle = threading.Event()  # set while every lane waits for work (NOTIFY or the next poll)
        self._lock = threading.Lock()
        self._listening_lanes = 0
        self._idle_lanes = 0
        self._crash: BaseException | None = None
        # The last outcome of each row this worker attempted, by roi.work id: a row attempted again
        # after its backoff (within one `--once` drain, too) is one row, however many attempts.
        self._outcomes: dict[int, bool] = {}
        self.attempts = 0
        self._question_bounds: prompts.QuestionBounds | None = None

    @property
    def handled(self) -> int:
        """Rows attempted at least once (not attempts)."""
        return len(self._outcomes)

    @property
    def succeeded(self) -> int:
        """Rows whose last attempt succeeded."""
        return sum(self._outcomes.values())

    @property
    def failed(self) -> int:
        """Rows whose last attempt failed (retried later, or given up on)."""
        return self.handled - self.succeeded

    def stop(self) -> None:
        """Finish the rows in hand, then return from run()."""
        self.stopping.set()

    def run(self, once: bool = False) -> int:
        """Work until stopped; with `once`, until nothing is claimable right now. Returns rows handled.

        Runs `concurrency` lanes side by side, each claiming and finishing its own rows. A lane that
        hits a bug (not a provider, network or parse failure) releases its row and stops every lane
        after their rows in hand; run() then raises that error.
        """
        fewer_malloc_arenas()
        lanes = [
            threading.Thread(target=self._lane, args=(once,), name=f"zm-roi-worker-{n}", daemon=True)
            for n in range(max(1, self.config.concurrency))
        ]
        for lane in lanes:
            lane.start()
        try:
            self._join(lanes)
        except KeyboardInterrupt:
            # Ctrl-C acts as SIGTERM: the rows in hand are finished; a second Ctrl-C leaves them to
            # their leases.
            log.info("interrupted: finishing the rows in hand (Ctrl-C again to leave them to their leases)")
            self.stop()
            self._join(lanes)
        if self._crash is not None:
            raise self._crash
        return self.handled

    @staticmethod
    def _join(lanes: list[threading.Thread]) -> None:
        for lane in lanes:
            while lane.is_alive():  # short joins, so SIGTERM's handler runs in the main thread
                lane.join(0.2)

    def _lane(self, once: bool) -> None:
        """One lane. A long-running worker outlives the database: when the connection is lost (a
        restart, a failover) the lane reconnects with backoff, and a row in hand comes back when its
        lease ends."""
        delay = RECONNECT_FIRST_DELAY
        try:
            while True:
                try:
                    self._run_connected(once)
                    return
                except psycopg.OperationalError as exc:
                    if once or self.stopping.is_set():
                        raise
                    log.warning("lost the database (%s); reconnecting in %gs", describe(exc), delay)
                    if self.stopping.wait(delay):
                        return
                    delay = min(delay * 2, RECONNECT_MAX_DELAY)
        except BaseException as exc:
            with self._lock:
                if self._crash is None:
                    self._crash = exc
            self.stopping.set()

    def _lane_listening(self, up: bool) -> None:
        with self._lock:
            self._listening_lanes += 1 if up else -1
            _flag(self.listening, self._listening_lanes >= max(1, self.config.concurrency))

    def _lane_idle(self, up: bool) -> None:
        with self._lock:
            self._idle_lanes += 1 if up else -1
            _flag(self.idle, self._idle_lanes >= max(1, self.config.concurrency))

    def check_kinds(self, conn: psycopg.Connection) -> None:
        """Raise KindsDiffer unless the handlers are exactly the kinds roi.work_kinds lists: the table
        is the one list of kinds, and this dispatch table must not drift from it."""
        with conn.cursor(row_factory=tuple_row) as cur:
            listed = set(cur.execute(query("work_kinds")).fetchone()[0])
        handled = set(self._KINDS)
        if listed != handled:
            raise KindsDiffer(
                "the worker's kinds of work differ from the database's (roi.work_kinds): "
                f"no handler for {sorted(listed - handled) or 'none'}, "
                f"handlers for unknown {sorted(handled - listed) or 'none'}; "
                "run the worker of the same version as the database's migrations"
            )

    def _run_connected(self, once: bool) -> None:
        with psycopg.connect(self.db_url, autocommit=True, row_factory=dict_row) as conn:
            self.check_kinds(conn)
            conn.execute(query("worker_listen"))
            self._lane_listening(True)
            try:
                while not self.stopping.is_set():
                    if self.step(conn):
                        continue
                    if once:
                        break
                    self._wait(conn)
            finally:
                self._lane_listening(False)

    def step(self, conn: psycopg.Connection) -> bool:
        """Claim one row (one round trip) and finish it; False when nothing is claimable."""
        job = conn.execute(query("claim_work")).fetchone()
        if job is None:
            return False
        job["claimed_at"] = time.monotonic()  # the lease's clock, for call_timeout
        try:
            ok = self._KINDS[job["kind"]](self, conn, job)
        except BudgetRefusal as refusal:
            ok = self._stop_for_budget(conn, job, str(refusal))
        with self._lock:
            self.attempts += 1
            self._outcomes[job["work_id"]] = bool(ok)
        return True

    # ---- the kinds of work (roi.work.kind) ---------------------------------------------------

    def _generate(self, conn: psycopg.Connection, job: dict) -> bool:
        model = self.config.generation_model
        kind, title, body = job["source_kind"], job["source_title"], job["source_body"]
        bounds = self.question_bounds(conn)
        first = prompts.generation_prompt(kind, title, body, bounds)
        schema = prompts.question_schema(bounds)
        outcome = self._ask(
            conn, job, model, first, lambda text: prompts.parse_question_shape(text, bounds), schema=schema
        )
        # The question gate: a question that fails it goes back to the model once with the reason (a
        # metered call, counted as 'retry'); failing again, the probe takes its template question. A
        # retry that got no reply at all (provider, network) fails the attempt, for the queue to retry.
        origin, question, retry = "model", outcome.value, None
        refusal = None if outcome.failure else prompts.gate_refusal(question, title, body, bounds)
        if refusal is not None:
            second = prompts.generation_prompt(kind, title, body, bounds, refused=refusal)
            try:
                retry = self._ask(
                    conn,
                    job,
                    model,
                    second,
                    lambda text: prompts.parse_question(text, title, body, bounds),
                    schema=schema,
                )
            except BudgetRefusal:
                with conn.transaction():  # the first call was made: it is metered all the same
                    self._meter(conn, "probe_generation", model, job, outcome)
                raise
            origin, question = ("retry", retry.value) if retry.failure is None else ("template", None)
        failure = outcome.failure or (retry.failure if retry is not None and retry.reply is None else None)
        with conn.transaction():
            self._meter(conn, "probe_generation", model, job, outcome)
            if retry is not None:
                self._meter(conn, "probe_generation", model, job, retry)
            if failure is None:
                done = self._record_question(conn, job, question, origin)
                result = f"question recorded ({origin})" if done else "question dropped: the probe is no longer pending"
            else:
                result = self._release(conn, job, failure)
        log.info(
            "generation probe=%s owner=%s attempt=%s: %s%s%s",
            job["probe_id"],
            job["owner_id"],
            job["attempt"],
            result,
            _usage_note(outcome),
            _usage_note(retry) if retry else "",
        )
        return failure is None

    def question_bounds(self, conn: psycopg.Connection) -> prompts.QuestionBounds:
        """A question's length limits, read once from the database (the check constraint on
        roi.probes is their one home, see prompts.QuestionBounds)."""
        if self._question_bounds is None:
            row = conn.execute(query("question_length_bounds")).fetchone()
            self._question_bounds = prompts.QuestionBounds(row["min_chars"], row["max_chars"])
        return self._question_bounds

    def _record_question(self, conn: psycopg.Connection, job: dict, question: str | None, origin: str) -> bool:
        """Record the question with its embedding (one more metered call), so the probe joins the pool
        ready for both legs of the recall. A template question (None here: SQL writes it) is embedded
        by the embed_question work its activation queued; so is a question whose embedding call failed.
        With embeddings off that row leaves in the same transaction (nothing will embed it)."""
        args = {
            "probe_id": job["probe_id"],
            "question": question,
            "origin": origin,
            "generator": prompts.fingerprint(self.config.generation_model, "generate_question.j2"),
        }
        model = self.config.embedding_model
        if model is None:
            done = _scalar(conn, "record_question", args)
            no_embedding = {"probe_id": job["probe_id"], "embedding": None, "embedding_model": None}
            _scalar(conn, "record_question_embedding", no_embedding)
            return done
        if question is None:
            return _scalar(conn, "record_question", args)
        try:
            embedded = embeddings.embed([question], as_query=True, model=model)
        except Exception as exc:
            log.info("generation probe=%s: question not embedded: %s", job["probe_id"], describe(exc))
            return _scalar(conn, "record_question", args)
        self._meter_embedding(conn, job, model, embedded)
        if self.config.minilm_model is not None:
            try:
                second = embeddings.embed([question], as_query=True, model=self.config.minilm_model)
            except Exception as exc:  # the first leg still serves; `zm-roi embed` queues the second
                log.info("generation probe=%s: question not embedded by MiniLM: %s", job["probe_id"], describe(exc))
            else:
                self._store_minilm(conn, job, second)
        return _scalar(
            conn,
            "record_question_embedded",
            {**args, "embedding": embeddings.literal(embedded.vectors[0]), "embedding_model": model},
        )

    def _embed_question(self, conn: psycopg.Connection, job: dict) -> bool:
        """embed_question work: a templated question (or one an older model embedded) gets the embedding
        of the model in force. No provider key is involved; with embeddings off the row just leaves."""
        model = self.config.embedding_model
        args = {"probe_id": job["probe_id"], "embedding": None, "embedding_model": None}
        embedded = second = None
        failure = None
        if model is not None:
            try:
                embedded = embeddings.embed([job["question"]], as_query=True, model=model)
                if self.config.minilm_model is not None:
                    second = embeddings.embed([job["question"]], as_query=True, model=self.config.minilm_model)
            except Exception as exc:  # the offline model or a provider: another attempt may succeed
                failure = describe(exc)
        with conn.transaction():
            if failure is not None:
                result = self._release(conn, job, failure)
            elif embedded is None:
                _scalar(conn, "record_question_embedding", args)
                result = "embeddings are off: left to the lexical leg"
            else:
                self._meter_embedding(conn, job, model, embedded)
                if second is not None:
                    self._store_minilm(conn, job, second)  # before the row below leaves with the work
                args.update(embedding=embeddings.literal(embedded.vectors[0]), embedding_model=model)
                done = _scalar(conn, "record_question_embedding", args)
                result = "embedding recorded" if done else "embedding dropped: the probe is no longer active"
        log.info("embedding probe=%s owner=%s attempt=%s: %s", job["probe_id"], job["owner_id"], job["attempt"], result)
        return failure is None

    def _ask_judge(self, conn: psycopg.Connection, job: dict) -> Outcome:
        """The judge prompt on what the row carries: a judgment's recall snapshot, or a check's as the
        check shows it."""
        prompt = prompts.judge_prompt(
            job["question"], job["source_kind"], job["source_title"], job["source_body"], job["surfaced"]
        )
        return self._ask(conn, job, self.config.judge_model, prompt, prompts.parse_judgment, schema=JUDGMENT_SCHEMA)

    def _judge(self, conn: psycopg.Connection, job: dict) -> bool:
        model = self.config.judge_model
        outcome = self._ask_judge(conn, job)
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
                        "judge_fingerprint": prompts.fingerprint(model, "judge.j2"),
                    },
                )
                result = (
                    f"verdict recorded (with_memory={_yes(verdict.with_memory)}, "
                    f"without_memory={_yes(verdict.without_memory)})"
                    if done
                    else "verdict dropped: the judgment is no longer queued"
                )
            else:
                result = self._release(conn, job, outcome.failure)
        log.info(
            "judgment run=%s probe=%s owner=%s attempt=%s: %s%s",
            job["run_id"],
            job["probe_id"],
            job["owner_id"],
            job["attempt"],
            result,
            _usage_note(outcome),
        )
        return outcome.failure is None

    def _closed_book(self, conn: psycopg.Connection, job: dict) -> bool:
        """The judge's spot-check: the model answers the question alone (no memory, no ground truth), then
        a grading call compares that answer with the ground truth. Both calls are metered; the bare answer
        is never stored or logged."""
        model = self.config.judge_model
        bare = prompts.closed_book_prompt(job["question"])
        answer = self._ask(
            conn, job, model, bare, prompts.parse_bare_answer, schema=prompts.reply_schema(prompts.BareAnswer)
        )
        with conn.transaction():  # metered now: the grading call below may never come back
            self._meter(conn, "closed_book_answer", model, job, answer)
        grade = None
        if answer.failure is None:
            grading = prompts.closed_book_grade_prompt(
                job["question"], job["source_kind"], job["source_title"], job["source_body"], answer.value
            )
            grade_schema = prompts.reply_schema(prompts.Grade)
            grade = self._ask(conn, job, model, grading, prompts.parse_grade, schema=grade_schema)
        failure = answer.failure or (grade.failure if grade else None)
        with conn.transaction():
            if grade is not None:
                self._meter(conn, "closed_book_grade", model, job, grade)
            if failure is None:
                correct = grade.value.correct
                done = _scalar(
                    conn,
                    "record_closed_book",
                    {"run_id": job["run_id"], "probe_id": job["probe_id"], "correct": correct},
                )
                result = f"bare model {'right' if correct else 'wrong'}" if done else "grade dropped: no longer queued"
            else:
                result = self._release(conn, job, failure)
        log.info(
            "closed-book run=%s probe=%s owner=%s attempt=%s: %s%s%s",
            job["run_id"],
            job["probe_id"],
            job["owner_id"],
            job["attempt"],
            result,
            _usage_note(answer),
            _usage_note(grade) if grade else "",
        )
        return failure is None

    def _judge_check(self, conn: psycopg.Connection, job: dict) -> bool:
        """A check of the judge (judge_withheld, judge_reversed): the same judge prompt once more on the
        recall snapshot as the check shows it (SQL withheld the source, or reversed the order, before
        handing the row out), metered under the check's own purpose. A check that keeps failing is
        dropped by release_work; the run never waits for it."""
        outcome = self._ask_judge(conn, job)
        with conn.transaction():
            self._meter(conn, job["kind"], self.config.judge_model, job, outcome)
            if outcome.failure is None:
                verdict: prompts.Judgment = outcome.value
                done = _scalar(
                    conn,
                    "record_judge_check",
                    {
                        "run_id": job["run_id"],
                        "probe_id": job["probe_id"],
                        "kind": job["kind"],
                        "with_memory": verdict.with_memory,
                        "without_memory": verdict.without_memory,
                    },
                )
                result = (
                    f"check recorded (with_memory={_yes(verdict.with_memory)}, "
                    f"without_memory={_yes(verdict.without_memory)})"
                    if done
                    else "check dropped: no longer queued"
                )
            else:
                result = self._release(conn, job, outcome.failure)
        log.info(
            "%s run=%s probe=%s owner=%s attempt=%s: %s%s",
            job["kind"],
            job["run_id"],
            job["probe_id"],
            job["owner_id"],
            job["attempt"],
            result,
            _usage_note(outcome),
        )
        return outcome.failure is None

    _KINDS: dict[str, Callable[[Worker, psycopg.Connection, dict], bool]] = {
        "judge": _judge,
        "closed_book": _closed_book,
        "judge_withheld": _judge_check,
        "judge_reversed": _judge_check,
        "write_question": _generate,
        "embed_question": _embed_question,
    }

    # ---- shared steps ------------------------------------------------------------------------

    def _stop_for_budget(self, conn: psycopg.Connection, job: dict, why: str) -> bool:
        """A spending cap refused the row's next call: a run's row stops its run (aborted_budget, its
        queued rows gone, so nothing keeps spending on it); a question to write waits (roi.defer_work)
        without spending an attempt. Counted as handled, not failed: nothing went wrong."""
        with conn.transaction():
            if job.get("run_id") is not None:
                closed = _scalar(conn, "abort_run_for_budget", {"run_id": job["run_id"]})
                result = "run stopped (aborted_budget)" if closed else "run already closed; its queued rows dropped"
            else:
                _scalar(conn, "defer_work", {"work_id": job["work_id"], "attempt": job["attempt"], "why": why})
                result = "put off for an hour"
        log.warning(
            "%s run=%s probe=%s owner=%s: no call made, %s: %s",
            job["kind"],
            job.get("run_id"),
            job["probe_id"],
            job["owner_id"],
            why,
            result,
        )
        return True

    def _check_budget(self, conn: psycopg.Connection, job: dict, model: str, prompt: str, byok: bool) -> None:
        """Raise BudgetRefusal when the caps (roi.settings) would not allow this call: its cost estimated
        from the prompt and litellm's local price map, added to what the run and the owner's month
        already spent (own-key calls count against the owner's month only)."""
        refusal = _scalar(
            conn,
            "budget_refusal",
            {
                "owner_id": job["owner_id"],
                "run_id": job.get("run_id"),
                "estimate": llm.estimate_cost(model, prompt),
                "byok": byok,
            },
        )
        if refusal is not None:
            raise BudgetRefusal(f"a call to {model} would cross {refusal}")

    @staticmethod
    def _release(conn: psycopg.Connection, job: dict, failure: str) -> str:
        """Hand a failed attempt back (roi.release_work: retry after a backoff, or give up the way the
        row's kind gives up); returns what happened, for the log line."""
        state = _scalar(
            conn, "release_work", {"work_id": job["work_id"], "attempt": job["attempt"], "failure": failure}
        )
        return f"{_FAILED[state]}: {failure}"

    def _store_minilm(self, conn: psycopg.Connection, job: dict, embedded: embeddings.Embedded) -> None:
        """The question's second embedding, metered as its own call, stored while the worker may still
        write the probe (before roi.record_question or roi.record_question_embedding hands it on)."""
        self._meter_embedding(conn, job, embedded.model, embedded)
        stored = {"probe_id": job["probe_id"], "embedding": embeddings.literal(embedded.vectors[0])}
        _scalar(conn, "record_question_embedding_minilm", {**stored, "embedding_model": embedded.model})

    @staticmethod
    def _meter_embedding(conn: psycopg.Connection, job: dict, model: str, embedded: embeddings.Embedded) -> None:
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
                "cost_usd": None,
            },
        )

    def _ask(
        self,
        conn: psycopg.Connection,
        job: dict,
        model: str,
        prompt: str,
        parse: Callable[[str], Any],
        schema: dict | None = None,
    ) -> Outcome:
        """Call the model on the owner's own key when they stored one, else the deployment's. A provider,
        network or parse failure becomes an Outcome the queue retries; anything else (a bug) releases
        the row and propagates. (Lanes are threads: Ctrl-C reaches run() in the main thread, never here.)"""
        reply = None
        byok = False
        try:
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
            except psycopg.DatabaseError as exc:
                if conn.broken:
                    raise  # the database went away: reconnect, the lease brings the row back
                # The owner's key cannot be opened (no passphrase, a wrong one): never swap in the
                # deployment's key; the row waits, and says why, until the operator fixes it.
                return Outcome(None, False, failure=describe(exc))
            byok = api_key is not None
            llm.check_fits(model, prompt, self.config.endpoint)
            self._check_budget(conn, job, model, prompt, byok)
            timeout = call_timeout(job["lease_seconds"], time.monotonic() - job["claimed_at"])
            if timeout is None:
                return Outcome(None, byok, failure="the row's lease has too little time left for a model call")
            reply = llm.call(
                self.complete,
                model=model,
                prompt=prompt,
                temperature=0,
                api_key=api_key,
                timeout=timeout,
                schema=schema,
                endpoint=self.config.endpoint,
            )
            return Outcome(reply, byok, value=parse(reply.text))
        except RETRYABLE as exc:
            return Outcome(reply, byok, failure=describe(exc))
        except llm.TooLong as exc:  # no call made; the queue retries, then gives up the row's own way
            return Outcome(None, byok, failure=str(exc))
        except BudgetRefusal:
            raise  # no call was made: step() stops the run or puts the row off
        except BaseException as exc:
            why = f"worker bug: {describe(exc)}"
            try:
                conn.execute(
                    query("release_work"), {"work_id": job["work_id"], "attempt": job["attempt"], "failure": why}
                )
            except psycopg.Error as lost:
                log.warning("could not release the row (%s); its lease brings it back", describe(lost))
            else:
                log.error("%s: %s, row released", job["kind"], why)
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
                "cost_usd": outcome.reply.cost_usd,
            },
        )

    def _wait(self, conn: psycopg.Connection) -> None:
        """NOTIFY wakes, polling guarantees: wait at most poll_seconds, in short slices so a stop is prompt."""
        deadline = time.monotonic() + self.config.poll_seconds
        self._lane_idle(True)
        try:
            while not self.stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                for _ in conn.notifies(timeout=min(remaining, 0.5), stop_after=1):
                    return
        finally:
            self._lane_idle(False)


_FAILED = {
    "retry": "failed, will retry",
    "retired": "failed for the last time, probe retired",
    "skipped": "failed for the last time, recorded as skipped",
    "stale": "failed, and the row had already moved on",
    "dropped": "failed for the last time, dropped",
}


def _flag(event: threading.Event, on: bool) -> None:
    if on:
        event.set()
    else:
        event.clear()


def _scalar(conn: psycopg.Connection, name: str, params: dict) -> Any:
    row = conn.execute(query(name), params).fetchone()
    return next(iter(row.values()))


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _usage_note(outcome: Outcome) -> str:
    if outcome.reply is None:
        return ""
    key = "own key" if outcome.byok else "deployment key"
    cost = "" if outcome.reply.cost_usd is None else f", ${outcome.reply.cost_usd:.6f}"
    return f" [{outcome.reply.input_tokens}+{outcome.reply.output_tokens} tokens{cost}, {key}]"


def run_worker(db_url: str, config: WorkerConfig, once: bool = False) -> Worker:
    """The `zm-roi worker` process: keys checked once, SIGTERM finishes the rows in hand.

    In deterministic mode nothing needs a model (templates write the questions, the judge is a
    retrieval check, and embedding a question needs no provider key), so the keys are only demanded
    when rows queued in LLM mode are still waiting.
    """
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        queue = conn.execute(query("worker_queue_state")).fetchone()
    if queue["extractor"] == "llm" or queue["queued"] > 0:
        llm.check_keys([config.generation_model, config.judge_model])
    worker = Worker(db_url, config)

    def on_sigterm(signum: int, frame: object) -> None:
        log.info("stopping after the rows in hand")
        worker.stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    if queue["extractor"] == "deterministic":
        log.info(
            "deterministic mode: questions come from templates and the judge is a retrieval check, "
            "so no row needs a model (the worker embeds questions)%s",
            f"; draining {queue['queued']} row(s) queued earlier in LLM mode" if queue["queued"] else "",
        )
    log.info(
        "worker up: generation %s, judge %s, %s call%s in flight at most%s",
        config.generation_model,
        config.judge_model,
        config.concurrency,
        "" if config.concurrency == 1 else "s",
        ", draining the queue once" if once else f", woken by NOTIFY roi_work, polling every {config.poll_seconds:g}s",
    )
    worker.run(once=once)
    log.info(
        "worker done: %s row%s handled: %s succeeded, %s failed%s",
        worker.handled,
        "" if worker.handled == 1 else "s",
        worker.succeeded,
        worker.failed,
        f" ({worker.attempts} attempts)" if worker.attempts != worker.handled else "",
    )
    if once:
        report_waiting(db_url)
    return worker


def report_waiting(db_url: str) -> None:
    """What `--once` left queued but not claimable yet (a backoff, or another worker's lease) and when
    the next is due: a run stays `judging` until they are done, so say so instead of a bare 0."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        queue = conn.execute(query("worker_queue_waiting")).fetchone()
    if queue["leased"]:
        log.info(
            "%s row%s in another worker's hands (leased)", queue["leased"], " is" if queue["leased"] == 1 else "s are"
        )
    if queue["waiting"]:
        log.info(
            "%s row%s out their backoff; the next is due in %d s (at %s): run `zm-roi worker` to take "
            "them as they come due, or `zm-roi worker --once` again then",
            queue["waiting"],
            " waits" if queue["waiting"] == 1 else "s wait",
            max(0, round(queue["due_in_seconds"])),
            queue["next_due"].astimezone(UTC).strftime("%H:%M:%S UTC"),
        )
