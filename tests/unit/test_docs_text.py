"""The figures and defaults the docs quote, held to the code, the schema and bench/results/. Pure: no
database. (The README's quick start runs in tests/e2e/test_readme.py; the links in test_docs_links.py.)"""

from __future__ import annotations

import re
from decimal import Decimal

from tests import readme_tables
from tests.conftest import ROOT
from zm_roi.settings import DEFAULT_WORKER_CONCURRENCY

DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text()


def test_the_llm_mode_page_states_the_default_worker_concurrency_the_code_uses():
    assert f"`ZM_WORKER_CONCURRENCY` ({DEFAULT_WORKER_CONCURRENCY}, at most 64)" in page("llm-mode.md")


def test_the_reliability_check_catches_a_table_that_differs_from_the_report():
    readme = page("reliability.md")
    shown = readme_tables.figures(readme_tables.readme_block(readme))
    assert len(shown) >= 15 and all(lost == 0 for _, lost in shown.values())
    report = readme_tables.readme_block(readme)
    assert readme_tables.reliability_differences(readme, report) == [], "the page's own table matches itself"
    # A run that lost one, and a scenario the page does not list: both are reported.
    area, scenario = next(iter(shown))
    tried, _ = shown[(area, scenario)]
    measured = report.replace(f"| {area} | {scenario} | {tried} | 0 |", f"| {area} | {scenario} | {tried} | 1 |")
    measured += "| privacy | a scenario added later | 3 | 0 |\n"
    assert readme_tables.reliability_differences(readme, measured) == [
        f"{area} | {scenario}: docs ({tried}, 0), measured ({tried}, 1)",
        "privacy | a scenario added later: docs None, measured (3, 0)",
    ]
    # A targeted run that measured only some scenarios is not compared; regenerating takes the report.
    assert readme_tables.reliability_differences(readme, "| privacy | one | 1 | 0 |\n") is None
    again = readme_tables.regenerated(readme, measured)
    assert readme_tables.reliability_differences(again, measured) == []


# Each figure of docs/performance.md's speed table, in order, and where bench/results/ measured it:
# (file under bench/, the row's first cell, the column, the unit the page shows it in: 1000 for
# ms -> s). Two figures come from the prose of the decision that measured them side by side:
# (a file under docs/decisions/, a pattern, its group, 1).
LATEST = "results/2026-12-01-1m.md"
OWNERS = "results/2026-12-01-1m-10000-owners.md"
BOOKKEEPING = "0015-cheaper-run-bookkeeping.md"
SPEED_SOURCES = {
    "recall pinned to a project + personal": [(LATEST, "recall, pinned: project + personal", 2, 1)],
    "recall pinned to a team + personal": [(LATEST, "recall, pinned: team + personal", 2, 1)],
    "hybrid recall pinned to a project / a team (+ personal)": [
        (LATEST, "recall, pinned: project + personal, hybrid", 2, 1),
        (LATEST, "recall, pinned: team + personal, hybrid", 2, 1),
    ],
    "recall pinned to the personal layer": [(LATEST, "recall, pinned: personal alone", 2, 1)],
    "recall unpinned": [(LATEST, "recall, unpinned (everything the user sees)", 2, 1)],
    "`benchmark_memory()`, 20 probes": [(LATEST, "benchmark_memory(), full pool of 20", 2, 1)],
    "its overhead over the same 20 recalls alone": [
        (LATEST, "→ benchmark_memory() overhead over its recalls", 2, 1),
        (BOOKKEEPING, r"~\+20% to ~(\+12)%", 1, 1),
        (BOOKKEEPING, r"~(\+20)% to ~\+12%", 1, 1),
    ],
    "1 s model, one worker: a pool of 20 questions written / a run of 20 judged": [
        (LATEST, "20-question pool written", 1, 1),
        (LATEST, "20-probe run judged", 1, 1),
    ],
    "idle upkeep cycle (1,000 / 10,000 users)": [
        (LATEST, "upkeep, idle cycle", 2, 1),
        (OWNERS, "upkeep, idle cycle", 2, 1),
    ],
    "upkeep after one invalidation in a project, 10,000 users": [
        (OWNERS, "one invalidation in one project, then a cycle", 2, 1)
    ],
    "upkeep after 100 invalidations over 100 projects, 10,000 users": [
        (OWNERS, "100 invalidations spread over 100 projects, then a cycle", 2, 1000)
    ],
    "worker queue cost per row (claim + record, no model)": [
        (LATEST, "worker queue cost per row (claim + usage + verdict, no model)", 2, 1)
    ],
    "4 worker processes draining 10,000 judgments": [
        (LATEST, "4 worker processes draining 10,000 judgments", 2, 1000),
        (OWNERS, "4 worker processes draining 10,000 judgments", 2, 1000),
    ],
    "worker peak memory, 8 calls in flight": [(LATEST, "worker peak memory", 2, 1)],
}


def measured(source: tuple[str, str, int, int]) -> Decimal:
    name, row, column, unit = source
    if name.startswith("results/"):
        text = (ROOT / "bench" / name).read_text()
    else:
        text = (DOCS / "decisions" / name).read_text()
        match = re.search(row, text)
        assert match, f"docs/decisions/{name} no longer says {row!r}"
        return Decimal(match.group(column))
    [cells] = [cells for cells in readme_tables.table_rows(text) if cells[0] == row]
    return readme_tables.number_in(cells[column]) / unit


def speed_table() -> dict[str, str]:
    readme = page("performance.md")
    section = readme[readme.index("| at 1M memories (p50) |") :]
    section = section[: section.index("\n\n")]
    return {cells[0]: cells[1] for cells in readme_tables.table_rows(section)[1:]}


def speed_differences(table: dict[str, str]) -> list[str]:
    differences = []
    for label, cell in table.items():
        shown = readme_tables.NUMBER.findall(cell.replace("1,000 / 10,000", ""))
        sources = SPEED_SOURCES.get(label)
        if sources is None:
            differences.append(f"{label}: no source in bench/results/ listed for it")
            continue
        for figure, source in zip(shown, sources, strict=False):
            if not readme_tables.shown_as(measured(source), figure.lstrip("+")):
                differences.append(f"{label}: docs {figure}, {source[0]} says {measured(source)}")
    return differences


def test_the_performance_speed_table_quotes_bench_results():
    table = speed_table()
    assert set(table) == set(SPEED_SOURCES), "every row of the speed table has its source, and only those"
    assert speed_differences(table) == []
    # The same check on a figure copied wrong: 1.3 ms shown as 2.4 ms.
    wrong = {**table, "recall pinned to a project + personal": "2.4 ms"}
    assert speed_differences(wrong) == [
        "recall pinned to a project + personal: docs 2.4, results/2026-12-01-1m.md says 1.29"
    ]


def test_every_guide_paragraph_closes_the_parentheses_it_opens():
    """Before: the Configuration section repeated a line, the second a dangling fragment whose ")"
    closed nothing. The README and the guide pages (not the decisions' lab notes); code and code spans
    are left out (they quote SQL and shell)."""
    unbalanced = []
    for path in [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        unbalanced += [f"{path.name}: {p[:80]}" for p in re.split(r"\n\s*\n", text) if p.count("(") != p.count(")")]
    assert unbalanced == []


def test_the_docs_state_the_settings_defaults_the_schema_writes():
    """The knobs docs/configuration.md names, and the judge checks' defaults docs/reading-a-run.md
    states, against roi.settings' column defaults."""
    schema = (ROOT / "supabase" / "schemas" / "30_roi_probes_runs_and_work.sql").read_text()
    configuration, judge_checks = page("configuration.md"), page("reading-a-run.md")
    pool = re.search(r"pool_target integer not null default (\d+)", schema).group(1)
    checks = re.search(r"closed_book_checks integer not null default (\d+)", schema).group(1)
    assert f"pool target {pool}," in configuration and f"`closed_book_checks` {checks}:" in configuration
    for knob in ("withheld_source_checks", "order_checks"):
        default = re.search(rf"{knob} integer not null default (\d+)", schema).group(1)
        assert f"`{knob}` {default}" in configuration, knob
        assert re.search(rf"`roi.settings.{knob}`\s+\({default} by default\)", judge_checks), knob
    said = sum(path.read_text().count("2 minutes, 5 attempts") for path in DOCS.rglob("*.md"))
    assert said == 1, "said once"
