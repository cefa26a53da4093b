"""The side-by-side bench's page cache: what `fincore` says a folder's files hold, and the reading that
puts both clusters' files back in it before the rounds (a cluster built first had lost a third of its)."""

from __future__ import annotations

import os

from zm_roi_bench.cluster import page_cache, read_into_page_cache


def _evict(folder):
    for path in (path for path in folder.rglob("*") if path.is_file()):
        with path.open("rb") as file:
            os.fsync(file.fileno())
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def test_files_evicted_from_the_page_cache_are_held_again_once_read(tmp_path):
    sizes = {"16384": 3 << 20, "16385": 5000, "PG_VERSION": 3}
    for side in ("base", "head"):
        (tmp_path / side / "5").mkdir(parents=True)
        for name, size in sizes.items():
            (tmp_path / side / "5" / name).write_bytes(os.urandom(size))
    total = sum(sizes.values())
    _evict(tmp_path)
    for side in ("base", "head"):
        evicted = page_cache(tmp_path / side)
        assert evicted["bytes"] == total and evicted["cached_bytes"] < total // 2, side

    assert read_into_page_cache(tmp_path / "base", tmp_path / "head") == 2 * total
    for side in ("base", "head"):
        assert page_cache(tmp_path / side) == {"cached_bytes": total, "bytes": total}, side
