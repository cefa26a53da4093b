"""Bytes per memory split by structure, and how many memories a database of a given size holds at that rate.

The one home of that figure for the layer bench (`make bench SIZE=layers`), the pages bench (pages.py) and
the layout routes (routes.py). The parts (`storage_split` in queries.sql): the memories' heap, their TOAST
table with its index, each index on the memories by name (the covering vector indexes and any layer's HNSW
index among them), the postings' heap and each of their indexes; together pg_total_relation_size of the two
tables. Bytes per memory divide each part by every row of public.memories (the importer's first rows
included). What a database "holds" divides its size by the all-in rate, nothing else counted: the catalogs,
the ROI tables and the WAL a real database also keeps are left out, so it is an upper bound.
"""

from __future__ import annotations

import psycopg

from zm_roi_bench.sql import bench_query

# Supabase's Free plan database cap, the disk Pro includes, and a large database; decimal units, as the
# plans state them.
DATABASE_SIZES = {"500 MB": 500 * 10**6, "8 GB": 8 * 10**9, "100 GB": 100 * 10**9}
# The goal: a million memories within Pro's 8 GB.
GOAL_BYTES_PER_MEMORY = 8_000


def split(parts: list[tuple[str, str, int]], memories: int, postings: int) -> dict:
    """The figure from `storage_split`'s rows (part, relation, bytes) and the row counts."""
    total = sum(b for _, _, b in parts)
    per_memory = total / memories
    return {
        "memories": memories,
        "postings": postings,
        "postings_per_memory": round(postings / memories, 1),
        "parts": [
            {"part": part, "relation": relation, "bytes": b, "per_memory": round(b / memories)}
            for part, relation, b in parts
        ],
        "total_bytes": total,
        "per_memory": round(per_memory),
        "holds": holds(per_memory),
    }


def holds(per_memory: float) -> dict[str, int]:
    """Memories each database size holds at `per_memory` bytes a memory (rounded down)."""
    return {name: int(size // per_memory) for name, size in DATABASE_SIZES.items()}


def measure(conn: psycopg.Connection) -> dict:
    parts = [tuple(row) for row in conn.execute(bench_query("storage_split")).fetchall()]
    memories, postings = conn.execute(bench_query("storage_counts")).fetchone()
    return split(parts, memories, postings)


def subtotals(figure: dict) -> dict[str, int]:
    """Bytes per memory per kind of part (all of the memories' indexes together, and so on)."""
    sums: dict[str, int] = {}
    for p in figure["parts"]:
        sums[p["part"]] = sums.get(p["part"], 0) + p["bytes"]
    return {part: round(b / figure["memories"]) for part, b in sums.items()}


def render(figure: dict) -> str:
    """The split as a markdown table, then what each database size holds."""
    total = figure["total_bytes"]
    lines = [
        "| structure | relation | MB | bytes per memory | share |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in figure["parts"]:
        lines.append(
            f"| {p['part']} | `{p['relation']}` | {p['bytes'] / 10**6:,.1f} | {p['per_memory']:,} "
            f"| {p['bytes'] / total:.1%} |"
        )
    lines.append(f"| **all in** | | **{total / 10**6:,.1f}** | **{figure['per_memory']:,}** | 100% |")
    held = ", ".join(f"{name}: {count:,}" for name, count in figure["holds"].items())
    lines += [
        "",
        f"{figure['memories']:,} memories, {figure['postings']:,} postings ({figure['postings_per_memory']} a memory). "
        f"At {figure['per_memory']:,} bytes a memory a database holds at most {held} memories "
        f"(decimal units; catalogs, ROI tables and WAL not counted).",
    ]
    return "\n".join(lines)
