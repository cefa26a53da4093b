"""The bench's SQL, kept in `sql/bench/` at the root of the checkout and looked up by name."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from zm_roi.localdb import project_root
from zm_roi.queries import named_queries


def sql_dir() -> Path:
    return project_root() / "sql" / "bench"


@cache
def _all() -> dict[str, str]:
    return named_queries(sql_dir() / "queries.sql")


def bench_query(name: str) -> str:
    """The text of a named query in sql/bench/queries.sql."""
    return _all()[name]
