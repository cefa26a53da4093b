"""The SQL the Python side runs, kept in one file (`queries.sql`) and looked up by name.

Each query in the file starts with a `-- name: some_name` line, as procrastinate does.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def named_queries(path: Path) -> dict[str, str]:
    """Every `-- name: …` query of a SQL file, by name."""
    parts = _NAME.split(path.read_text())
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


@cache
def _all() -> dict[str, str]:
    return named_queries(Path(__file__).parent / "queries.sql")


def query(name: str) -> str:
    """The text of the named query; a KeyError names a query that does not exist."""
    return _all()[name]
