"""The benchmark compares a question's vector only with vectors of its own model. A
semantic leg whose question model differs from a vector the caller's live memories hold for it is left
out of the run (the run records no model for it, and the answer says to run `zm-roi embed`); another
user's memories, which the caller cannot see, leave it in."""

from __future__ import annotations

import psycopg
import pytest

from tests.support import as_user, benchmark, extractor, fetch, remove_users
from zm_roi.queries import query

KNOWLEDGE = [
    ("decision", "Blue-green cutover for the billing API", "Traffic moves to the idle stack after smoke checks pass."),
    ("gotcha", "Invoice PDFs render in UTC", "The renderer ignores the account's timezone, so dates can be a day off."),
    ("convention", "Feature flags name an owner", "Every flag names an owning team in its description."),
]
# Shares no word with any question: only the semantic leg can surface it (its vector is the questions').
DECOY = ("episode", "Zebras hum quietly", "Wombats yodel near quarries.")


def unit(axis: int) -> str:
    return "[" + ",".join("1" if i == axis else "0" for i in range(384)) + "]"


QUESTION, ELSEWHERE = unit(0), unit(1)


def write_memories(conn, user_id, model: str, minilm_model: str) -> None:
    for kind, title, body in [*KNOWLEDGE, DECOY]:
        vector = QUESTION if (kind, title, body) == DECOY else ELSEWHERE
        conn.execute(
            """insert into public.memories (author_id, scope, kind, title, body, embedding, embedding_model,
                                            embedding_minilm, embedding_minilm_model)
               values (%s, 'personal', %s, %s, %s, %s::extensions.vector, %s, %s::extensions.vector, %s)""",
            (user_id, kind, title, body, vector, model, vector, minilm_model),
        )


@pytest.fixture
def owner(db_url, email):
    """A user whose memories carry vectors of models A (first leg) and Am (MiniLM leg), next to another
    user whose memories carry models B and Bm."""
    with psycopg.connect(db_url) as conn, conn.transaction():
        user_id = conn.execute(query("ensure_user"), {"email": email}).fetchone()[0]
        other = conn.execute(query("ensure_user"), {"email": "other-" + email}).fetchone()[0]
        write_memories(conn, user_id, "model-A", "model-Am")
        write_memories(conn, other, "model-B", "model-Bm")
        decoy = conn.execute(
            "select id from public.memories where author_id = %s and kind = 'episode'", (user_id,)
        ).fetchone()[0]
    yield user_id, decoy
    remove_users(db_url, [user_id, other])


def embed_questions(db_url, user_id, model: str, minilm_model: str) -> None:
    """What the worker does, by hand: every active question embedded (by the given models) as QUESTION."""
    with psycopg.connect(db_url) as conn:
        conn.execute(
            """update roi.probes set question_embedding = %(v)s::extensions.vector, question_embedding_model = %(m)s,
                      question_embedding_minilm = %(v)s::extensions.vector, question_embedding_minilm_model = %(mm)s
               where owner_id = %(owner)s and state = 'active'""",
            {"v": QUESTION, "m": model, "mm": minilm_model, "owner": user_id},
        )


def run(db_url, user_id) -> tuple[dict, tuple, dict]:
    """Start a run; its answer, the models it records, and what each probe surfaced."""
    answer = benchmark(db_url, user_id)
    assert answer["status"] == "started", answer
    models = as_user(
        db_url,
        user_id,
        "select embedding_model, embedding_minilm_model from public.roi_benchmark_runs where run_id = %s",
        (answer["run_id"],),
    )[0]
    recalls = fetch(db_url, "select probe_id, surfaced_ids from roi.recalls where run_id = %s", (answer["run_id"],))
    return answer, tuple(models.values()), {r["probe_id"]: r["surfaced_ids"] for r in recalls}


def test_a_leg_whose_question_model_differs_from_the_memories_is_left_out(db_url, owner):
    user_id, decoy = owner
    with extractor(db_url, "deterministic"):
        # No question embedded yet: lexical recall only, the baseline each probe is compared with.
        answer, models, lexical = run(db_url, user_id)
        assert len(lexical) == len(KNOWLEDGE) and models == (None, None) and "hint" not in answer
        assert not any(decoy in ids for ids in lexical.values())

        # The questions' models are the memories' (the other user's B vectors are not the caller's to
        # see): both legs serve, and the decoy only a vector can find surfaces for every question.
        embed_questions(db_url, user_id, "model-A", "model-Am")
        answer, models, surfaced = run(db_url, user_id)
        assert models == ("model-A", "model-Am") and "hint" not in answer
        assert all(decoy in ids for ids in surfaced.values()), surfaced

        # Another model embedded the questions: neither leg compares them with the A vectors. The run
        # records no model, surfaces exactly what the lexical recall did, and says what to run.
        embed_questions(db_url, user_id, "model-B", "model-Bm")
        answer, models, surfaced = run(db_url, user_id)
        assert models == (None, None)
        assert surfaced == lexical
        assert "model-B and model-Bm" in answer["hint"] and "`zm-roi embed`" in answer["hint"], answer

        # Only the MiniLM leg's model differs: that leg alone is left out; the first still finds the decoy.
        embed_questions(db_url, user_id, "model-A", "model-Bm")
        answer, models, surfaced = run(db_url, user_id)
        assert models == ("model-A", None)
        assert all(decoy in ids for ids in surfaced.values()), surfaced
        assert "by model-Bm was left out" in answer["hint"], answer


def test_a_vector_of_no_recorded_model_leaves_its_leg_out(db_url, owner):
    user_id, _ = owner
    with psycopg.connect(db_url) as conn:
        conn.execute(
            """update public.memories set embedding_model = null where author_id = %s and kind = 'decision'""",
            (user_id,),
        )
    with extractor(db_url, "deterministic"):
        run(db_url, user_id)
        embed_questions(db_url, user_id, "model-A", "model-Am")
        answer, models, _ = run(db_url, user_id)
    assert models == (None, "model-Am") and "by model-A was left out" in answer["hint"], answer
