"""The worker's side of the bench: the queue cost per row (claim + record, no model), the time 1, 2
and 4 `zm-roi worker` processes take to drain 10,000 queued judgments from a zero-latency
OpenAI-compatible endpoint on 127.0.0.1, and each process's peak memory (VmHWM)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from zm_roi import localdb
from zm_roi_bench.sql import Checkout, this_checkout
from zm_roi_bench.timing import Series

VERDICT = json.dumps({"with_memory": True, "without_memory": False, "confidence": 0.9, "reason": "bench"})
PER_RUN = 20
WORKER_COUNTS = (1, 2, 4)


class InstantModel(ThreadingHTTPServer):
    """An OpenAI-compatible chat endpoint that answers every judgment at once, with reported usage."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        reply = json.dumps(
            {
                "id": "bench",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": VERDICT}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 200, "completion_tokens": 30, "total_tokens": 230},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def instant_model() -> Iterator[InstantModel]:
    """An InstantModel serving on its own thread until the block ends."""
    model = InstantModel()
    threading.Thread(target=model.serve_forever, daemon=True).start()
    try:
        yield model
    finally:
        model.shutdown()
        model.server_close()


def worker_url_of(url: str) -> str:
    return make_conninfo(url, user="roi_worker", password=localdb.WORKER_PASSWORD)


def seed(url: str, rows: int, checkout: Checkout) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(checkout.bench_query("seed_judgments"), {"runs": rows // PER_RUN, "per_run": PER_RUN})


def queue_cost(url: str, worker_url: str, rows: int = 1000, checkout: Checkout | None = None) -> dict:
    """Claim + record per row, as the worker role, with no model in between: what the queue costs."""
    checkout = checkout or this_checkout()
    seed(url, rows, checkout)
    series = Series()
    with psycopg.connect(worker_url, autocommit=True, row_factory=dict_row) as conn:
        for _ in range(rows):
            started = time.perf_counter()
            job = conn.execute(checkout.claim_judgment).fetchone()
            with conn.transaction():
                conn.execute(
                    checkout.query("record_usage"),
                    {
                        "owner_id": job["owner_id"],
                        "purpose": "judgment",
                        "model": "bench",
                        "run_id": job["run_id"],
                        "probe_id": job["probe_id"],
                        "input_tokens": 200,
                        "output_tokens": 30,
                        "byok": False,
                        "cost_usd": None,
                    },
                )
                conn.execute(
                    checkout.query("record_verdict"),  # a checkout without the fingerprint ignores it
                    {
                        "run_id": job["run_id"],
                        "probe_id": job["probe_id"],
                        "with_memory": True,
                        "without_memory": False,
                        "confidence": 0.9,
                        "reason": "bench",
                        "judge_fingerprint": "bench#judge.j2",
                    },
                )
            series.add((time.perf_counter() - started) * 1000)
    return series.summary()


def _peak_rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


# A judgment whose attempt failed (a provider or network error, retried by the queue) waits out its
# backoff, e^attempts seconds, and `--once` processes exit without it. A drain starts its workers again
# once the first backoffs are due, twice at most, so a failure is a figure of the report (`put_off`, with
# the errors) instead of a partial drain; the drain time then includes the wait.
ROUND_WAITS_S = (3.0, 8.0)  # just past e^1 and e^2 seconds, the backoffs after a first and second attempt


def drain(
    url: str, worker_url: str, workers: int, rows: int, model: InstantModel, checkout: Checkout | None = None
) -> dict:
    """`workers` processes of `zm-roi worker --once` (the checkout's own worker) on 10,000 fresh judgments.
    The drain time is the span from the first verdict to the last, so the processes' start-up (importing
    litellm) is left out; judgments a failed attempt put off are taken by further rounds (ROUND_WAITS_S)."""
    checkout = checkout or this_checkout()
    with psycopg.connect(url) as conn:
        since = conn.execute("select clock_timestamp()").fetchone()[0]
    seed(url, rows, checkout)
    env = {
        **os.environ,
        "PYTHONPATH": checkout.python_path,
        "ZM_WORKER_DB_URL": worker_url,
        "ZM_JUDGE_MODEL": "openai/bench-judge",
        "ZM_GENERATION_MODEL": "openai/bench-generator",
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_API_BASE": model.url,
        "NO_PROXY": "127.0.0.1,localhost",
        # The bench's deterministic runs left templated questions queued for embedding; they come after
        # every judgment (urgency), and with embeddings off each just leaves, so the processes exit
        # promptly once the judgments are drained.
        "ZM_EMBEDDING_MODEL": "none",
    }
    env.pop("OPENAI_BASE_URL", None)
    exit_codes, peak = _run_workers(checkout, env, workers)
    put_off: list[dict] = []
    for wait_s in ROUND_WAITS_S:
        waiting = _judgments_waiting(url, checkout)
        if not waiting:
            break
        put_off.append({"rows": sum(waiting.values()), "errors": waiting})
        time.sleep(wait_s)
        codes, round_peak = _run_workers(checkout, env, workers)
        exit_codes += codes
        peak = max(peak, round_peak)
    with psycopg.connect(url) as conn:
        span_ms, judged = conn.execute(checkout.bench_query("drain_span_ms"), {"since": since}).fetchone()
        left = conn.execute(checkout.bench_query("queued_judgments")).fetchone()[0]
    return {
        "workers": workers,
        "ms": round(float(span_ms or 0), 1),
        "judged": judged,
        "left_in_queue": left,
        "put_off": put_off,
        "exit_codes": exit_codes,
        "peak_rss_mb": round(peak, 1),
    }


def _run_workers(checkout: Checkout, env: dict, workers: int) -> tuple[list[int], float]:
    """One round: `workers` processes of `zm-roi worker --once`, until all exit; their exit codes and the
    highest peak memory among them."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "zm_roi.cli", "worker", "--once"],
            env=env,
            cwd=checkout.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    peaks = {p.pid: 0.0 for p in processes}
    while any(p.poll() is None for p in processes):
        for p in processes:
            peaks[p.pid] = max(peaks[p.pid], _peak_rss_mb(p.pid) or 0.0)
        time.sleep(0.2)
    return [p.returncode for p in processes], max(peaks.values())


def _judgments_waiting(url: str, checkout: Checkout) -> dict[str, int]:
    """The judgments still queued after a round, counted by the error of their last attempt."""
    with psycopg.connect(url) as conn:
        left = conn.execute(checkout.bench_query("queued_judgments")).fetchone()[0]
        if not left:
            return {}
        try:
            by_error = checkout.bench_query("judgments_waiting")
        except KeyError:  # an older checkout's bench: counted, not explained
            return {"(not recorded by this checkout's bench)": left}
        return dict(conn.execute(by_error).fetchall())


def measure(url: str, queue_rows: int, drain_rows: int, say=print) -> dict:
    """Everything the report shows for the worker."""
    worker_url = worker_url_of(url)
    say("measuring: worker queue cost per row")
    cost = queue_cost(url, worker_url, queue_rows)
    runs = {}
    with instant_model() as model:
        for workers in WORKER_COUNTS:
            say(f"measuring: {workers} worker process(es) draining {drain_rows:,} judgments")
            runs[str(workers)] = drain(url, worker_url, workers, drain_rows, model)
    return {
        "status": "measured",
        "detail": f"queue cost over {cost['n']} rows; drains of {drain_rows:,} judgments",
        "queue_cost": cost,
        "queue_cost_per_row_ms": cost["p50"],
        "drains": runs,
        "drain_ms": {k: v["ms"] for k, v in runs.items()},
        "peak_rss_mb": max(v["peak_rss_mb"] for v in runs.values()),
    }
