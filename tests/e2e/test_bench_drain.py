"""The bench's drain (queue.drain) against a model whose first reply is an error: the judgment that
failed waits out its backoff, and the drain's next round takes it, so the report says what was put off
and why instead of counting a partial drain."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import psycopg
import pytest

from tests.conftest import throwaway_cluster
from zm_roi_bench import queue


class _FirstReplyFails(queue._Answer):
    def do_POST(self):  # noqa: N802 - http.server's naming
        if self.server.failed.is_set():
            return super().do_POST()
        self.server.failed.set()
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_error(503, "overloaded for the test")


class _Model(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _FirstReplyFails)
        self.failed = threading.Event()  # this server's first reply only
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture
def url():
    with throwaway_cluster() as cluster:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("insert into auth.users (email) values ('drain-1@bench.test'), ('drain-2@bench.test')")
        yield cluster.url()


def test_a_judgment_put_off_by_a_failed_attempt_is_drained_by_the_next_round(url):
    model = _Model()
    threading.Thread(target=model.serve_forever, daemon=True).start()
    try:
        drained = queue.drain(url, queue.worker_url_of(url), 1, 2 * queue.PER_RUN, model)
    finally:
        model.shutdown()
        model.server_close()
    assert drained["judged"] == 2 * queue.PER_RUN and drained["left_in_queue"] == 0
    assert drained["exit_codes"] == [0, 0], "a second round of one process"
    [put_off] = drained["put_off"]
    [(error, count)] = put_off["errors"].items()
    assert put_off["rows"] == count == 1 and "503" in error, put_off
