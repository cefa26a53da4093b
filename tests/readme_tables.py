"""The docs' generated and quoted tables, read against the files they quote.

The reliability table (docs/reliability.md) sits between `<!-- reliability:begin -->` and
`<!-- reliability:end -->` and is the report `make test` writes (test-artifacts/reliability.md): a full
run that measures other figures fails until the page is regenerated with `python -m tests.readme_tables`.
The speed table's figures (docs/performance.md) are looked up in bench/results/ (see
tests/unit/test_docs_text.py)."""

from __future__ import annotations

import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reliability.md"  # the page that holds the reliability table
README = PAGE  # its name before the README was split into docs/
REPORT = ROOT / "test-artifacts" / "reliability.md"
BLOCK = re.compile(r"(<!-- reliability:begin -->\n)(.*?)(<!-- reliability:end -->)", re.S)
NUMBER = re.compile(r"[+-]?\d[\d,]*(?:\.\d+)?")


def table_rows(markdown: str) -> list[list[str]]:
    """The body rows of the markdown tables in `markdown`, as lists of cell texts."""
    rows = []
    for line in markdown.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[-| :]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return [row for row in rows if row[0] not in ("area", "measurement", "target", "what the user waits for")]


def figures(markdown: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(area, scenario) -> (tried, lost) of a reliability table."""
    return {(area, scenario): (int(tried), int(lost)) for area, scenario, tried, lost in table_rows(markdown)}


def readme_block(readme: str) -> str:
    block = BLOCK.search(readme)
    assert block, "docs/reliability.md keeps its reliability table between the reliability markers"
    return block.group(2)


def reliability_differences(readme: str, report: str) -> list[str] | None:
    """What differs between the page's reliability table and a report, or None when the report
    does not cover every scenario the page lists (a targeted run measured only some of them)."""
    shown, measured = figures(readme_block(readme)), figures(report)
    if not set(shown) <= set(measured):
        return None
    return [
        f"{area} | {scenario}: docs {shown.get((area, scenario))}, measured {figures_now}"
        for (area, scenario), figures_now in sorted(measured.items())
        if shown.get((area, scenario)) != figures_now
    ]


def regenerated(readme: str, report: str) -> str:
    """The page with its reliability table replaced by the report's."""
    table = "\n".join(line for line in report.splitlines() if line.startswith("|")) + "\n"
    return BLOCK.sub(lambda m: m.group(1) + table + m.group(3), readme)


def number_in(text: str) -> Decimal:
    found = NUMBER.search(text)
    assert found, f"no figure in {text!r}"
    return Decimal(found.group(0).replace(",", ""))


def shown_as(value: Decimal, shown: str) -> bool:
    """Whether `value` rounds (half up) to the docs' figure `shown`, at the docs' precision."""
    places = Decimal(1).scaleb(-len(shown.partition(".")[2])) if "." in shown else Decimal(1)
    return value.quantize(places, rounding=ROUND_HALF_UP) == Decimal(shown.replace(",", ""))


if __name__ == "__main__":
    if not REPORT.exists():
        sys.exit(f"no {REPORT}: run `make test` first")
    PAGE.write_text(regenerated(PAGE.read_text(), REPORT.read_text()))
    print(f"{PAGE.relative_to(ROOT)} reliability table regenerated from {REPORT.relative_to(ROOT)}")
