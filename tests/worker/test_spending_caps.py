"""Spending caps: the worker starts no model call whose estimated cost would take a run (deployment key)
or an owner's calendar month (own key included) past its cap. A run the cap stops closes as
`aborted_budget`, its queued rows gone, and the paired comparison and the tile's score pass over it.

The judge here is a model litellm's local price map knows (gpt-4), answered by litellm's mock, which
reports 10 prompt and 20 completion tokens per call: each call costs the same known amount, while the
worker's estimate (the prompt's real tokens) is an order of magnitude larger, so the test can say in
advance how many calls fit under a cap."""

from __future__ import annotations

import io
import json
import uuid
from decimal import Decimal

import psycopg
import pytest

from tests.support import (
    GENERATION_MODEL,
    GOOD_VERDICT,
    KNOWLEDGE,
    ScriptedModel,
    as_user,
    benchmark,
    fetch,
    question_for,
    set_settings,
)
from tests.worker.conftest import tile
from zm_roi import llm, prompts
from zm_roi.cli import main
from zm_roi.worker import Worker, WorkerConfig

PRICED_JUDGE = "openai/gpt-4"
PASSPHRASE = "spending caps passphrase"


def answer(model: str, prompt: str) -> str:
    return question_for(prompt) if model == GENERATION_MODEL else json.dumps(GOOD_VERDICT)


@pytest.fixture
def caps(db_url):
    """Caps and the knobs these tests pin (no rotation: every run asks the same six questions; no
    checks of the judge: only judgments are called), restored afterwards."""
    keys = (
        "pool_target",
        "max_run_cost_usd",
        "max_owner_cost_usd_per_month",
        "rotation_per_run",
        "withheld_source_checks",
        "order_checks",
        "closed_book_checks",
    )
    [before] = fetch(db_url, f"select {', '.join(keys)} from roi.settings")
    set_settings(db_url, rotation_per_run=0, withheld_source_checks=0, order_checks=0, closed_book_checks=0)
    yield lambda **values: set_settings(db_url, **values)
    set_settings(db_url, **before)


def worker(worker_url: str, model: ScriptedModel) -> Worker:
    config = WorkerConfig(GENERATION_MODEL, PRICED_JUDGE, key_encryption_key=PASSPHRASE, concurrency=1)
    return Worker(worker_url, config, model)


def judge_calls(model: ScriptedModel) -> int:
    return sum(1 for call in model.calls if call["model"] == PRICED_JUDGE)


def pool_ready(db_url: str, worker_url: str, owner: uuid.UUID, model: ScriptedModel) -> None:
    """The owner's first call queues the pool; the worker writes its six questions (no price, no cap)."""
    assert benchmark(db_url, owner)["status"] == "generating"
    worker(worker_url, model).run(once=True)


def run_row(db_url: str, owner: uuid.UUID, run_id: str) -> dict:
    [row] = as_user(db_url, owner, "select * from public.roi_benchmark_runs where run_id = %s", (run_id,))
    return row


def queued_estimates(db_url: str, run_id: str) -> list[float]:
    """The worker's estimate for each queued judgment of the run, in the order it claims them."""
    rows = fetch(
        db_url,
        """select p.question, p.source_kind, p.source_title, p.source_body, r.surfaced
           from roi.work w join roi.probes p on p.id = w.probe_id
           join roi.recalls r on r.run_id = w.run_id and r.probe_id = w.probe_id
           where w.run_id = %s and w.kind = 'judge' order by w.urgency, w.run_after, w.id""",
        (run_id,),
    )
    return [
        llm.estimate_cost(
            PRICED_JUDGE,
            prompts.judge_prompt(r["question"], r["source_kind"], r["source_title"], r["source_body"], r["surfaced"]),
        )
        for r in rows
    ]


def mock_call_cost() -> float:
    reply = llm.litellm.completion(
        model=PRICED_JUDGE, messages=[{"role": "user", "content": "x"}], mock_response=json.dumps(GOOD_VERDICT)
    )
    return llm.cost_of(reply)


def calls_that_fit(estimates: list[float], each: float, cap: float) -> int:
    """How many calls the cap allows, one at a time: a call starts only if what was spent plus its
    estimate stays within the cap."""
    spent = 0.0
    for made, estimate in enumerate(estimates):
        if spent + estimate > cap:
            return made
        spent += each
    return len(estimates)


def test_a_run_cap_of_a_few_cents_stops_the_run_at_the_cap(db_url, worker_url, llm_mode, owners, caps):
    owner = owners.create(KNOWLEDGE)
    model = ScriptedModel(answer)
    pool_ready(db_url, worker_url, owner, model)

    # A first run with no cap: judged in full, the run the comparison will pair with.
    first = benchmark(db_url, owner)
    assert first["status"] == "started" and first["probes"] == 6
    worker(worker_url, model).run(once=True)
    assert run_row(db_url, owner, first["run_id"])["status"] == "complete"

    # A cap a little above one judgment's estimate: the run stops part-way, where the estimates say.
    each = mock_call_cost()
    assert each and each > 0, "gpt-4 has a price in litellm's local map"
    capped = benchmark(db_url, owner)
    estimates = queued_estimates(db_url, capped["run_id"])
    cap = round(estimates[0] + 1.5 * each, 4)
    assert 0.01 < cap < 0.10, f"a cap of a few cents, not {cap}"
    expected = calls_that_fit(estimates, each, cap)
    assert 1 <= expected < 6, "the cap falls mid-run"
    caps(max_run_cost_usd=Decimal(str(cap)))

    before = judge_calls(model)
    worker(worker_url, model).run(once=True)
    assert judge_calls(model) - before == expected, "the worker stopped calling exactly at the cap"

    stopped = run_row(db_url, owner, capped["run_id"])
    assert stopped["status"] == "aborted_budget"
    assert stopped["judged_count"] == expected and stopped["skipped_count"] == 6 - expected
    assert stopped["cost_usd"] <= Decimal(str(cap)), "never past the cap"
    skipped = fetch(
        db_url, "select skip_reason, judged_by from roi.verdicts where run_id = %s and skipped", (capped["run_id"],)
    )
    assert {(v["skip_reason"], v["judged_by"]) for v in skipped} == {("budget", "budget")}
    assert fetch(db_url, "select * from roi.work where run_id = %s", (capped["run_id"],)) == [], (
        "nothing of the stopped run stays queued"
    )
    after = judge_calls(model)
    worker(worker_url, model).run(once=True)
    assert judge_calls(model) == after, "and nothing keeps spending on it"

    # The tile shows the stop as its own state, with what was spent; the score stays the first run's.
    shown = tile(db_url, owner)
    assert shown["state"] == "aborted_budget"
    assert shown["scored_run_id"] == uuid.UUID(first["run_id"])
    assert "spending cap" in shown["note"] and f"${stopped['cost_usd']:.4f}" in shown["note"]

    # With the cap lifted, the next run pairs with the first one, never with the stopped run.
    caps(max_run_cost_usd=None)
    third = benchmark(db_url, owner)
    worker(worker_url, model).run(once=True)
    paired = run_row(db_url, owner, third["run_id"])
    assert paired["status"] == "complete"
    assert paired["previous_run_id"] == uuid.UUID(first["run_id"])
    assert paired["paired_count"] == 6
    assert len(tile(db_url, owner)["trend"]) == 2, "the trend holds the two complete runs only"


def test_a_model_with_no_price_is_not_called_under_a_cap(db_url, worker_url, llm_mode, owners, caps):
    owner = owners.create(KNOWLEDGE[:3])
    model = ScriptedModel(answer)
    pool_ready(db_url, worker_url, owner, model)
    caps(max_run_cost_usd=Decimal("5"))
    run = benchmark(db_url, owner)
    unpriced = WorkerConfig(GENERATION_MODEL, "openai/zm-test-judge", concurrency=1)
    Worker(worker_url, unpriced, model).run(once=True)
    assert not [call for call in model.calls if call["model"] == "openai/zm-test-judge"]
    assert run_row(db_url, owner, run["run_id"])["status"] == "aborted_budget"


def set_own_key(monkeypatch, db_url: str, email: str) -> None:
    monkeypatch.setenv("ZM_DB_URL", db_url)
    monkeypatch.setenv("ZM_KEY_ENCRYPTION_KEY", PASSPHRASE)
    monkeypatch.setattr("sys.stdin", io.StringIO("sk-own-key\n"))
    assert main(["set-key", "--user", email, "--provider", "openai"]) == 0


def test_own_key_calls_count_against_the_owners_month_only(db_url, worker_url, llm_mode, owners, caps, monkeypatch):
    dana = owners.create(KNOWLEDGE[:3])  # pays with her own key
    erin = owners.create(KNOWLEDGE[3:6])  # on the deployment's key
    set_own_key(monkeypatch, db_url, owners.email(dana))
    model = ScriptedModel(answer)
    for owner in (dana, erin):
        pool_ready(db_url, worker_url, owner, model)

    # A run cap of zero is the deployment's: it stops erin's run before any call, never dana's.
    caps(max_run_cost_usd=Decimal("0"))
    dana_run, erin_run = benchmark(db_url, dana), benchmark(db_url, erin)
    worker(worker_url, model).run(once=True)
    assert run_row(db_url, erin, erin_run["run_id"])["status"] == "aborted_budget"
    assert run_row(db_url, erin, erin_run["run_id"])["judged_count"] == 0
    done = run_row(db_url, dana, dana_run["run_id"])
    assert done["status"] == "complete" and done["own_key_calls"] == 3
    assert [c["api_key"] for c in model.calls if c["model"] == PRICED_JUDGE] == ["sk-own-key"] * 3

    # Her own-key calls do count against her month: a monthly cap just above what she spent stops her.
    [spent] = fetch(
        db_url,
        "select sum(cost_usd) as usd, bool_and(byok) as byok from public.usage_events "
        "where owner_id = %s and cost_usd is not null",
        (dana,),
    )
    assert spent["byok"] and spent["usd"] > 0
    caps(max_run_cost_usd=None, max_owner_cost_usd_per_month=spent["usd"] + Decimal("0.001"))
    again = benchmark(db_url, dana)
    before = judge_calls(model)
    worker(worker_url, model).run(once=True)
    assert judge_calls(model) == before, "no call: her month is spent"
    assert run_row(db_url, dana, again["run_id"])["status"] == "aborted_budget"


def spend(db_url: str, owner: uuid.UUID, usd: str, when: str) -> None:
    """A deployment-key judgment of `usd` dollars in the owner's ledger, at `when` (SQL)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "insert into public.usage_events (owner_id, purpose, model, cost_usd, created_at)"
            f" values (%s, 'judgment', %s, %s, {when})",
            (owner, PRICED_JUDGE, Decimal(usd)),
        )


LAST_MONTH = "date_trunc('month', now(), 'UTC') - interval '1 second'"


def test_the_monthly_cap_counts_this_months_spending_only(db_url, worker_url, llm_mode, owners, caps):
    fay = owners.create(KNOWLEDGE[:3])
    model = ScriptedModel(answer)
    pool_ready(db_url, worker_url, fay, model)
    # Last month she spent five dollars, a second before this month began; the cap is one dollar a month.
    spend(db_url, fay, "5", LAST_MONTH)
    caps(max_run_cost_usd=None, max_owner_cost_usd_per_month=Decimal("1"))
    [refusal] = fetch(db_url, "select roi.budget_refusal(%s, null, 0.01, false) as refusal", (fay,))
    assert refusal["refusal"] is None, f"last month's spending refused a call this month: {refusal}"
    run = benchmark(db_url, fay)
    worker(worker_url, model).run(once=True)
    row = run_row(db_url, fay, run["run_id"])
    assert (row["status"], row["judged_count"]) == ("complete", 3), f"last month's spending stopped the run: {row}"

    # The same five dollars spent this month do stop her next run before any call.
    spend(db_url, fay, "5", "now()")
    again = benchmark(db_url, fay)
    before = judge_calls(model)
    worker(worker_url, model).run(once=True)
    assert judge_calls(model) == before, "no call: this month's spending is past the cap"
    assert run_row(db_url, fay, again["run_id"])["status"] == "aborted_budget"


@pytest.mark.parametrize(
    "flag, value",
    [("--max-run-cost-usd", "-0.01"), ("--max-owner-cost-usd-per-month", "ten"), ("--max-run-cost-usd", "nan")],
)
def test_a_cap_that_is_not_a_sum_of_dollars_is_refused(db_url, caps, monkeypatch, capsys, flag, value):
    monkeypatch.setenv("ZM_DB_URL", db_url)
    with pytest.raises(SystemExit) as exit_:
        main(["configure", flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} takes US dollars (0 or more) or none, not {value!r}" in err
    assert "Traceback" not in err
    [row] = fetch(db_url, "select max_run_cost_usd, max_owner_cost_usd_per_month from roi.settings")
    assert row == {"max_run_cost_usd": None, "max_owner_cost_usd_per_month": None}


def test_caps_are_set_shown_and_cleared_and_the_database_refuses_a_negative_one(db_url, caps, monkeypatch, capsys):
    monkeypatch.setenv("ZM_DB_URL", db_url)
    assert main(["configure", "--max-run-cost-usd", "0.05", "--max-owner-cost-usd-per-month", "$2"]) == 0
    out = capsys.readouterr().out
    assert "max run cost: $0.05" in out and "max owner cost per month: $2" in out
    assert main(["configure", "--max-run-cost-usd", "none"]) == 0
    out = capsys.readouterr().out
    assert "max run cost: none" in out and "max owner cost per month: $2" in out
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("update roi.settings set max_owner_cost_usd_per_month = -1")


def test_a_question_the_owners_monthly_cap_refuses_waits_without_spending_an_attempt(
    db_url, worker_url, llm_mode, owners, caps
):
    owner = owners.create(KNOWLEDGE[:2])
    caps(max_owner_cost_usd_per_month=Decimal("0"))
    assert benchmark(db_url, owner)["status"] == "generating"
    model = ScriptedModel(answer)
    worker(worker_url, model).run(once=True)
    assert model.calls == [], "no question written: the owner's month allows nothing"
    waiting = fetch(
        db_url,
        "select attempts, lease_until, run_after > now() + interval '50 minutes' as later, last_error "
        "from roi.work where owner_id = %s and kind = 'write_question'",
        (owner,),
    )
    assert len(waiting) == 2
    for row in waiting:
        assert row["attempts"] == 0 and row["lease_until"] is None and row["later"]
        assert "monthly spending cap of $0" in row["last_error"]
    assert fetch(db_url, "select state from roi.probes where owner_id = %s", (owner,)) == [{"state": "pending"}] * 2


def test_a_run_the_cap_stopped_rotates_no_probe_out(db_url, worker_url, llm_mode, owners, caps):
    owner = owners.create(KNOWLEDGE[:4])
    caps(pool_target=2, rotation_per_run=1)  # two never-probed memories wait to rotate in
    model = ScriptedModel(answer)
    pool_ready(db_url, worker_url, owner, model)
    caps(max_run_cost_usd=Decimal("0"))
    run = benchmark(db_url, owner)
    worker(worker_url, model).run(once=True)
    assert run_row(db_url, owner, run["run_id"])["status"] == "aborted_budget"
    benchmark(db_url, owner)  # the next call rotates after closed runs
    rotated = fetch(
        db_url, "select count(*) as n from roi.probes where owner_id = %s and retired_reason = 'rotated'", (owner,)
    )
    assert rotated == [{"n": 0}], "no probe retired and no fresh question to pay for"
