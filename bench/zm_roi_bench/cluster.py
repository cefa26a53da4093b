"""The bench's own throwaway cluster, and what the report says about the machine and the server.

The bench never touches the user's embedded database: it builds a cluster in a temporary folder on
a free port exactly as the embedded one is built (compat layer, then every migration through the
Supabase CLI), runs on it, and removes it at the end.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from zm_roi import localdb
from zm_roi_bench.sql import Checkout, bench_query

# Only the bulk load is tuned: fewer checkpoints while a million rows go in. Nothing here changes
# how a query is planned or how fast it runs once loaded; the report lists these next to the rest.
BENCH_SERVER_SETTINGS = {
    "max_wal_size": "'4GB'",
    "checkpoint_timeout": "'30min'",
    "track_io_timing": "on",
}

# What the report quotes from pg_settings: the knobs that decide plans, memory and caching.
REPORTED_SETTINGS = (
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "effective_cache_size",
    "random_page_cost",
    "max_parallel_workers_per_gather",
    "jit",
    "max_connections",
    "max_wal_size",
    "checkpoint_timeout",
    "track_io_timing",
    "synchronous_commit",
    "shared_preload_libraries",
)


@contextlib.contextmanager
def throwaway_cluster(root: Path, say=print, settings: dict | None = None) -> Iterator[localdb.Cluster]:
    """A migrated cluster with the upkeep cron job deactivated; stopped and removed afterwards.
    `settings` are added to (or override) the bench's server settings, e.g. a preloaded library."""
    home = Path(tempfile.mkdtemp(prefix="zm-roi-bench-"))
    home.chmod(0o755)
    cluster = localdb.Cluster(home=home, port=localdb.free_port())
    try:
        say(f"creating a throwaway cluster in {home} on port {cluster.port}")
        cluster.create()
        with open(cluster.pgdata / "postgresql.conf", "a") as conf:
            conf.write("\n# zm-roi bench: bulk load only\n")
            chosen = {**BENCH_SERVER_SETTINGS, **(settings or {})}
            conf.writelines(f"{key} = {value}\n" for key, value in chosen.items())
        cluster.start()
        say("applying the compatibility layer and migrations (supabase db push)")
        localdb.prepare_database(cluster, root, compat=Checkout(root).compat_layer)
        localdb.set_extractor(cluster.url(), "deterministic")
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            # Upkeep is measured by calling roi.upkeep() directly; the minute job would disturb it.
            conn.execute(bench_query("deactivate_cron"))
        yield cluster
    finally:
        cluster.destroy()


def machine() -> dict:
    """CPU model, cores and memory of this machine, and its load when the bench started."""
    cpu_model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    memory_gb = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    return {
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def server(conn: psycopg.Connection) -> dict:
    """PostgreSQL version and the settings that matter for these measurements."""
    version = conn.execute("select version()").fetchone()[0]
    rows = conn.execute(bench_query("reported_settings"), {"names": list(REPORTED_SETTINGS)}).fetchall()
    return {"version": version, "settings": {name: value for name, value in rows}}


def conditions(cluster: localdb.Cluster) -> dict:
    """The server's counters (server_counters) and how much of the database's files the page cache
    holds. Two clusters measured side by side differ for these alone when one reads from disk,
    checkpoints or vacuums while the other does not, so the side-by-side report shows both."""
    with psycopg.connect(cluster.url(), row_factory=dict_row) as conn:
        counters = conn.execute(bench_query("server_counters")).fetchone()
    return dict(counters) | {"page_cache": page_cache(cluster.pgdata / "base")}


def read_into_page_cache(*folders: Path) -> int:
    """Read every file under each folder once, the folders' files in turn a megabyte at a time, so the page
    cache holds all of them and none for longer than the others; returns the bytes read. This machine's
    kernel pages out what nobody touched for about a minute (DAMON reclaim: `pageout`, age ≥ 12 intervals
    of 5 s), so at 1M the cluster built first had lost a third of its files by the rounds and measured
    slower on the same code. Read one after the other, the first folder had again lost a quarter (76%
    held against 99%) by the time the second was read."""
    chunks = [_chunks(folder) for folder in folders]
    return sum(len(chunk) for turn in itertools.zip_longest(*chunks, fillvalue=b"") for chunk in turn)


def _chunks(folder: Path) -> Iterator[bytes]:
    for path in (path for path in folder.rglob("*") if path.is_file()):
        with contextlib.suppress(OSError), path.open("rb") as file:
            while chunk := file.read(1 << 20):
                yield chunk


def page_cache(folder: Path) -> dict | None:
    """Bytes of the files under `folder` and how many of them are in the page cache (util-linux
    `fincore`); None where fincore is missing or may not read the files."""
    files = [str(path) for path in folder.rglob("*") if path.is_file()]
    try:
        listing = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *files],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    sizes = [tuple(map(int, line.split())) for line in listing.splitlines() if line.strip()]
    # fincore counts whole pages: a file's last page, partly filled, would count for more than the file.
    return {"cached_bytes": sum(min(cached, size) for cached, size in sizes), "bytes": sum(size for _, size in sizes)}
