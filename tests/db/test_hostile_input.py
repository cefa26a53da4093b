"""Hostile and odd input: arbitrary text through recall and the question templates (property-based),
1 MB bodies, every Unicode plane, right-to-left text and search metacharacters. Each gives correct
behaviour or a clear error, never a traceback or lost data."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import QUESTION_BOUNDS, as_user, benchmark, user_with_knowledge
from zm_roi.errors import UserError
from zm_roi.importer import Target, import_memories

# Any text PostgreSQL can store: every code point but NUL and the surrogates.
storable_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=400)
METACHARACTERS = "' \" \\ & | ! : * ( ) < -> % <-> !! && || :* '' \\' $$ ; -- /* */"


@pytest.fixture(scope="module")
def reader(db_url):
    """A user with a few memories, including metacharacters and right-to-left text."""
    with psycopg.connect(db_url) as conn:
        user = conn.execute(
            "insert into auth.users (email) values (%s) returning id", (f"hostile-{uuid.uuid4().hex[:8]}@x.test",)
        ).fetchone()[0]
        conn.execute(
            """insert into public.memories (author_id, scope, kind, title, body) values
               (%(u)s, 'personal', 'decision', %(meta)s, %(meta)s),
               (%(u)s, 'personal', 'gotcha', 'نشر النظام يوم الجمعة ممنوع', 'لا ننشر يوم الجمعة لأن الدعم غير متاح'),
               (%(u)s, 'personal', 'convention', 'Deploys need a 🚀 emoji', 'Every deploy message starts with 🚀.')""",
            {"u": user, "meta": METACHARACTERS},
        )
    return user


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=storable_text, match_count=st.integers(min_value=-5, max_value=500))
def test_recall_takes_any_text_as_plain_words(db_url, reader, question, match_count, reliability):
    rows = as_user(db_url, reader, "select * from public.recall(%s, match_count => %s)", (question, match_count))
    broken = [
        name
        for name, holds in (
            ("at most match_count rows", len(rows) <= max(0, match_count)),
            ("every score positive", all(row["score"] > 0 for row in rows)),
        )
        if not holds
    ]
    reliability.count("hostile input", "arbitrary text as a recall question (hypothesis)", lost=len(broken))
    assert broken == []


def test_recall_returns_at_most_100_rows_whatever_match_count_asks(db_url, email):
    # The cap needs more matching memories than it allows: 120 that all share one word.
    user = user_with_knowledge(db_url, email, count=120)
    counts = {
        wanted: len(as_user(db_url, user, "select * from public.recall('Fact', match_count => %s)", (wanted,)))
        for wanted in (500, 101, 100, 7, 0, -5)
    }
    assert counts == {500: 100, 101: 100, 100: 100, 7: 7, 0: 0, -5: 0}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["decision", "gotcha", "convention"]), title=storable_text, body=storable_text)
def test_templates_read_naturally_for_any_title(db_url, kind, title, body, reliability):
    with psycopg.connect(db_url) as conn:
        question = conn.execute("select roi.template_question(%s, %s, %s)", (kind, title, body)).fetchone()[0]
    broken = [
        name
        for name, holds in (
            ("ends with a question mark", question.endswith("?")),
            ("at most 200 characters", len(question) <= 200),
            ("no control character", not any(ord(c) < 32 for c in question)),
        )
        if not holds
    ]
    reliability.count(
        "hostile input", "arbitrary titles and bodies through the question templates (hypothesis)", lost=len(broken)
    )
    assert broken == []


def test_metacharacters_are_plain_characters_and_right_to_left_text_is_found(db_url, reader):
    # Only punctuation: no word to match, so nothing (and no tsquery syntax error).
    assert as_user(db_url, reader, "select title from public.recall(%s)", (METACHARACTERS,)) == []
    # The same metacharacters around a real word: the word is still found, the rest is inert.
    wrapped = as_user(
        db_url, reader, "select title from public.recall(%s)", (f"{METACHARACTERS} emoji {METACHARACTERS}",)
    )
    assert [r["title"] for r in wrapped] == ["Deploys need a 🚀 emoji"]
    found = as_user(db_url, reader, "select title from public.recall(%s)", ("متى ننشر النظام؟",))
    assert [r["title"] for r in found] == ["نشر النظام يوم الجمعة ممنوع"]


def test_a_one_megabyte_body_is_stored_recalled_and_probed(db_url, email, deterministic_mode):
    body = ("Quarantine the flaky payments suite before the release. " * 20000)[:1_000_000]
    with psycopg.connect(db_url) as conn:
        owner = conn.execute("insert into auth.users (email) values (%s) returning id", (email,)).fetchone()[0]
        conn.execute(
            "insert into public.memories (author_id, scope, kind, title, body) "
            "values (%s, 'personal', 'gotcha', %s, %s)",
            (owner, "x" * 5000, body),
        )
    assert benchmark(db_url, owner)["status"] == "started"
    with psycopg.connect(db_url) as conn:
        question, stored = conn.execute(
            "select p.question, length(m.body) from roi.probes p join public.memories m on m.id = p.memory_id "
            "where p.owner_id = %s",
            (owner,),
        ).fetchone()
    assert stored == 1_000_000, "nothing was truncated in storage"
    assert len(question) < 200 and '…"' in question, "a 5,000-character title is cut at 120 with an ellipsis"
    assert as_user(db_url, owner, "select count(*) as n from public.recall('quarantine flaky payments')")[0]["n"] == 1


def test_every_unicode_plane_round_trips_through_import(db_url, email, tmp_path):
    title = "".join(chr(plane * 0x10000 + 0x4E2D if plane == 0 else plane * 0x10000 + 0x100) for plane in range(17))
    path = tmp_path / "planes.jsonl"
    path.write_text(json.dumps({"title": title, "body": "שלום " + title, "kind": "convention"}, ensure_ascii=False))
    assert import_memories(db_url, path, Target(email)).imported == 1
    with psycopg.connect(db_url) as conn:
        stored = conn.execute(
            "select title from public.memories m join auth.users u on u.id = m.author_id where u.email = %s", (email,)
        ).fetchone()[0]
    assert stored == title


def test_the_file_is_read_as_json_lines_tools_read_it(db_url, email, tmp_path):
    """Lines end at "\\n" only: before, U+2028, U+2029 or U+0085 inside a title split the line in
    two ("m.jsonl:1: not valid JSON"), as `str.splitlines()` ends lines there and `jq` does not."""
    titles = ["Line\u2028separator", "Next\u0085line", "Paragraph\u2029separator"]
    lines = [json.dumps({"title": t, "body": "b", "kind": "convention"}, ensure_ascii=False) for t in titles]
    content = "\ufeff" + "\r\n".join(lines[:2]) + "\r\n \t\r\n\r\n" + lines[2]  # no final newline
    path = tmp_path / "m.jsonl"
    path.write_bytes(content.encode())
    assert import_memories(db_url, path, Target(email)).imported == 3
    with psycopg.connect(db_url) as conn:
        stored = conn.execute(
            "select m.title from public.memories m join auth.users u on u.id = m.author_id where u.email = %s",
            (email,),
        ).fetchall()
    assert sorted(row[0] for row in stored) == sorted(titles)
    # A blank line counts: an error on the line after it names the line an editor shows.
    path.write_bytes(content.encode() + b"\r\n{oops\r\n")
    with pytest.raises(UserError, match=r"m\.jsonl:6: not valid JSON"):
        import_memories(db_url, path, Target(email))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe not utf-8", "bad.jsonl:1: not UTF-8"),
        (json.dumps({"title": "t" * 1001, "body": "b", "kind": "decision"}).encode(), "field 'title'"),
        (json.dumps({"title": "nul\u0000", "body": "b", "kind": "decision"}).encode(), "NUL"),
        (b"\n\n   \n", "no memories"),
    ],
    ids=["binary", "title-too-long", "nul-character", "only-blank-lines"],
)
def test_malformed_import_files_are_clear_errors(db_url, email, tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        import_memories(db_url, path, Target(email))


@settings(max_examples=300, deadline=None)
@given(
    reply=st.one_of(
        storable_text,
        st.text(max_size=20000),
        st.builds(
            json.dumps,
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=50),
                lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
                max_leaves=12,
            ),
        ),
    )
)
def test_any_model_output_is_a_verdict_or_an_output_error(reply, reliability):
    from zm_roi import prompts

    broken = []
    for name, parse in (
        ("question", lambda r: prompts.parse_question(r, "Pin the SDK", "We pin at 4.2.", QUESTION_BOUNDS)),
        ("judgment", prompts.parse_judgment),
    ):
        try:
            parse(reply)
        except prompts.OutputError as exc:
            if len(str(exc)) >= 400:
                broken.append(f"{name}: an error longer than one short line")
        except Exception as exc:  # noqa: BLE001 - anything but OutputError is the finding
            broken.append(f"{name}: raised {type(exc).__name__}")
    reliability.count("hostile input", "arbitrary model output through both parsers (hypothesis)", lost=len(broken))
    assert broken == [], "errors stay one short line, and every refusal is an OutputError"


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps({"question": "W" * 10_000 + "?"}),
        json.dumps({"question": ["not", "a", "string"]}),
        json.dumps({"question": "Which version of the SDK do we keep?", "extra": {"nested": [1, 2]}}),
        "{" * 5000,
    ],
    ids=["10k-question", "wrong-type", "extra-keys", "deep-garbage"],
)
def test_odd_generation_output_is_refused_or_accepted_cleanly(reply):
    from zm_roi import prompts

    try:
        question = prompts.parse_question(reply, "Pin the SDK", "We pin at 4.2.", QUESTION_BOUNDS)
    except prompts.OutputError as exc:
        assert "W" * 50 not in str(exc), "the error never repeats the model's reply"
    else:
        assert question == "Which version of the SDK do we keep?"
