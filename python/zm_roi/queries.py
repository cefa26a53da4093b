"""The SQL the Python side runs, kept in one file (`queries.sql`) and looked up by name.

Each query in the file starts with a `-- name: some_name` line, as procrastinate does.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def _all() -> dict[str, str]:
    text = (Path(__file__).parent / "queries.sql").read_text()
    parts = _NAME.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(name: str) -> str:
    """The text of the named query; a KeyError names a query that does not exist."""
    return _all()[name]
