"""A changed embedding model is detected: memories record the model of each vector,
`zm-roi recall` compares a query vector only with vectors of its own model (a leg whose read set holds
another model's vectors is left out), `recall` and `import` say so with the hint to run `zm-roi embed`,
and `zm-roi embed` re-embeds them. Before, recall silently compared the new model's query vector with the
old model's stored vectors (a score moved 0.583 -> 0.375 and the order changed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg

from tests.conftest import ROOT
from zm_roi import embeddings

OLD = "openai/text-embedding-3-small"
MEMORIES = [
    {"kind": "decision", "title": "Pin the payments SDK", "body": "We pin the payments SDK at 4.2: 4.3 broke refunds."},
    {"kind": "gotcha", "title": "Staging cron runs in UTC", "body": "The staging scheduler fires in UTC, not local."},
    {"kind": "convention", "title": "Feature-named migrations", "body": "Migrations are named for their feature."},
]
QUESTION = "Which version of the card payments library do we stay on?"


def zm(db_url: str, *args: str, model: str = embeddings.OFFLINE_MODEL) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ZM_", "SUPABASE_"))}
    env.update(ZM_DB_URL=db_url, ZM_EMBEDDING_MODEL=model)
    done = subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


def recall(db_url: str, email: str, model: str = embeddings.OFFLINE_MODEL) -> tuple[list[dict], str]:
    done = zm(db_url, "recall", QUESTION, "--user", email, "--json", model=model)
    return json.loads(done.stdout), done.stderr


def test_vectors_of_another_model_are_left_out_named_and_re_embedded(db_url, email, tmp_path):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps(m) + "\n" for m in MEMORIES[:2]))
    second.write_text(json.dumps(MEMORIES[2]) + "\n")
    imported = zm(db_url, "import", str(first), "--user", email, "--quiet")
    assert "embedded 2 memories" in imported.stdout and "zm-roi embed" not in imported.stdout
    hits, said = recall(db_url, email)
    assert hits and said == "", "one model throughout: no hint"

    # The deployment's model changed since these vectors were written: as far as the database can
    # tell, the e5 leg's stored vectors are another model's now (the MiniLM leg's still match).
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "update public.memories set embedding_model = %s"
            " where author_id = (select id from auth.users where email = %s)",
            (OLD, email),
        )
    hits, said = recall(db_url, email)
    assert hits, "the lexical and MiniLM legs still find the memories"
    assert said.startswith("zm-roi: ") and said.count("\n") == 1, said
    assert f"another model than {embeddings.OFFLINE_MODEL} (2 by {OLD})" in said and "`zm-roi embed`" in said, said
    assert "left that semantic leg out" in said

    # Both legs' vectors of another model: the recall is exactly the lexical one (no vector compared).
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "update public.memories set embedding_minilm_model = 'old/minilm'"
            " where author_id = (select id from auth.users where email = %s)",
            (email,),
        )
    both_stale, said = recall(db_url, email)
    lexical, quiet = recall(db_url, email, model="none")
    assert both_stale == lexical and quiet == ""
    assert said.count("\n") == 2 and "(2 by old/minilm)" in said, said

    # A later import into the same layer says the layer is mixed, and what to run.
    again = zm(db_url, "import", str(second), "--user", email, "--quiet")
    assert f"(2 by {OLD})" in again.stdout and "run `zm-roi embed`" in again.stdout, again.stdout
    assert "`zm-roi recall` leaves that semantic leg out here" in again.stdout

    # `zm-roi embed` re-embeds them with the model in force: no hint, no vector of another model.
    embedded = zm(db_url, "embed", "--quiet")
    assert "embedded" in embedded.stdout
    with psycopg.connect(db_url) as conn:
        models = conn.execute(
            "select distinct embedding_model, embedding_minilm_model from public.memories"
            " where author_id = (select id from auth.users where email = %s)",
            (email,),
        ).fetchall()
    assert models == [(embeddings.OFFLINE_MODEL, embeddings.MINILM_MODEL)]
    hits, said = recall(db_url, email)
    assert hits and said == ""
