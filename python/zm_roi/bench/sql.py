"""The bench's SQL: named queries in python/zm_roi/queries.sql (prefixed `bench_`), and the corpus
script kept in `sql/bench/` at the root of the checkout."""

from __future__ import annotations

from pathlib import Path

from zm_roi.localdb import project_root
from zm_roi.queries import query


def sql_dir() -> Path:
    return project_root() / "sql" / "bench"


def bench_query(name: str) -> str:
    """The text of the named bench query (`bench_NAME` in python/zm_roi/queries.sql)."""
    return query(f"bench_{name}")
