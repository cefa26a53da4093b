"""One home per rule: a question's length is the check constraint on roi.probes, which the SQL gate and
the worker's read; a model call's timeout is derived from the lease the worker is handed; the kinds of
work are the rows of roi.work_kinds, which the worker's handlers must equal; roi.enqueue wakes the
worker."""

from __future__ import annotations

import json
import re
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.conftest import ROOT
from tests.support import GENERATION_MODEL, JUDGE_MODEL, QUESTION_BOUNDS, ScriptedModel, default_answer, set_settings
from tests.worker.conftest import seed_queued_judgments
from zm_roi import prompts
from zm_roi.worker import LEASE_MARGIN_SECONDS, MIN_CALL_SECONDS, KindsDiffer, Worker, WorkerConfig, call_timeout

CONFIG = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)

# ---- the question's length -------------------------------------------------------------------------


def test_the_question_length_is_read_from_the_table_constraint(db_url):
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        row = conn.execute("select * from roi.question_length_bounds()").fetchone()
        assert prompts.QuestionBounds(row["min_chars"], row["max_chars"]) == QUESTION_BOUNDS
        assert Worker(db_url, CONFIG).question_bounds(conn) == QUESTION_BOUNDS


def test_changing_the_constraint_changes_what_both_gates_accept(db_url):
    fifteen = "Which one, why?"
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        # Today's limits take it: record_question passes its gate (and finds no pending probe).
        assert (
            conn.execute("select roi.record_question(%s, %s)", (uuid.uuid4(), fifteen)).fetchone()["record_question"]
            is False
        )
        assert prompts.parse_question_shape(json.dumps({"question": fifteen}), QUESTION_BOUNDS) == fifteen
        conn.rollback()
        try:
            # A scratch transaction: 20..40 characters, rolled back below.
            conn.execute("alter table roi.probes drop constraint probes_question_length")
            conn.execute(
                "alter table roi.probes add constraint probes_question_length"
                " check (length(question) between 20 and 40) not valid"  # other tests' probes stay
            )
            bounds = Worker(db_url, CONFIG).question_bounds(conn)
            assert bounds == prompts.QuestionBounds(20, 40)
            with pytest.raises(prompts.OutputError, match="at least 20 characters"):
                prompts.parse_question_shape(json.dumps({"question": fifteen}), bounds)
            assert prompts.gate_refusal("Which " + "one " * 10 + "?", "T", "B", bounds) == (
                "it is longer than 40 characters"
            )
            assert "at most 40 characters" in prompts.generation_prompt("decision", "T", "B", bounds)
            conn.execute("savepoint gate")
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="a question has 20 to 40 characters"):
                conn.execute("select roi.record_question(%s, %s)", (uuid.uuid4(), fifteen))
            conn.execute("rollback to savepoint gate")
        finally:
            conn.rollback()
        assert conn.execute("select * from roi.question_length_bounds()").fetchone() == {
            "min_chars": QUESTION_BOUNDS.min_chars,
            "max_chars": QUESTION_BOUNDS.max_chars,
        }


def test_the_table_refuses_a_question_outside_the_limits_whatever_path_writes_it(db_url, owners):
    owner = owners.create([])
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.errors.CheckViolation, match="probes_question_length"):
        conn.execute(
            """insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                                       question, state, activated_at)
               values (%s, gen_random_uuid(), 'decision', 'personal', 'T', 'B', 'Why?', 'active', now())""",
            (owner,),
        )


# The product's code: SQL schema files, the Python package (not the bench harness), the prompts.
PRODUCT = [
    *sorted((ROOT / "supabase" / "schemas").glob("*.sql")),
    *sorted(p for p in (ROOT / "python" / "zm_roi").rglob("*.py") if "bench" not in p.parts),
    *sorted((ROOT / "python" / "zm_roi").rglob("*.j2")),
    ROOT / "python" / "zm_roi" / "queries.sql",
]
MIN, MAX = QUESTION_BOUNDS


def test_no_other_copy_of_the_question_length_is_written_in_the_product():
    # A line that gives a question (or its characters) a length of MIN or MAX, in any spelling
    # ("between 10 and 300", "max_length=300", "len(question) > 300", "300 characters").
    copies = re.compile(
        rf"\bbetween\s+{MIN}\s+and\s+{MAX}\b|_length\s*=\s*({MIN}|{MAX})\b"
        rf"|\b(len|length)\s*\(.*\)\s*[<>]=?\s*({MIN}|{MAX})\b|\b({MIN}|{MAX})\s+characters\b",
        re.IGNORECASE,
    )
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in PRODUCT
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if copies.search(line)
    ]
    assert found == [
        "supabase/schemas/30_roi_probes_runs_and_work.sql:"
        f"{_constraint_line()}: constraint probes_question_length check (length(question) between {MIN} and {MAX}),"
    ]


def _constraint_line() -> int:
    lines = (ROOT / "supabase" / "schemas" / "30_roi_probes_runs_and_work.sql").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if "constraint probes_question_length" in line)


# ---- the model call's timeout ------------------------------------------------------------------------


@pytest.mark.parametrize("lease", [2.0, 15.0, 40.0, 120.0, 600.0])
def test_a_call_ends_before_the_lease_it_serves(lease):
    for elapsed in (0.0, lease / 3, lease / 2):
        timeout = call_timeout(lease, elapsed)
        assert timeout is not None and MIN_CALL_SECONDS <= timeout < lease - elapsed
        assert lease - elapsed - timeout == min(LEASE_MARGIN_SECONDS, lease / 4), "the margin is kept"


def test_a_longer_lease_gives_a_longer_call_and_a_spent_lease_none():
    assert call_timeout(600.0, 0.0) > call_timeout(120.0, 0.0) > call_timeout(40.0, 0.0)
    assert call_timeout(600.0, 0.0) > 90, "longer than the fixed 90 s the worker used before"
    assert call_timeout(120.0, 110.0) is None, "10 s left of 120, all of it margin: no call"
    assert call_timeout(2.0, 1.2) is None, "0.3 s left after the margin: under MIN_CALL_SECONDS"


@pytest.mark.parametrize("lease_seconds", [40, 300])
def test_the_worker_times_its_call_from_the_lease_of_the_row_it_claimed(
    db_url, worker_url, llm_mode, owners, lease_seconds
):
    set_settings(db_url, lease_duration=f"{lease_seconds} seconds")
    owner = owners.create([])
    seed_queued_judgments(db_url, owner, 1)
    timeouts = []

    def complete(**kwargs):
        timeouts.append(kwargs["timeout"])
        return model(**kwargs)

    model = ScriptedModel(default_answer)
    assert Worker(worker_url, CONFIG, complete).run(once=True) == 1
    assert len(timeouts) == 1 and len(model.calls) == 1
    margin = min(LEASE_MARGIN_SECONDS, lease_seconds / 4)
    # Below the lease by at least the margin; not much less (the claim and the key lookup take little).
    assert lease_seconds - margin - 10 < timeouts[0] <= lease_seconds - margin


# ---- the kinds of work ---------------------------------------------------------------------------


def test_the_workers_handlers_are_the_kinds_the_database_lists(db_url):
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        listed = conn.execute("select array_agg(kind order by kind) as kinds from roi.work_kinds").fetchone()["kinds"]
        assert sorted(Worker._KINDS) == listed
        Worker(db_url, CONFIG).check_kinds(conn)
        try:
            # A scratch transaction: a kind this worker has no handler for, rolled back below.
            conn.execute(
                "insert into roi.work_kinds (kind, urgency, needs_run, shows_snapshot, gives_up)"
                " values ('translate', 4, false, false, 'drop')"
            )
            with pytest.raises(KindsDiffer, match=r"no handler for \['translate'\]"):
                Worker(db_url, CONFIG).check_kinds(conn)
        finally:
            conn.rollback()

        class Newer(Worker):
            _KINDS = {**Worker._KINDS, "summarise": Worker._KINDS["judge"]}

        with pytest.raises(KindsDiffer, match=r"handlers for unknown \['summarise'\]"):
            Newer(db_url, CONFIG).check_kinds(conn)


def test_a_worker_whose_kinds_differ_from_the_database_refuses_to_start(db_url, worker_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "insert into roi.work_kinds (kind, urgency, needs_run, shows_snapshot, gives_up)"
            " values ('translate', 4, false, false, 'drop')"
        )
        try:
            worker = Worker(worker_url, CONFIG, ScriptedModel(default_answer))
            with pytest.raises(KindsDiffer, match="translate"):
                worker.run(once=True)
            assert worker.attempts == 0
        finally:
            conn.execute("delete from roi.work_kinds where kind = 'translate'")


def test_enqueue_wakes_the_worker_with_the_kind(db_url, owners):
    owner = owners.create([])
    with psycopg.connect(db_url, autocommit=True) as listener, psycopg.connect(db_url) as conn:
        listener.execute("listen roi_work")
        probe = conn.execute(
            """insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                                       question, state, activated_at, question_embedding, question_embedding_model)
               values (%s, gen_random_uuid(), 'decision', 'personal', 'T', 'B', 'Which way did it go, and why?',
                       'active', now(), array_fill(0.1::real, array[384])::extensions.vector, 'seeded')
               returning id""",
            (owner,),
        ).fetchone()[0]
        conn.commit()
        assert list(listener.notifies(timeout=0.2)) == []  # an embedded active probe queues nothing
        queued = conn.execute("select roi.enqueue('embed_question', %s, %s)", (owner, [probe])).fetchone()[0]
        assert list(listener.notifies(timeout=0.2)) == []  # not before the commit
        conn.commit()
        heard = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
        again = conn.execute("select roi.enqueue('embed_question', %s, %s)", (owner, [probe])).fetchone()[0]
        conn.commit()
        quiet = list(listener.notifies(timeout=0.5))
    assert queued == 1
    assert heard == [("roi_work", "embed_question")]
    assert again == 0
    assert quiet == []  # nothing queued, nobody woken


# The kinds by name; the two checks of the judge are named together where their own behaviour is
# written (which results they record, how the judge sees the snapshot).
KINDS = ("judge", "closed_book", "judge_withheld", "judge_reversed", "write_question", "embed_question")
CHECKS_OF_THE_JUDGE = {"judge_withheld", "judge_reversed"}


def _kinds_listed(line: str) -> int:
    """How many kinds a line names, the two checks of the judge counted as one."""
    named = set(re.findall(r"""['"]({})['"]""".format("|".join(KINDS)), line))
    return len(named - CHECKS_OF_THE_JUDGE) + bool(named & CHECKS_OF_THE_JUDGE)


def test_no_other_list_of_the_kinds_of_work_is_written_in_the_product():
    lists = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in PRODUCT
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _kinds_listed(line) > 1
    ]
    assert lists == []
    assert _kinds_listed("when kind in ('judge', 'closed_book') then") == 2  # the check can fail
