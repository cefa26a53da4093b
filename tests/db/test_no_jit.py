"""The upkeep cycle and benchmark_memory() never JIT-compile the statements they run.

At 1M memories and 1,000 users the bench's idle upkeep cycle took 10 ms instead of 1: the planner's
estimate for `roi.owners_of_layers` crossed `jit_above_cost`, and every cycle (every minute, forever)
spent ~10 ms compiling a plan that ran in microseconds. These statements are short by design; their
estimates grow with the tables, not their work. The test forces the issue on a small database:
`jit_above_cost = 0` makes every plan eligible, and auto_explain shows which nested statements were
compiled (a control statement proves JIT is available and visible, so the check can fail).
"""

from __future__ import annotations

import psycopg
import pytest

from tests.support import NESTED_PLANS, user_with_knowledge
from zm_roi.identity import act_as, claims_for

EVERY_PLAN_JIT = (
    NESTED_PLANS
    + """
set jit = on;
set jit_above_cost = 0;
"""
)


def compiled_statements(conn: psycopg.Connection, statement: str, outer: str) -> list[str]:
    """The query texts of the nested statements that `statement` JIT-compiled (auto_explain notices);
    the outer statement itself is planned before the function's own settings apply, so it is left out.
    A statement's notice can arrive with the next statement's reply, hence a flush on each side."""
    flush = "select 'flush'"
    conn.execute(flush)
    notices: list[str] = []

    def collect(diagnostic):
        notices.append(diagnostic.message_primary or "")

    conn.add_notice_handler(collect)
    try:
        conn.execute(statement)
        conn.execute(flush)
    finally:
        conn.remove_notice_handler(collect)
    return [n.split("Query Text: ", 1)[-1][:160] for n in notices if "JIT:" in n and outer not in n and flush not in n]


@pytest.fixture
def jit_everything(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(EVERY_PLAN_JIT)
        control = compiled_statements(conn, "do $$ begin perform count(*) from roi.probes; end $$", "do $$")
        if not control:
            pytest.fail("JIT is not available or not visible in auto_explain here: the check below could not fail")
        yield conn


def test_an_upkeep_cycle_compiles_none_of_its_statements(jit_everything, db_url, email):
    user_with_knowledge(db_url, email, count=3)
    assert compiled_statements(jit_everything, "select roi.upkeep()", "select roi.upkeep()") == []


def test_benchmark_memory_compiles_none_of_its_statements(jit_everything, db_url, email):
    owner = user_with_knowledge(db_url, email, count=3)
    with jit_everything.transaction():
        act_as(jit_everything, claims_for(owner))
        compiled = compiled_statements(
            jit_everything, "select public.benchmark_memory()", "select public.benchmark_memory()"
        )
    assert compiled == []


def test_a_pinned_recall_compiles_none_of_its_statements(jit_everything, db_url, email):
    owner = user_with_knowledge(db_url, email, count=3)
    with jit_everything.transaction():
        act_as(jit_everything, claims_for(owner))
        for recall in ("public.recall", "public.recall_lexical"):
            call = f"select * from {recall}('Fact 1', null, null, 10, true)"
            assert compiled_statements(jit_everything, call, call) == [], recall
