"""The shipped judge calibration set is big enough to measure a judge.

A judge's sensitivity and specificity on the exclusive label (with_memory and not without_memory) are
only worth correcting a run with when both rest on enough cases: at least 100 positives and 100
negatives among at least 240, both decoy kinds of the LoCoMo judge audit, general-knowledge questions
and near-misses (the answer is in another project's or an outdated memory). Every label carries its
one-line reason and every case a public source described in SOURCES.md. Pure: reads the shipped files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "python" / "zm_roi" / "data"
CALIBRATION = DATA / "judge_calibration.jsonl"
SOURCES = DATA / "judge_calibration.SOURCES.md"
KEYS = [
    "id",
    "decoy",
    "source",
    "kind",
    "question",
    "memory",
    "surfaced",
    "with_memory",
    "with_memory_reason",
    "without_memory",
    "without_memory_reason",
]


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    return [json.loads(line) for line in CALIBRATION.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def source_rows() -> dict[str, str]:
    """Each S-id of the sources table, with the case ids cited in its row."""
    rows = re.findall(r"^\| (S\d+) \| .* \| ([^|]*) \|$", SOURCES.read_text(encoding="utf-8"), re.MULTILINE)
    return dict(rows)


def exclusive(case: dict) -> bool:
    return case["with_memory"] and not case["without_memory"]


def test_the_set_has_enough_cases_on_both_sides_of_the_exclusive_label(cases):
    positives = sum(exclusive(c) for c in cases)
    assert len(cases) >= 240, f"{len(cases)} cases"
    assert positives >= 100, f"{positives} exclusive-true cases"
    assert len(cases) - positives >= 100, f"{len(cases) - positives} exclusive-false cases"


def test_every_case_is_well_formed_and_labelled_with_both_reasons(cases):
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids), "ids are unique"
    shown = [json.dumps([c["question"], c["kind"], c["memory"], c["surfaced"]]) for c in cases]
    assert len(set(shown)) == len(shown), "no two cases show the judge the same thing"
    for case in cases:
        assert list(case) == KEYS, case["id"]
        assert case["kind"] in ("decision", "gotcha", "convention"), case["id"]
        assert case["decoy"] in (None, "vague", "wrong"), case["id"]
        assert isinstance(case["with_memory"], bool) and isinstance(case["without_memory"], bool), case["id"]
        assert case["with_memory_reason"].strip() and case["without_memory_reason"].strip(), case["id"]
        assert case["question"].strip() and case["memory"]["title"].strip() and case["memory"]["body"].strip()


def test_every_case_cites_a_public_source_described_in_sources_md(cases, source_rows):
    for case in cases:
        assert re.fullmatch(r"S\d+", case["source"]), case["id"]
        assert case["source"] in source_rows, f"{case['id']}: {case['source']} is not in SOURCES.md"
        cited = re.findall(r"\b[a-z]\d+\b", source_rows[case["source"]])
        assert case["id"] in cited, f"{case['id']} is not listed under {case['source']}"


def test_both_decoy_kinds_general_knowledge_and_near_misses_are_present(cases):
    vague = [c for c in cases if c["decoy"] == "vague"]
    wrong = [c for c in cases if c["decoy"] == "wrong"]
    assert len(vague) >= 12 and len(wrong) >= 12, (len(vague), len(wrong))
    assert not any(c["with_memory"] for c in vague + wrong), "a decoy never answers the question"
    general = [c for c in cases if c["without_memory"]]
    assert len(general) >= 12, f"{len(general)} general-knowledge cases"
    near_misses = [c for c in cases if re.fullmatch(r"n\d+", c["id"])]
    assert len(near_misses) >= 20, f"{len(near_misses)} near-miss cases"
