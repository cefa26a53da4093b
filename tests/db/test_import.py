"""`zm-roi import`: all or nothing, with errors that name the line."""

from __future__ import annotations

import io
import json
import re
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.support import as_user, wait_for
from zm_roi import backfill, embeddings, importer
from zm_roi.errors import UserError
from zm_roi.importer import Target, import_memories
from zm_roi.progress import LOG_EVERY, Progress
from zm_roi.queries import query


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


# Each way a line can be refused, and its wording, is tests/unit/test_importer_parsing.py's; here one
# refusal of each stage (JSON, a field, the scope) shows the whole file is refused before anything is written.
@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "m.jsonl:2: not valid JSON"),
        (json.dumps({**GOOD, "kind": "rumour"}), "m.jsonl:2: field 'kind'"),
        (json.dumps({**GOOD, "scope": "team"}), "m.jsonl:2: scope 'team' needs --team NAME"),
    ],
)
def test_a_bad_line_stops_the_import_and_nothing_is_written(db_url, email, tmp_path, bad_line, message):
    path = write_jsonl(tmp_path / "m.jsonl", [GOOD, bad_line, GOOD])
    with pytest.raises(UserError, match=re.escape(message)):
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


def test_a_time_within_the_clock_skew_is_accepted_and_one_without_a_zone_is_utc(db_url, email, tmp_path):
    soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    rows = [
        {**GOOD, "created_at": soon},
        {**GOOD, "title": "Naive", "created_at": "2026-03-01T12:00:00", "invalidated_at": "2026-03-02T12:00:00"},
    ]
    assert import_memories(db_url, write_jsonl(tmp_path / "m.jsonl", rows), Target(email)).imported == 2
    with psycopg.connect(db_url) as conn:
        stored = conn.execute(
            """select m.created_at, m.invalidated_at from public.memories m join auth.users u on u.id = m.author_id
               where u.email = %s and m.title = 'Naive'""",
            (email,),
        ).fetchone()
    assert stored == (datetime(2026, 3, 1, 12, tzinfo=UTC), datetime(2026, 3, 2, 12, tzinfo=UTC))


def test_invalid_utf8_names_its_line(db_url, email, tmp_path):
    """Before: "not UTF-8 text (invalid start byte at byte 214)", a byte offset into the whole file."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n\n" + b'{"title": "caf\xe9", "body": "b", "kind": "gotcha"}\n')
    with pytest.raises(UserError, match=r"m\.jsonl:3: not UTF-8 text \(invalid continuation byte at byte 15 of"):
        import_memories(db_url, path, Target(email))
    assert memory_count(db_url, email) == 0


def distinct_rows(count: int, prefix: str) -> list[dict]:
    return [{**GOOD, "title": f"{prefix} {n}", "body": f"Body of {prefix} number {n}."} for n in range(count)]


def test_concurrent_first_imports_of_one_file_write_each_memory_once(db_url, email, tmp_path):
    """Interleaving: three imports of one file for a user and project that do not exist yet start at
    once; each finds or creates them in turn, then each writes the layer in turn, so the second and
    third find every memory there. Before: a raw `users_email_key` violation, or 4,045 rows for 1,501:
    the duplicate check had no lock behind it."""
    path = write_jsonl(tmp_path / "m.jsonl", distinct_rows(1200, "Concurrent"))
    project = f"conc-{email[5:17]}"
    start = threading.Barrier(3)
    results, errors = [], []

    def run():
        start.wait()
        try:
            results.append(import_memories(db_url, path, Target(email, project=project), quiet=True))
        except Exception as exc:  # noqa: BLE001 - the test reports every failure
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "an import is stuck"
    assert errors == []
    assert sorted((r.imported, r.skipped) for r in results) == [(0, 1200), (0, 1200), (1200, 0)]
    assert sum("created user" in " ".join(r.notes) for r in results) == 1
    with psycopg.connect(db_url) as conn:
        rows, distinct = conn.execute(
            """select count(*), count(distinct m.title) from public.memories m
               join auth.users u on u.id = m.author_id where u.email = %s""",
            (email,),
        ).fetchone()
    assert (rows, distinct) == (1200, 1200)


def user_id(db_url: str, email: str):
    with psycopg.connect(db_url) as conn:
        return conn.execute("select id from auth.users where email = %s", (email,)).fetchone()[0]


def test_an_interrupted_import_keeps_what_it_wrote_searchable_and_resumes(db_url, email, tmp_path, monkeypatch):
    """Before: one transaction for the whole file, so nothing was searchable until the end and an
    interruption lost everything written so far (the second batch interrupted: 0 rows, not 2)."""
    path = write_jsonl(tmp_path / "m.jsonl", distinct_rows(5, "Resumable"))
    monkeypatch.setattr(importer, "WRITE_BATCH", 2)
    real_columns, batches = importer._columns, []

    def interrupt_the_second_batch(batch, place):
        batches.append(len(batch))
        if len(batches) == 2:
            raise KeyboardInterrupt
        return real_columns(batch, place)

    monkeypatch.setattr(importer, "_columns", interrupt_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        import_memories(db_url, path, Target(email), quiet=True)
    assert memory_count(db_url, email) == 2
    found = as_user(db_url, user_id(db_url, email), "select title from public.recall('Resumable number')")
    assert sorted(r["title"] for r in found) == ["Resumable 0", "Resumable 1"]

    monkeypatch.setattr(importer, "_columns", real_columns)
    again = import_memories(db_url, path, Target(email), quiet=True)
    assert (again.imported, again.skipped) == (3, 2)
    assert memory_count(db_url, email) == 5


FAKE_MODEL = "fake/test-embedder"


def test_embeddings_follow_written_memories_in_batches_and_resume(db_url, email, tmp_path, monkeypatch):
    """Before: the import embedded the whole file in one call before writing anything, inside one open
    transaction (the fake model saw 0 committed rows), and an interrupted embedding left nothing."""
    monkeypatch.setenv("ZM_EMBEDDING_MODEL", FAKE_MODEL)
    monkeypatch.setattr(backfill, "BATCH", 2)
    path = write_jsonl(tmp_path / "m.jsonl", distinct_rows(5, "Embedded"))
    calls, committed, layer_free = [], [], []

    def fake_embed(texts, *, as_query, model):
        calls.append(len(texts))
        committed.append(memory_count(db_url, email))
        layer = {"scope": "personal", "layer_id": str(user_id(db_url, email))}
        with psycopg.connect(db_url, autocommit=True) as other:
            layer_free.append(other.execute(query("try_lock_import_layer"), layer).fetchone()[0])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return embeddings.Embedded([[1.0] + [0.0] * 383 for _ in texts], model, 7 * len(texts))

    monkeypatch.setattr(embeddings, "embed", fake_embed)
    with pytest.raises(KeyboardInterrupt):
        import_memories(db_url, path, Target(email), quiet=True)
    assert committed == [5, 5], "every memory is written (and searchable) before the first embedding call"
    assert layer_free == [True, True], "another import may write the layer while this one embeds"

    again = import_memories(db_url, path, Target(email), quiet=True)
    assert (again.imported, again.skipped, again.embedded) == (0, 5, 3)
    assert calls == [2, 2, 2, 1]
    with psycopg.connect(db_url) as conn:
        models = conn.execute(
            """select m.embedding_model, count(*) from public.memories m join auth.users u on u.id = m.author_id
               where u.email = %s group by 1""",
            (email,),
        ).fetchall()
        tokens = conn.execute(
            """select sum(e.input_tokens) from public.usage_events e join auth.users u on u.id = e.owner_id
               where u.email = %s and e.purpose = 'embedding'""",
            (email,),
        ).fetchone()[0]
    assert models == [(FAKE_MODEL, 5)]
    assert tokens == 35, "each of the 5 memories metered once: the interrupted batch wrote nothing"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_on_a_terminal_shows_rows_rate_and_time_left():
    """Before: no progress at all; a 10,000-line import printed nothing for 21 minutes."""
    out, clock = Terminal(), Clock()
    progress = Progress("importing", 10_000, stream=out, clock=clock)
    assert out.getvalue() == "\rimporting [........................] 0/10,000 rows  0.0/s  time left unknown\x1b[K"
    clock.now += 2
    progress.advance(4_000)
    assert out.getvalue().endswith(
        "\rimporting [##########..............] 4,000/10,000 rows  2,000.0/s  3 s left\x1b[K"
    )
    progress.close()
    assert out.getvalue().endswith("\n")


def test_progress_elsewhere_is_plain_lines_and_quiet_is_silent():
    out, clock = io.StringIO(), Clock()
    progress = Progress("embedding", 100, stream=out, clock=clock)
    clock.now += 1
    progress.advance(10)
    assert out.getvalue() == "", "a short run leaves no noise in a log"
    clock.now += LOG_EVERY
    progress.advance(10)
    progress.close()
    assert out.getvalue() == "embedding [#####...................] 20/100 rows  0.6/s  2 min 4 s left\n"
    quiet_out = Terminal()
    quiet = Progress("embedding", 100, stream=quiet_out, clock=clock, quiet=True)
    clock.now += LOG_EVERY
    quiet.advance(100)
    quiet.close()
    assert quiet_out.getvalue() == ""


def test_the_cli_quiet_and_piped_print_no_progress(tmp_path, capfd, monkeypatch, db_url, email):
    from zm_roi.cli import main

    monkeypatch.setenv("ZM_DB_URL", db_url)
    path = write_jsonl(tmp_path / "m.jsonl", distinct_rows(3, "Quiet"))
    assert main(["import", str(path), "--user", email, "--quiet"]) == 0
    out, err = capfd.readouterr()
    assert (out, err) == (f"created user {email}\nimported 3 memories for {email} into personal layer\n", "")
    assert main(["import", str(path), "--user", email]) == 0
    out, err = capfd.readouterr()
    assert "\r" not in out + err and err == ""


def test_the_backfill_shows_its_progress(db_url, email, tmp_path, monkeypatch):
    """Before: `zm-roi embed` printed nothing until it had embedded everything (10 minutes seen)."""
    import_memories(db_url, write_jsonl(tmp_path / "m.jsonl", distinct_rows(3, "Backfilled")), Target(email))
    monkeypatch.setattr(
        embeddings, "embed", lambda texts, *, as_query, model: embeddings.Embedded([[0.5] * 384] * len(texts), model, 0)
    )
    monkeypatch.setattr("sys.stderr", Terminal())
    author = user_id(db_url, email)
    with psycopg.connect(db_url) as conn:
        ids = [row[0] for row in conn.execute("select id from public.memories where author_id = %s", (author,))]
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert backfill.embed_memories(conn, FAKE_MODEL, ids) == 3
    shown = sys.stderr.getvalue()
    assert f"\rembedding with {FAKE_MODEL} [########################] 3/3 rows" in shown
    assert shown.endswith("\n")


def test_a_failing_model_says_the_memories_are_written(db_url, email, tmp_path, monkeypatch):
    """Before: the model failed before anything was written, and said nothing of what to do next."""
    monkeypatch.setenv("ZM_EMBEDDING_MODEL", FAKE_MODEL)

    def failing_embed(texts, *, as_query, model):
        raise UserError(f"embedding with {model} failed: connection refused")

    monkeypatch.setattr(embeddings, "embed", failing_embed)
    path = write_jsonl(tmp_path / "m.jsonl", distinct_rows(3, "Unembedded"))
    with pytest.raises(UserError, match=r"connection refused; the 3 memories of .* are written and searchable: run"):
        import_memories(db_url, path, Target(email), quiet=True)
    assert memory_count(db_url, email) == 3


def test_an_import_waits_for_the_layer_and_then_skips_what_the_other_wrote(db_url, email, tmp_path, capsys):
    """Interleaving: (1) another import holds the project's layer lock and has written line 1's memory,
    uncommitted; (2) this import creates nothing new, says it waits, and blocks on the lock; (3) the
    other commits and unlocks; (4) this import reads the layer only now, so it skips line 1."""
    project = f"wait-{email[5:17]}"
    path = write_jsonl(tmp_path / "m.jsonl", distinct_rows(3, "Waited"))
    import_memories(db_url, write_jsonl(tmp_path / "seed.jsonl", [GOOD]), Target(email, project=project))
    with psycopg.connect(db_url, autocommit=True) as other:
        place = other.execute("select id from public.projects where name = %s", (project,)).fetchone()[0]
        layer = {"scope": "project", "layer_id": str(place)}
        other.execute(query("lock_import_layer"), layer)
        other.execute("begin")
        other.execute(
            """insert into public.memories (author_id, scope, project_id, kind, title, body)
               select u.id, 'project', %s, 'decision', 'Waited 0', 'Body of Waited number 0.'
               from auth.users u where u.email = %s""",
            (place, email),
        )
        outcome = []
        target = Target(email, project=project)
        waiting = threading.Thread(target=lambda: outcome.append(import_memories(db_url, path, target)))
        waiting.start()
        wait_for(lambda: "waiting for another import into this project layer" in capsys.readouterr().err, timeout=30)
        assert waiting.is_alive()
        other.execute("commit")
        other.execute(query("unlock_import_layer"), layer)
        waiting.join(timeout=30)
    assert not waiting.is_alive()
    assert (outcome[0].imported, outcome[0].skipped) == (2, 1)
    assert memory_count(db_url, email) == 4


def test_offline_every_memory_gets_both_embeddings_each_call_metered(db_url, email, tmp_path, monkeypatch):
    """Offline, the import fills both legs (MiniLM into `embedding_minilm` first, the faster model,
    then e5 into `embedding`), each row records its two models, and each model's batch call leaves its
    own usage event. (Fails with configured_models() giving one leg alone: a null column, one event.)"""
    monkeypatch.setenv("ZM_EMBEDDING_MODEL", embeddings.OFFLINE_MODEL)
    calls = []

    def fake_embed(texts, *, as_query, model):
        calls.append((model, len(texts)))
        return embeddings.Embedded([[1.0] + [0.0] * 383 for _ in texts], model, 3 * len(texts))

    monkeypatch.setattr(embeddings, "embed", fake_embed)
    path = write_jsonl(tmp_path / "m.jsonl", distinct_rows(3, "Both"))
    result = import_memories(db_url, path, Target(email), quiet=True)
    assert result.embedded == 3
    assert calls == [(embeddings.MINILM_MODEL, 3), (embeddings.OFFLINE_MODEL, 3)]
    with psycopg.connect(db_url) as conn:
        models = conn.execute(
            """select m.embedding_model, m.embedding_minilm_model, count(*) from public.memories m
               join auth.users u on u.id = m.author_id
               where u.email = %s and m.embedding is not null and m.embedding_minilm is not null group by 1, 2""",
            (email,),
        ).fetchall()
        events = conn.execute(
            """select e.model, e.input_tokens from public.usage_events e join auth.users u on u.id = e.owner_id
               where u.email = %s and e.purpose = 'embedding' order by e.model""",
            (email,),
        ).fetchall()
    assert models == [(embeddings.OFFLINE_MODEL, embeddings.MINILM_MODEL, 3)]
    assert events == sorted([(embeddings.OFFLINE_MODEL, 9), (embeddings.MINILM_MODEL, 9)])


def test_a_hosted_model_fills_the_first_leg_alone(monkeypatch):
    assert embeddings.configured_models({"ZM_EMBEDDING_MODEL": "openai/text-embedding-3-small"}) == {
        "embedding": "openai/text-embedding-3-small"
    }
    assert embeddings.configured_models({"ZM_EMBEDDING_MODEL": "none"}) == {}
    assert embeddings.configured_models({}) == {
        "embedding": embeddings.OFFLINE_MODEL,
        "embedding_minilm": embeddings.MINILM_MODEL,
    }
