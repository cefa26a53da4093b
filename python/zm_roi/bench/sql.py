"""The bench's SQL: named queries in python/zm_roi/bench/queries.sql, and the corpus script kept in
`sql/bench/` at the root of the checkout."""

from __future__ import annotations

from pathlib import Path

from zm_roi.localdb import project_root
from zm_roi.queries import query

QUERIES = Path(__file__).parent / "queries.sql"


def sql_dir() -> Path:
    return project_root() / "sql" / "bench"


def bench_query(name: str) -> str:
    """The text of the named bench query (`-- name: NAME` in python/zm_roi/bench/queries.sql)."""
    return query(name, QUERIES)
