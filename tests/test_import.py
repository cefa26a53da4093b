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
    result = import_memories(db_url, write_jsonl(tmp_path / "m.jsonl", rows), Target(email, project=project))
    assert (result.imported, result.skipped) == (3, 0)
    assert result.notes == [f"created user {email}", f"created project '{project}' with {email} as its member"]
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
        (json.dumps({**GOOD, "scope": "team"}), "m.jsonl:2: scope 'team' needs --team NAME"),
        (json.dumps({**GOOD, "project": "atlas"}), "m.jsonl:2: unknown field 'project'"),
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


def members(db_url: str, kind: str, name: str) -> set[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            f"""select u.email from public.{kind}_members m join public.{kind}s p on p.id = m.{kind}_id
                join auth.users u on u.id = m.user_id where p.name = %s""",  # noqa: S608 - kind is ours
            (name,),
        ).fetchall()
    return {row[0] for row in rows}


@pytest.mark.parametrize("kind", ["project", "team"])
def test_importing_into_someone_elses_place_is_refused_without_join(db_url, email, tmp_path, kind):
    """Before: the import silently made the stranger a member, and their recall showed the place's memories."""
    name = f"{kind}-{email[:17]}"
    owner, stranger = f"owner-{email}", f"stranger-{email}"
    path = write_jsonl(tmp_path / "m.jsonl", [GOOD])
    import_memories(db_url, path, Target(owner, **{kind: name}))
    other = write_jsonl(tmp_path / "o.jsonl", [{**GOOD, "title": "Stranger's note"}])
    with pytest.raises(UserError, match=f"{stranger} is not a member of {kind} '{name}'.*--join"):
        import_memories(db_url, other, Target(stranger, **{kind: name}))
    assert members(db_url, kind, name) == {owner}
    assert memory_count(db_url, stranger) == 0

    joined = import_memories(db_url, other, Target(stranger, **{kind: name}, join=True))
    assert f"{stranger} joined {kind} '{name}' (--join): they now see its memories" in joined.notes
    assert members(db_url, kind, name) == {owner, stranger}


def test_emails_are_trimmed_and_case_insensitive_and_bad_ones_refused(db_url, email, tmp_path):
    """Before: `MAYA@…`, ` maya@…` and `''` each created a separate user."""
    first = write_jsonl(tmp_path / "a.jsonl", [GOOD])
    second = write_jsonl(tmp_path / "b.jsonl", [{**GOOD, "title": "Another"}])
    import_memories(db_url, first, Target(email))
    again = import_memories(db_url, second, Target(f"  {email.upper()} "))
    assert "created user" not in " ".join(again.notes)
    with psycopg.connect(db_url) as conn:
        users = conn.execute("select email from auth.users where lower(email) = %s", (email,)).fetchall()
    assert users == [(email,)]
    assert memory_count(db_url, email) == 2
    for bad in ["", "   ", "maya", "maya@", "two words@example.test"]:
        with pytest.raises(UserError, match="is not an email address"):
            import_memories(db_url, first, Target(bad))


def test_blank_names_are_refused_and_near_names_suggested(db_url, email, tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [GOOD])
    with pytest.raises(UserError, match="--project must name a project"):
        import_memories(db_url, path, Target(email, project="  "))
    name = f"atlas-{email[5:13]}"
    import_memories(db_url, path, Target(email, project=name))
    typo = import_memories(db_url, path, Target(email, project=name.upper()))
    assert typo.notes == [
        f"created project '{name.upper()}' with {email} as its member (did you mean '{name}'? it exists already)"
    ]


def test_importing_the_same_file_twice_adds_nothing_the_second_time(db_url, email, tmp_path):
    """Before: the second import doubled every memory."""
    rows = [GOOD, {**GOOD, "title": "Second"}, GOOD]
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    first = import_memories(db_url, path, Target(email))
    assert (first.imported, first.skipped) == (2, 1)
    second = import_memories(db_url, path, Target(email))
    assert (second.imported, second.skipped) == (0, 3)
    assert memory_count(db_url, email) == 2
    # The same text in another layer is another memory.
    elsewhere = import_memories(db_url, path, Target(email, project=f"p-{email[:20]}"))
    assert elsewhere.imported == 2


def test_errors_name_the_file_line_and_a_bom_is_accepted(db_url, email, tmp_path):
    """Before: a scope error on line 4 said "memory 2"; a BOM made line 1 invalid JSON."""
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join([json.dumps(GOOD), "", "", json.dumps({**GOOD, "scope": "team"})]) + "\n")
    with pytest.raises(UserError, match=r"m\.jsonl:4: scope 'team' needs --team NAME"):
        import_memories(db_url, path, Target(email))
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n")
    assert import_memories(db_url, bom, Target(email)).imported == 1
    with pytest.raises(UserError, match="is a directory"):
        import_memories(db_url, tmp_path, Target(email))


def test_the_cli_says_what_it_created_and_skipped(tmp_path, capsys, monkeypatch, db_url, email):
    from zm_roi.cli import main

    monkeypatch.setenv("ZM_DB_URL", db_url)
    path = write_jsonl(tmp_path / "m.jsonl", [GOOD])
    project = f"cli-{email[:17]}"
    assert main(["import", str(path), "--user", email, "--project", project]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"created user {email}",
        f"created project '{project}' with {email} as its member",
        f"imported 1 memories for {email} into project {project}",
    ]
    assert main(["import", str(path), "--user", email.upper(), "--project", project]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"imported 0 memories for {email} into project {project} (1 identical memory was already there: skipped)"
    ]
