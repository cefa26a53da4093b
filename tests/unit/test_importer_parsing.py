"""Reading an import file (zm_roi.importer.parse_file and scoped), before any database is involved: every
line is validated, and the first bad one is refused with the file, its line number and what is wrong.
That nothing is written when a line is bad is tests/db/test_import.py's part."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from zm_roi.errors import UserError
from zm_roi.importer import Target, parse_file, scoped

GOOD = {"title": "Pin the SDK", "body": "We pin the SDK at 4.2 because 4.3 broke retries.", "kind": "decision"}


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def read(path: Path, target: Target | None = None) -> list[tuple[str, object]]:
    """What an import does first: parse every line, then check its scope against where it points."""
    target = target or Target("someone@example.test")
    return scoped(((f"{path}:{number}", line) for number, line in parse_file(path)), target)


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "m.jsonl:2: not valid JSON"),
        (json.dumps({**GOOD, "kind": "rumour"}), "m.jsonl:2: field 'kind'"),
        (json.dumps({"title": "x", "kind": "decision"}), "m.jsonl:2: missing field 'body'"),
        (json.dumps({**GOOD, "title": "   "}), "m.jsonl:2: field 'title': Value error, must not be empty"),
        (json.dumps([1, 2]), "m.jsonl:2: each line must be a JSON object"),
        (json.dumps({**GOOD, "scope": "team"}), "m.jsonl:2: scope 'team' needs --team NAME"),
        (json.dumps({**GOOD, "scope": "project"}), "m.jsonl:2: scope 'project' needs --project NAME"),
        (json.dumps({**GOOD, "project": "atlas"}), "m.jsonl:2: unknown field 'project'"),
        (
            json.dumps({**GOOD, "created_at": "2099-01-01T00:00:00Z"}),
            "m.jsonl:2: field 'created_at': Value error, 2099-01-01T00:00:00+00:00 is in the future",
        ),
        (
            json.dumps({**GOOD, "created_at": "2026-03-02T00:00:00Z", "invalidated_at": "2026-03-01T00:00:00Z"}),
            "m.jsonl:2: field 'invalidated_at': Value error, 2026-03-01T00:00:00+00:00 is before created_at",
        ),
        (
            json.dumps({**GOOD, "created_at": "2026-03-02T00:00:00Z", "invalidated_at": "2099-01-01T00:00:00"}),
            "m.jsonl:2: field 'invalidated_at': Value error, 2099-01-01T00:00:00+00:00 is in the future",
        ),
        (
            json.dumps({**GOOD, "invalidated_at": "2026-03-01T00:00:00Z"}),
            "m.jsonl:2: field 'invalidated_at': Value error, needs created_at too",
        ),
        ("[" * 5000 + "]" * 5000, "m.jsonl:2: nested too deeply to read"),
    ],
)
def test_a_bad_line_is_refused_with_its_file_line_and_problem(tmp_path, bad_line, message):
    path = write_jsonl(tmp_path / "m.jsonl", [GOOD, bad_line, GOOD])
    with pytest.raises(UserError, match=re.escape(message)):
        read(path)


def test_line_numbers_count_blank_lines_and_a_bom_or_crlf_is_accepted(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\r\n\r\n   \n" + json.dumps({**GOOD, "title": "Two"}).encode()
    )
    assert [(number, line.title) for number, line in parse_file(path)] == [(1, "Pin the SDK"), (4, "Two")]
    path.write_text("\n".join([json.dumps(GOOD), "", "", json.dumps({**GOOD, "scope": "team"})]) + "\n")
    with pytest.raises(UserError, match=r"m\.jsonl:4: scope 'team' needs --team NAME"):
        read(path)


def test_invalid_utf8_names_its_line_and_the_byte_within_it(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n\n" + b'{"title": "caf\xe9", "body": "b", "kind": "gotcha"}\n')
    with pytest.raises(UserError, match=r"m\.jsonl:3: not UTF-8 text \(invalid continuation byte at byte 15 of"):
        parse_file(path)


def test_an_empty_missing_or_directory_path_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="no memories in the file"):
        parse_file(write_jsonl(tmp_path / "e.jsonl", [""]))
    with pytest.raises(UserError, match="no such file"):
        parse_file(tmp_path / "absent.jsonl")
    with pytest.raises(UserError, match="is a directory, not a JSONL file"):
        parse_file(tmp_path)


def test_a_time_within_the_clock_skew_is_accepted_and_one_without_a_zone_is_utc(tmp_path):
    soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    rows = [
        {**GOOD, "created_at": soon},
        {**GOOD, "title": "Naive", "created_at": "2026-03-01T12:00:00", "invalidated_at": "2026-03-02T12:00:00"},
    ]
    (_, first), (_, naive) = parse_file(write_jsonl(tmp_path / "m.jsonl", rows))
    assert first.created_at is not None
    assert (naive.created_at, naive.invalidated_at) == (
        datetime(2026, 3, 1, 12, tzinfo=UTC),
        datetime(2026, 3, 2, 12, tzinfo=UTC),
    )


def test_a_line_without_a_scope_takes_the_one_the_import_points_at(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [GOOD, {**GOOD, "scope": "personal"}])
    email = "someone@example.test"
    assert [scope for scope, _ in read(path, Target(email))] == ["personal", "personal"]
    assert [scope for scope, _ in read(path, Target(email, project="atlas"))] == ["project", "personal"]
    assert [scope for scope, _ in read(path, Target(email, team="core"))] == ["team", "personal"]
