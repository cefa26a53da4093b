"""The blocks lab (bench/zm_roi_bench/blocks.py) compares like with like: every way it reads a question's
lists from blocks in impact order sums the same impacts as the lexical leg's read of the real postings, at a
cut inside a block, at a block's edge and past a list's end; and the lexical leg it makes read the blocks
finds, as the member, what the shipped leg finds, and calls the same lists cut."""

from __future__ import annotations

import json

import pytest

from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.localdb import project_root
from zm_roi_bench import blocks, pool
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


def test_the_leg_reading_blocks_finds_as_the_member_what_the_leg_reading_postings_finds(conn, layer, email):
    """Asked one lexeme whose list holds n postings, at per_term n - 1, n and n + 1 and a pool of 0, the leg
    returns nothing when it calls the list cut (n >= per_term) and the list's best otherwise: both legs must
    return the same, list lengths covering every position in a block of 4."""
    name, _ = blocks.block_table(BLOCK_SIZE)
    conn.execute(bench_query("blocks_member_reads").replace("{name}", name))
    postings_leg = pool.replaced(pool.leg_definition(conn), pool.SETTABLE)
    legs = (postings_leg, blocks.leg_reading_blocks(postings_leg, name, BLOCK_SIZE))
    user_id = conn.execute("select id from auth.users where email = %s", (email,)).fetchone()[0]
    # One lexeme per list length from 2 to 13, each its own question (a word that parses to itself).
    lists = conn.execute(
        """select distinct on (n) lexeme, n from (
             select lexeme, count(*) as n from public.memory_postings where layer_id = %s group by lexeme) x
           where n between 2 and 13 and tsvector_to_array(to_tsvector('english', lexeme)) = array[lexeme]
           order by n, lexeme""",
        (layer,),
    ).fetchall()
    assert {n % BLOCK_SIZE for _, n in lists} == set(range(BLOCK_SIZE))
    for lexeme, n in lists:
        for per_term in (n - 1, n, n + 1):
            found = []
            for leg in legs:
                conn.execute(leg)
                conn.execute("select set_config('bench.per_term', %s, true)", (str(per_term),))
                act_as(conn, claims_for(user_id, email))
                found.append(
                    conn.execute(
                        "select memory_id, score from roi.recall_lexical_leg(%s, %s, null, false, 10, 0)",
                        (lexeme, layer),
                    ).fetchall()
                )
                conn.execute("reset role")
            assert (found[0] == []) == (n >= per_term), (lexeme, n, per_term)
            assert found[0] == found[1], (lexeme, n, per_term)
