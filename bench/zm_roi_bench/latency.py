"""What a user waits for with a real model's latency (issue 13): one `zm-roi worker` process and an
OpenAI-compatible endpoint on 127.0.0.1 that takes `delay` seconds per call. Timed from the
benchmark_memory() call that queued the work to the moment the database shows it done: the pool of
20 questions written, then the run of 20 judged. Also the worker's peak memory (VmHWM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from zm_roi import localdb
from zm_roi.identity import act_as, claims_for
from zm_roi.queries import query
from zm_roi.settings import DEFAULT_WORKER_CONCURRENCY
from zm_roi_bench.sql import bench_query

POOL = 20
VERDICT = json.dumps({"with_memory": True, "without_memory": False, "confidence": 0.9, "reason": "bench"})


class SlowModel(ThreadingHTTPServer):
    """Answers every chat completion after `delay` seconds, as a hosted model would."""

    daemon_threads = True

    def __init__(self, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), _SlowAnswer)
        self.delay = delay
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.calls = 0
        self.lock = threading.Lock()


class _SlowAnswer(BaseHTTPRequestHandler):
    server: SlowModel

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.calls += 1
            number = self.server.calls
        time.sleep(self.server.delay)
        if "judge" in body["model"]:
            content = VERDICT
        else:
            content = json.dumps({"question": f"Which setting did we settle on for latency topic {number}?"})
        reply = json.dumps(
            {
                "id": "bench",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
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


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _wait(conn: psycopg.Connection, done, process: subprocess.Popen, peak: list[float], timeout: float) -> float:
    """Seconds until `done()` holds, watching the worker's memory meanwhile."""
    started = time.monotonic()
    while not done():
        peak[0] = max(peak[0], _peak_rss_mb(process.pid))
        if process.poll() is not None:
            raise RuntimeError(f"the worker exited early ({process.returncode})")
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"not done after {timeout:.0f} s")
        time.sleep(0.02)
    return time.monotonic() - started


def _benchmark(conn: psycopg.Connection, owner) -> dict:
    with conn.transaction():
        act_as(conn, claims_for(owner))
        return conn.execute(query("benchmark_memory")).fetchone()[0]


def measure(url: str, delay: float = 1.0, concurrency: int = DEFAULT_WORKER_CONCURRENCY, say=print) -> dict:
    worker_url = make_conninfo(url, user="roi_worker", password=localdb.WORKER_PASSWORD)
    model = SlowModel(delay)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "ZM_WORKER_DB_URL": worker_url,
        "ZM_JUDGE_MODEL": "openai/bench-judge",
        "ZM_GENERATION_MODEL": "openai/bench-generator",
        "ZM_WORKER_CONCURRENCY": str(concurrency),
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_API_BASE": model.url,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.pop("OPENAI_BASE_URL", None)
    process = None
    checks = None
    with psycopg.connect(url, autocommit=True) as conn:
        extractor = conn.execute(bench_query("get_extractor")).fetchone()[0]
        try:
            owner = conn.execute(bench_query("latency_owner")).fetchone()[0]
            conn.execute(bench_query("latency_memories"), {"owner": owner, "count": POOL + 4})
            conn.execute(bench_query("set_extractor"), {"extractor": "llm"})
            # The judge's checks run after a run closes; with them off the calls counted are the run's
            # (20 questions, 20 verdicts), as in the reports before the checks existed.
            checks = conn.execute(bench_query("set_judge_checks"), {"withheld": 0, "order": 0}).fetchone()
            say(f"measuring: one worker ({concurrency} in flight), a {delay:g} s model, pool and run of {POOL}")
            process = subprocess.Popen(
                [sys.executable, "-m", "zm_roi.cli", "worker"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            peak = [0.0]
            _wait(
                conn,
                lambda: conn.execute(bench_query("idle_worker_lanes")).fetchone()[0] >= concurrency,
                process,
                peak,
                timeout=120,
            )
            started = time.monotonic()
            first = _benchmark(conn, owner)
            pool_s = (
                time.monotonic()
                - started
                + _wait(
                    conn,
                    lambda: conn.execute(bench_query("active_probes_of"), {"owner": owner}).fetchone()[0] >= POOL,
                    process,
                    peak,
                    timeout=600,
                )
            )
            started = time.monotonic()
            run = _benchmark(conn, owner)
            run_s = (
                time.monotonic()
                - started
                + _wait(
                    conn,
                    lambda: conn.execute(bench_query("run_closed"), {"run_id": run["run_id"]}).fetchone()[0],
                    process,
                    peak,
                    timeout=600,
                )
            )
        finally:
            if process is not None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
            conn.execute(bench_query("set_extractor"), {"extractor": extractor})
            if checks is not None:
                conn.execute(bench_query("set_judge_checks"), {"withheld": checks[0], "order": checks[1]})
            model.shutdown()
            model.server_close()
    return {
        "status": "measured",
        "model_delay_s": delay,
        "concurrency": concurrency,
        "first_call": first.get("status"),
        "run_probes": run.get("probes"),
        "pool_ms": round(pool_s * 1000, 1),
        "run_ms": round(run_s * 1000, 1),
        "model_calls": model.calls,
        "peak_rss_mb": round(peak[0], 1),
        "exit_code": process.returncode,
    }
