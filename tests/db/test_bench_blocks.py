"""The blocks lab (bench/zm_roi_bench/blocks.py) compares like with like: every way it reads a question's
lists from blocks in impact order sums the same impacts as the lexical leg's read of the real postings, at a
cut inside a block, at a block's edge and past a list's end."""

from __future__ import annotations

import json

import pytest

from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.localdb import project_root
from zm_roi_bench import blocks
from zm_roi_bench.sql import bench_query

BLOCK_SIZE = 4
# One posting, a cut inside a block, a block's edge, one past it, and every posting of any list here.
PER_TERM = (1, 3, 4, 5, 9, 1500)


@pytest.fixture
def layer(conn, email) -> str:
    demo = project_root() / "python" / "zm_roi" / "data" / "demo_corpus.jsonl"
    rows = [json.loads(line) for line in demo.read_text(encoding="utf-8").splitlines() if line.strip()]
    insert_memories(
        conn,
        [MemoryLine(kind=r["kind"], title=r["title"], body=r["body"]) for r in rows],
        Target(email, project="blocks-lab"),
    )
    conn.execute("create schema blocks_scratch")
    name, statements = blocks.block_table(BLOCK_SIZE)
    conn.execute(statements)
    return conn.execute("select id from public.projects where name = 'blocks-lab'").fetchone()[0]


def _summed(conn, text: str, layer, question: str, per_term: int) -> float:
    total, _ = conn.execute(text, {"question": question, "layer": layer, "per_term": per_term}).fetchone()
    return round(float(total or 0), 4)


def test_every_block_read_sums_the_impacts_the_postings_read_sums(conn, layer):
    name, _ = blocks.block_table(BLOCK_SIZE)
    reads = blocks.block_reads(name, BLOCK_SIZE)
    assert len(reads) == len(blocks.READS)
    questions = ["How do we deploy the service and run the migrations?", "Which database setting did we choose?"]
    cut = 0
    for question in questions:
        for per_term in PER_TERM:
            expected = _summed(conn, bench_query("blocks_postings_read"), layer, question, per_term)
            for label, text in reads.items():
                assert _summed(conn, text, layer, question, per_term) == pytest.approx(expected, abs=1e-3), (
                    label,
                    question,
                    per_term,
                )
            cut += expected < _summed(conn, bench_query("blocks_postings_read"), layer, question, 1500)
    # The cuts below a list's length were exercised, not only whole lists.
    assert cut >= 2 * (len(PER_TERM) - 2)


def test_a_list_is_split_into_blocks_of_the_size_in_impact_order(conn, layer):
    name, _ = blocks.block_table(BLOCK_SIZE)
    longest = conn.execute(
        f"""select lexeme, count(*) as blocks, max(cardinality(memory_ids)) as widest,
                   bool_and(impacts = (select array_agg(i order by i desc) from unnest(impacts) i)) as sorted
            from blocks_scratch.{name} where layer_id = %s group by lexeme order by count(*) desc limit 1""",
        (layer,),
    ).fetchone()
    lexeme, count, widest, each_sorted = longest
    postings = conn.execute(
        "select count(*) from public.memory_postings where layer_id = %s and lexeme = %s", (layer, lexeme)
    ).fetchone()[0]
    assert count == -(-postings // BLOCK_SIZE) and count > 2
    assert widest == BLOCK_SIZE
    assert each_sorted
    # Block n's lowest impact is at least block n + 1's highest.
    edges = conn.execute(
        f"""select impacts[cardinality(impacts)], lead(impacts[1]) over (order by block)
            from blocks_scratch.{name} where layer_id = %s and lexeme = %s order by block""",
        (layer, lexeme),
    ).fetchall()
    assert all(nxt is None or low >= nxt for low, nxt in edges)
