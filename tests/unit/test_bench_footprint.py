"""Bytes per memory split by structure: the arithmetic and the report's table, on sizes given by hand."""

from zm_roi_bench import footprint

PARTS = [
    ("memories heap", "public.memories", 6_000_000),
    ("memories TOAST", "pg_toast.pg_toast_1", 1_000_000),
    ("memories index", "public.memories_project_embedding_idx", 2_000_000),
    ("postings heap", "public.memory_postings", 8_000_000),
    ("postings index", "public.memory_postings_pkey", 3_000_000),
]


def test_each_part_and_the_total_are_divided_by_the_memories():
    figure = footprint.split(PARTS, memories=1_000, postings=46_000)
    assert [p["per_memory"] for p in figure["parts"]] == [6_000, 1_000, 2_000, 8_000, 3_000]
    assert figure["total_bytes"] == 20_000_000
    assert figure["per_memory"] == 20_000
    assert figure["postings_per_memory"] == 46.0
    assert footprint.subtotals(figure) == {
        "memories heap": 6_000,
        "memories TOAST": 1_000,
        "memories index": 2_000,
        "postings heap": 8_000,
        "postings index": 3_000,
    }


def test_what_a_database_holds_at_that_rate():
    # 500 MB / 20 kB = 25,000; 8 GB / 20 kB = 400,000; 100 GB / 20 kB = 5,000,000.
    assert footprint.holds(20_000) == {"500 MB": 25_000, "8 GB": 400_000, "100 GB": 5_000_000}
    # Rounded down: 500,000,000 / 26,000 = 19,230.8.
    assert footprint.holds(26_000)["500 MB"] == 19_230
    # The goal's rate fits a million memories in 8 GB.
    assert footprint.holds(footprint.GOAL_BYTES_PER_MEMORY)["8 GB"] == 1_000_000


def test_the_table_names_every_relation_and_the_all_in_rate():
    text = footprint.render(footprint.split(PARTS, memories=1_000, postings=46_000))
    assert "| memories index | `public.memories_project_embedding_idx` | 2.0 | 2,000 | 10.0% |" in text
    assert "| postings heap | `public.memory_postings` | 8.0 | 8,000 | 40.0% |" in text
    assert "| **all in** | | **20.0** | **20,000** | 100% |" in text
    assert "500 MB: 25,000, 8 GB: 400,000, 100 GB: 5,000,000 memories" in text
