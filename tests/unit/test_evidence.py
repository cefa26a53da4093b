"""Evidence that can fail: the reliability report is measured, not written.

Each `reliability.record(...)` and `reliability.count(...)` must be given what its scenario measured
(never a literal `lost=0`) and must run before any assert on those measurements, so a failing scenario
still shows its loss in test-artifacts/reliability.md instead of stopping before the record."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from tests.conftest import ROOT


def own_statements(function: ast.FunctionDef):
    """Every node of `function` outside the functions nested in it (their asserts run elsewhere)."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                stack.append(child)


def is_record(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("record", "count")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "reliability"
    )


def record_findings(source: str, filename: str) -> list[str]:
    findings = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef):
            continue
        nodes = list(own_statements(function))
        asserts = [n for n in nodes if isinstance(n, ast.Assert)]
        for call in (n for n in nodes if is_record(n)):
            where = f"{filename}:{call.lineno}"
            lost = next((k.value for k in call.keywords if k.arg == "lost"), None)
            if lost is None or isinstance(lost, ast.Constant):
                findings.append(f"{where}: lost is not a measurement")
                continue
            measured = {n.id for n in ast.walk(lost) if isinstance(n, ast.Name)} - set(dir(builtins))
            for check in asserts:
                if check.lineno < call.lineno and measured & {n.id for n in ast.walk(check) if isinstance(n, ast.Name)}:
                    findings.append(f"{where}: recorded after the assert on line {check.lineno}")
    return findings


def test_every_reliability_record_is_a_measurement_made_before_the_asserts():
    findings = []
    records = 0
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        source = path.read_text()
        records += source.count("reliability.record(") + source.count("reliability.count(")
        findings += record_findings(source, path.name)
    assert records >= 8, "the scan found the scenarios"
    assert findings == []


def test_the_check_catches_a_written_report_and_a_late_record():
    # The two shapes the report had before: a literal 0, and a record after the assert it measures.
    head = "def test_x(reliability):\n    leaks = []\n"
    record = "    reliability.record('a', 'b', tried=1, lost=len(leaks))\n"
    written = head + "    assert leaks == []\n    reliability.record('a', 'b', tried=1, lost=0)\n"
    late = head + "    assert leaks == []\n" + record
    measured = head + record + "    assert leaks == []\n"
    assert record_findings(written, "w.py") == ["w.py:4: lost is not a measurement"]
    assert record_findings(late, "l.py") == ["l.py:4: recorded after the assert on line 3"]
    assert record_findings(measured, "m.py") == []
    # A property test's count() is held to the same rule (it once had no `lost` at all).
    uncounted = "def test_x(reliability):\n    reliability.count('a', 'b')\n    assert True\n"
    counted = head + "    reliability.count('a', 'b', lost=len(leaks))\n    assert leaks == []\n"
    assert record_findings(uncounted, "u.py") == ["u.py:2: lost is not a measurement"]
    assert record_findings(counted, "c.py") == []


def test_the_report_shows_a_loss_it_was_given(tmp_path: Path):
    from tests.conftest import ReliabilityLog

    log = ReliabilityLog()
    log.record("crashes", "a scenario that lost two", tried=5, lost=2)
    for broken in (0, 1, 0):
        log.count("hostile input", "a property one example broke", lost=broken)
    log.write(tmp_path / "reliability.md")
    report = (tmp_path / "reliability.md").read_text()
    assert "| crashes | a scenario that lost two | 5 | 2 |" in report
    assert "| hostile input | a property one example broke | 3 | 1 |" in report


def test_tests_share_one_wait_for_one_benchmark_and_one_user_cleanup():
    definitions: dict[str, list[str]] = {"wait_for": [], "benchmark": [], "remove_users": []}
    deletes_users = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.name in definitions:
                definitions[node.name].append(path.name)
        if "delete from auth.users" in source and path.name not in ("support.py", "test_evidence.py"):
            deletes_users.append(path.name)
    assert definitions == {"wait_for": ["support.py"], "benchmark": ["support.py"], "remove_users": ["support.py"]}
    assert deletes_users == [], "users are removed through tests.support.remove_users"


def test_named_sql_lives_in_two_files_and_every_name_used_exists():
    """The product's queries in queries.sql, the bench's in bench/zm_roi_bench/queries.sql, and no third home."""
    from zm_roi.queries import query
    from zm_roi_bench.sql import bench_query

    sql_files = [p for p in ROOT.rglob("*.sql") if ".venv" not in p.parts and "node_modules" not in p.parts]
    named = sorted(p.relative_to(ROOT).as_posix() for p in sql_files if "-- name:" in p.read_text())
    assert named == ["bench/zm_roi_bench/queries.sql", "python/zm_roi/queries.sql"]
    lookups = {"query": query, "bench_query": bench_query}
    used: dict[str, set[str]] = {"query": set(), "bench_query": set()}
    for path in [*(ROOT / "python" / "zm_roi").rglob("*.py"), *(ROOT / "bench" / "zm_roi_bench").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in lookups
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                used[node.func.id].add(node.args[0].value)
    assert len(used["query"]) > 20 and len(used["bench_query"]) > 20
    missing = []
    for kind, names in used.items():
        for name in sorted(names):
            try:
                lookups[kind](name)
            except KeyError:
                missing.append(f"{kind}({name!r})")
    assert missing == []
