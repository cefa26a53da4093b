"""The CPU A/B of benchmark_memory()'s functions (bench/zm_roi_bench/call_cpu.py): which functions a
variant replaces, the checkout's definitions that restore them, and the summary against values worked
by hand."""

import pytest

from zm_roi.errors import UserError
from zm_roi_bench.call_cpu import checkout_definitions, render, replaced_functions, summarize

VARIANT = """-- A comment that mentions create table and alter table is not a statement.
create or replace function roi.inside_benchmark() returns boolean
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  update roi.nothing set x = 1;  -- inside a body: not a statement of the variant
  return true;
end
$$;

create or replace function roi.owner_lock_key(owner uuid) returns bigint
  language plpgsql immutable security invoker set search_path = ''
as $$
begin
  return 1;
end
$$;
"""

SCHEMAS = """-- The gate.
create function roi.inside_benchmark() returns boolean
  language sql stable security invoker set search_path = ''
as $$
  select true
$$;

create function roi.owner_lock_key(owner uuid) returns bigint
  language sql immutable security invoker set search_path = ''
as $$
  select 0::bigint
$$;
"""


def test_a_variant_names_the_functions_it_replaces():
    assert replaced_functions(VARIANT) == ["roi.inside_benchmark", "roi.owner_lock_key"]


@pytest.mark.parametrize(
    "extra",
    ["alter table roi.probes set (fillfactor = 60);", "update roi.settings set pool_target = 10;", ""],
)
def test_a_variant_holding_anything_else_is_refused(extra):
    sql = VARIANT + extra if extra else "-- nothing but a comment\n"
    with pytest.raises(UserError, match="create or replace function"):
        replaced_functions(sql)


def test_base_is_the_checkouts_own_definitions_replacing_the_variants():
    base = checkout_definitions(SCHEMAS, ["roi.owner_lock_key", "roi.inside_benchmark"])
    assert base.startswith("create or replace function roi.owner_lock_key(owner uuid)")
    assert "select 0::bigint" in base and "select true" in base
    assert base.count("create or replace function") == 2
    with pytest.raises(UserError, match="roi.gone is not defined"):
        checkout_definitions(SCHEMAS, ["roi.gone"])


def _measured():
    return [
        {"block": 1, "arm": "base", "cpu_ms": [10.0, 12.0, 11.0], "wall_ms": [11.0, 13.0, 12.0]},
        {"block": 1, "arm": "variant", "cpu_ms": [9.0, 10.0, 11.0], "wall_ms": [10.0, 11.0, 12.0]},
        {"block": 2, "arm": "variant", "cpu_ms": [12.0, 13.0, 14.0], "wall_ms": [13.0, 14.0, 15.0]},
        {"block": 2, "arm": "base", "cpu_ms": [12.5, 12.0, 13.5], "wall_ms": [13.0, 13.0, 14.0]},
    ]


def test_the_summary_pools_each_arm_and_pairs_each_block():
    results = summarize(_measured())
    # base: 10, 11, 12, 12, 12.5, 13.5 -> 12.0; variant: 9, 10, 11, 12, 13, 14 -> 11.5
    assert results["arms"]["base"] == {"calls": 6, "cpu_p50_ms": 12.0, "wall_p50_ms": 13.0}
    assert results["arms"]["variant"] == {"calls": 6, "cpu_p50_ms": 11.5, "wall_p50_ms": 12.5}
    assert results["variant_minus_base_cpu_p50_ms"] == -0.5
    # block 1: 10 - 11 = -1.0 (base first); block 2: 13 - 12.5 = +0.5 (variant first)
    assert [(b["first"], b["difference_ms"]) for b in results["blocks"]] == [("base", -1.0), ("variant", 0.5)]
    assert results["median_block_difference_ms"] == -0.25
    assert results["blocks_favouring_variant"] == 1


def test_the_report_shows_every_block_and_the_pooled_figures():
    results = summarize(_measured()) | {
        "size": 100_000,
        "variant": "v.sql",
        "replaced": ["roi.inside_benchmark"],
        "rounds": 2,
        "commit": "abc1234",
        "command": "python -m zm_roi_bench.call_cpu v.sql --size 100k --blocks 2",
        "machine": {"cpu_model": "AMD EPYC", "cores": 2, "memory_gb": 23.5, "load_average_at_start": [1.0, 1.0, 1.0]},
    }
    text = render(results)
    assert "| 1 | base | 11.0 | 10.0 | -1.0 |" in text
    assert "| 2 | variant | 12.5 | 13.0 | +0.5 |" in text
    assert "CPU p50 12.0 → 11.5 ms (-0.5 ms)" in text
    assert "1 of 2; the median block difference -0.25 ms" in text
