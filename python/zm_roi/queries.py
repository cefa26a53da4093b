"""The SQL the Python side runs, kept in named-query files and looked up by name: `queries.sql` here
for the product, bench/zm_roi_bench/queries.sql for the bench (read through zm_roi_bench.sql.bench_query).

Each query in a file starts with a `-- name: some_name` line, as procrastinate does.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)

QUERIES = Path(__file__).parent / "queries.sql"


@cache
def named_queries(path: Path) -> dict[str, str]:
    """Every `-- name: …` query of a SQL file, by name (the file is read once)."""
    parts = _NAME.split(path.read_text())
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(name: str, path: Path = QUERIES) -> str:
    """The text of the named query in `path`; a KeyError names a query that does not exist."""
    return named_queries(path)[name]
