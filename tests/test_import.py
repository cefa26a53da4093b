"""`zm-roi import`: all or nothing, with errors that name the line."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from zm_roi.errors import UserError
from zm_roi.importer import Target, import_memories


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def memory_count(db_url: str, email: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "select count(*) from public.memories m join auth.users u on u.id = m.author_id where u.email = %s",
            (email,),
        ).fetchone()[0]


GOOD = {"title": "Pin the SDK", "body": "We pin the SDK at 4.2 because 4.3 broke retries.", "kind": "decision"}


def test_import_creates_user_project_and_memberships(db_url, email, tmp_path):
    project = f"proj-{email[:17]}"
    rows = [
        GOOD,
        {**GOOD, "title": "Old way", "kind": "gotcha", "created_at": "2026-01-02T03:04:05Z"},
        {**GOOD, "title": "Mine only", "scope": "personal"},
    ]
    count = import_memories(db_url, write_jsonl(tmp_path / "m.jsonl", rows), Target(email, project=project))
    assert count == 3
    with psycopg.connect(db_url) as conn:
        scopes = conn.execute(
            """select m.scope, m.title, p.name, m.created_at::date::text from public.memories m
               join auth.users u on u.id = m.author_id left join public.projects p on p.id = m.project_id
               where u.email = %s order by m.title""",
            (email,),
        ).fetchall()
        member = conn.execute(
            """select count(*) from public.project_members pm join public.projects p on p.id = pm.project_id
               join auth.users u on u.id = pm.user_id where u.email = %s and p.name = %s""",
            (email, project),
        ).fetchone()[0]
    assert [(s, t, p) for s, t, p, _ in scopes] == [
        ("personal", "Mine only", None),
        ("project", "Old way", project),
        ("project", "Pin the SDK", project),
    ]
    assert scopes[1][3] == "2026-01-02"
    assert member == 1


def test_team_import_makes_the_user_a_team_member(db_url, email, tmp_path):
    team = f"team-{email[:17]}"
    import_memories(db_url, write_jsonl(tmp_path / "t.jsonl", [GOOD]), Target(email, team=team))
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            """select m.scope, t.name from public.memories m join public.teams t on t.id = m.team_id
               join public.team_members tm on tm.team_id = t.id and tm.user_id = m.author_id
               join auth.users u on u.id = m.author_id where u.email = %s""",
            (email,),
        ).fetchall()
    assert row == [("team", team)]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "m.jsonl:2: not valid JSON"),
        (json.dumps({**GOOD, "kind": "rumour"}), "m.jsonl:2: field 'kind'"),
        (json.dumps({"title": "x", "kind": "decision"}), "m.jsonl:2: missing field 'body'"),
        (json.dumps({**GOOD, "title": "   "}), "m.jsonl:2: field 'title': Value error, must not be empty"),
        (json.dumps([1, 2]), "m.jsonl:2: each line must be a JSON object"),
        (json.dumps({**GOOD, "scope": "team"}), "memory 2: scope 'team' needs --team NAME"),
    ],
)
def test_a_bad_line_stops_the_import_and_nothing_is_written(db_url, email, tmp_path, bad_line, message):
    path = write_jsonl(tmp_path / "m.jsonl", [GOOD, bad_line, GOOD])
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        import_memories(db_url, path, Target(email))
    assert memory_count(db_url, email) == 0


def test_an_empty_or_missing_file_is_a_clear_error(db_url, email, tmp_path):
    with pytest.raises(UserError, match="no memories"):
        import_memories(db_url, write_jsonl(tmp_path / "e.jsonl", [""]), Target(email))
    with pytest.raises(UserError, match="no such file"):
        import_memories(db_url, tmp_path / "absent.jsonl", Target(email))


def test_the_cli_prints_one_line_errors(tmp_path, capsys, monkeypatch, db_url):
    from zm_roi.cli import main

    monkeypatch.setenv("ZM_DB_URL", db_url)
    bad = write_jsonl(tmp_path / "bad.jsonl", ["{oops"])
    assert main(["import", str(bad), "--user", "x@example.test"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zm-roi: ") and "bad.jsonl:1: not valid JSON" in err
    assert "Traceback" not in err
