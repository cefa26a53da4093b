"""Settings stay where the user put them, and switching LLM → deterministic strands nothing: pending
probes get their template questions and an open LLM run closes, so the next call starts a run."""

from __future__ import annotations

import psycopg

from tests.support import activate_pending_probes, benchmark, extractor, user_with_knowledge
from zm_roi.queries import query


def set_mode(db_url: str, mode: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute(query("set_extractor"), {"extractor": mode})


def test_deterministic_mode_takes_over_probes_left_pending_by_llm_mode(db_url, email):
    """Before: "generating, 0 of 2" forever, since no worker writes questions in deterministic mode."""
    user_id = user_with_knowledge(db_url, email, count=2)
    with extractor(db_url, "llm"):
        assert benchmark(db_url, user_id)["status"] == "generating"
        set_mode(db_url, "deterministic")
        started = benchmark(db_url, user_id)
        # Read while in deterministic mode: in LLM mode the owner's next call hands template questions back.
        with psycopg.connect(db_url) as conn:
            questions = conn.execute(
                "select question from roi.probes where owner_id = %s and state = 'active' order by question",
                (user_id,),
            ).fetchall()
    assert started["status"] == "started" and started["probes"] == 2
    assert [q for (q,) in questions] == [f'What did we decide about "Fact {n} of {email}", and why?' for n in (1, 2)]


def test_deterministic_mode_closes_the_open_llm_run_and_starts_its_own(db_url, email):
    """Before: `in_progress` until the run timeout (15 minutes), since no worker judges in deterministic mode."""
    user_id = user_with_knowledge(db_url, email, count=3)
    with extractor(db_url, "llm"):
        benchmark(db_url, user_id)
        activate_pending_probes(db_url, user_id)
        llm_run = benchmark(db_url, user_id)
        assert llm_run["status"] == "started"
        assert benchmark(db_url, user_id)["status"] == "in_progress"
        set_mode(db_url, "deterministic")
        own = benchmark(db_url, user_id)
    assert own["status"] == "started" and own["run_id"] != llm_run["run_id"]
    with psycopg.connect(db_url) as conn:
        left = conn.execute(
            "select count(*) filter (where skip_reason = 'mode_changed'), count(*) from roi.verdicts where run_id = %s",
            (llm_run["run_id"],),
        ).fetchone()
        queued = conn.execute(
            "select count(*) from roi.work where run_id = %s and kind = 'judge'", (llm_run["run_id"],)
        ).fetchone()
        runs = conn.execute(
            "select r.mode, c.reason from roi.runs r left join roi.run_closures c on c.run_id = r.id "
            "where r.owner_id = %s order by r.started_at",
            (user_id,),
        ).fetchall()
    assert left == (3, 3) and queued == (0,)
    assert runs == [("llm", "complete"), ("deterministic", "complete")]


def test_llm_mode_keeps_its_pending_probes_for_the_worker(db_url, email):
    """The takeover is deterministic mode's alone: in LLM mode pending probes wait for the worker."""
    user_id = user_with_knowledge(db_url, email, count=2)
    with extractor(db_url, "llm"):
        assert benchmark(db_url, user_id)["status"] == "generating"
        assert benchmark(db_url, user_id)["status"] == "generating"


def test_switching_to_llm_mode_hands_template_questions_to_the_writer(db_url, email):
    """Before: the next LLM-judged run (shown without the deterministic caveat) scored the template
    questions, which quote the title; the switch kept them active and the call answered `started`."""
    user_id = user_with_knowledge(db_url, email, count=3)
    with extractor(db_url, "deterministic"):
        assert benchmark(db_url, user_id)["status"] == "started"
        set_mode(db_url, "llm")
        after_switch = benchmark(db_url, user_id)
        with psycopg.connect(db_url) as conn:
            probes = conn.execute(
                "select state, question, question_embedding from roi.probes where owner_id = %s", (user_id,)
            ).fetchall()
            llm_runs = conn.execute(
                "select count(*) from roi.runs where owner_id = %s and mode = 'llm'", (user_id,)
            ).fetchone()[0]
    assert after_switch == {"status": "generating", "ready": 0, "target": 3}
    assert probes == [("pending", None, None)] * 3, "no template question left for an LLM run to score"
    assert llm_runs == 0


def test_switching_back_to_deterministic_mode_keeps_the_written_questions(db_url, email):
    """The hand-over is for template questions only: a model's questions survive a round trip."""
    user_id = user_with_knowledge(db_url, email, count=2)
    with extractor(db_url, "llm"):
        assert benchmark(db_url, user_id)["status"] == "generating"
        activate_pending_probes(db_url, user_id)
        set_mode(db_url, "deterministic")
        set_mode(db_url, "llm")
        with psycopg.connect(db_url) as conn:
            states = conn.execute("select state from roi.probes where owner_id = %s", (user_id,)).fetchall()
    assert states == [("active",), ("active",)]
