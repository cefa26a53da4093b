"""The worker keeps at most two malloc arenas (decision 0047): glibc gives threads that allocate at once
arenas of their own, each keeping what its thread freed."""

from __future__ import annotations

import subprocess
import sys

from zm_roi import worker

# Eight threads allocating at once through ctypes (which lets go of the GIL), then glibc's own count of
# its arenas: one "Arena n:" line each, on stderr.
PROBE = """
import ctypes, sys, threading
from zm_roi import worker
if sys.argv[1] == "fewer":
    assert worker.fewer_malloc_arenas()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
start = threading.Barrier(8)
def lane():
    start.wait()
    for _ in range(2000):
        libc.free(libc.malloc(4096))
lanes = [threading.Thread(target=lane) for _ in range(8)]
[t.start() for t in lanes]
[t.join() for t in lanes]
libc.malloc_stats()
"""


def _arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_eight_threads_allocating_at_once_share_two_arenas():
    """(Fails with fewer_malloc_arenas returning before its mallopt: glibc counts nine arenas.)"""
    assert _arenas("default") > worker.MALLOC_ARENAS
    assert _arenas("fewer") == worker.MALLOC_ARENAS


def test_the_worker_limits_its_arenas_before_its_lanes_start(monkeypatch):
    """(Fails with the call removed from Worker.run.)"""
    order = []
    monkeypatch.setattr(worker, "fewer_malloc_arenas", lambda: order.append("arenas"))
    monkeypatch.setattr(worker.Worker, "_lane", lambda self, once: order.append("lane"))
    config = worker.WorkerConfig("m", "m", concurrency=2, embedding_model=None, minilm_model=None)
    assert worker.Worker("postgresql://unused", config, complete=lambda **kwargs: None).run(once=True) == 0
    assert order == ["arenas", "lane", "lane"]
