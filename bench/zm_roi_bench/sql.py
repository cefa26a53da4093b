"""The bench's SQL, beside this file: named queries in queries.sql and the corpus generator corpus.sql."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zm_roi import localdb
from zm_roi.queries import named_queries, query

QUERIES = Path(__file__).parent / "queries.sql"
CORPUS = Path(__file__).parent / "corpus.sql"

# Where older commits kept the files `make bench BASE=…` reads from their checkout, newest first.
_BENCH_QUERIES = ("bench/zm_roi_bench/queries.sql", "python/zm_roi/bench/queries.sql")
_COMPAT_LAYERS = (localdb.COMPAT_LAYER, "sql/supabase_compat.sql")


def bench_query(name: str) -> str:
    """The text of the named bench query (`-- name: NAME` in queries.sql)."""
    return query(name, QUERIES)


@dataclass(frozen=True)
class Checkout:
    """A checkout of zm-roi (this one, or another commit's files in a folder): the named queries and the
    worker its database is called through. `make bench BASE=…` measures an older database through the
    verbs that database has, which are not always this checkout's (before the one work queue, the
    judgments had their own claim function)."""

    root: Path

    @property
    def _product(self) -> Path:
        return self.root / "python" / "zm_roi" / "queries.sql"

    def bench_query(self, name: str) -> str:
        for own_file in (self.root / path for path in _BENCH_QUERIES):
            if own_file.is_file():
                return query(name, own_file)
        return query(f"bench_{name}", self._product)  # before the bench's queries had their own file

    @property
    def compat_layer(self) -> Path:
        """The SQL that makes plain PostgreSQL look like Supabase, wherever this checkout keeps it."""
        return next((self.root / p for p in _COMPAT_LAYERS if (self.root / p).is_file()), self.root / _COMPAT_LAYERS[0])

    def query(self, name: str) -> str:
        return query(name, self._product)

    @property
    def claim_judgment(self) -> str:
        """The claim verb that hands the worker its next judgment."""
        return self.query("claim_work" if "claim_work" in named_queries(self._product) else "claim_judgment")

    @property
    def python_path(self) -> str:
        """Where this checkout's package is, for the worker processes started on its database."""
        return str(self.root / "python")


def this_checkout() -> Checkout:
    return Checkout(localdb.project_root())
