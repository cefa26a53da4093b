"""End to end, the judge's measured error taken out of a run's exclusive rate: a run judged through the
fake OpenAI-compatible endpoint, then `judge-check --record` of that same judge against the same
endpoint, and the runs view and the tile read as the owner. Uncalibrated, the run says so; a lenient
judge's calibration (always "memory answers it") is refused, never a confident number; an imperfect
judge's gives the formula on the recorded counts; a perfect judge's gives back the raw rate. Each newer
calibration supersedes the one before."""

from __future__ import annotations

import json
import re
import uuid
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from tests.judge_correction import corrected_rate
from tests.support import GENERATION_MODEL, KNOWLEDGE, as_user, benchmark, fetch, forget_calibrations
from tests.worker.test_judge_check import CASES, GOLD
from zm_roi import cli, judgecheck, llm, mcp_server, prompts, tokens
from zm_roi.queries import query
from zm_roi.transport import LocalTransport
from zm_roi.worker import Worker, WorkerConfig

# The run's six questions ask about "topic number N" (tests.support.question_for): the judge says
# memory answers 0–3, a bare agent 3 too, so 3 of 6 are exclusive: raw rate 0.5.
RUN_VERDICTS = {0: (True, False), 1: (True, False), 2: (True, False), 3: (True, True), 4: (False, False)}


def reply(with_memory: bool, without_memory: bool) -> str:
    return json.dumps(
        {"with_memory": with_memory, "without_memory": without_memory, "confidence": 0.9, "reason": "Scripted."}
    )


def scripted(calibration_judge):
    """The fake endpoint's judge: the run's verdicts by topic; a calibration case by its gold labels."""

    def answer(prompt: str) -> str:
        if prompt in GOLD:
            return reply(*calibration_judge(GOLD[prompt]))
        topic = int(re.search(r"topic number (\d+)", prompt).group(1))
        return reply(*RUN_VERDICTS.get(topic, (False, False)))

    return answer


PERFECT = scripted(lambda case: (case.with_memory, case.without_memory))
LENIENT = scripted(lambda case: (True, False))
# Misses t03 and answers the vague decoy t07: exclusive sensitivity 2/3, specificity 6/7 (J 0.52).
IMPERFECT = scripted(lambda case: ((case.with_memory and case.id != "t03") or case.id == "t07", case.without_memory))


@pytest.fixture
def judge_model():
    """A judge of its own ("judge" in the name routes it to the fake's judge), so no other test's
    calibration applies to it."""
    return f"openai/zm-judge-{uuid.uuid4().hex[:10]}"


def runs_row(db_url, owner) -> dict:
    [row] = as_user(db_url, owner, "select * from public.roi_benchmark_runs")
    return row


def judge_note(db_url, owner) -> str:
    return as_user(db_url, owner, "select judge_note from public.roi_benchmark_tile")[0]["judge_note"]


def judged_run(db_url, worker_url, owners, fake_openai, judge_model, monkeypatch):
    """An owner whose run the fake endpoint's judge judged (PERFECT's verdicts: 3 of 6 exclusive), and the
    completion that reaches that endpoint."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-deployment")
    real = llm.litellm.completion
    through = lambda **kwargs: real(**kwargs, api_base=fake_openai.url)  # noqa: E731
    fake_openai.judge_reply = PERFECT
    config = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=judge_model, key_encryption_key="k")
    owner = owners.create(KNOWLEDGE)
    assert benchmark(db_url, owner)["status"] == "generating"
    Worker(worker_url, config, through).run(once=True)
    assert benchmark(db_url, owner)["status"] == "started"
    Worker(worker_url, config, through).run(once=True)
    return owner, through


def test_a_runs_corrected_rate_follows_the_newest_calibration_of_its_judge(
    cluster, db_url, worker_url, llm_mode, owners, fake_openai, judge_model, monkeypatch
):
    owner, through = judged_run(db_url, worker_url, owners, fake_openai, judge_model, monkeypatch)
    fingerprint = prompts.fingerprint(judge_model, "judge.j2")
    recorded: list[str] = []
    try:
        run = runs_row(db_url, owner)
        assert (run["status"], run["judged_count"], run["exclusive_count"]) == ("complete", 6, 3)
        assert run["judge_fingerprint"] == fingerprint
        assert run["judge_calibrated"] is False and run["exclusive_rate_corrected"] is None
        assert run["correction_note"] == "judge not calibrated: an operator runs zm-roi judge-check --record"
        assert judge_note(db_url, owner) == "judge not calibrated: an operator runs zm-roi judge-check --record"

        # A lenient judge: every calibration case "answered by memory, not by a bare agent", so the
        # exclusive label is always true: sensitivity 1, specificity 0. Refused, said plainly.
        fake_openai.judge_reply = LENIENT
        lenient = judgecheck.run_check(
            db_url, judge_model, f"op-{uuid.uuid4().hex[:8]}@o.test", complete=through, cases=CASES, record=True
        )
        recorded.append(lenient["check_id"])
        assert not lenient["verdict"]["passed"]
        run = runs_row(db_url, owner)
        assert run["judge_calibrated"] is True
        assert (run["judge_sensitivity"], run["judge_specificity"]) == (Decimal("1.0000"), Decimal("0.0000"))
        assert (run["exclusive_rate_corrected"], run["exclusive_rate_corrected_low"]) == (None, None)
        assert run["correction_note"].startswith("no corrected rate: the judge is too close to chance")
        assert judge_note(db_url, owner) == (
            "judge calibrated on 10 cases (sensitivity 100%, specificity 0%): too close to chance to correct, "
            "so the rate above is only what the judge said"
        )

        # An imperfect judge, recorded through the command: the view's figures are the formula on the
        # counts the row holds.
        fake_openai.judge_reply = IMPERFECT
        monkeypatch.setenv("ZM_DB_URL", db_url)
        monkeypatch.setenv("ZM_OPERATOR_EMAIL", f"op-{uuid.uuid4().hex[:8]}@o.test")
        monkeypatch.setattr(judgecheck, "load_cases", lambda: CASES)
        monkeypatch.setattr(llm.litellm, "completion", through)
        assert cli.main(["judge-check", "--model", judge_model, "--record"]) == 1, "J 0.52: below the threshold"
        [row] = fetch(
            db_url,
            "select * from roi.judge_calibrations where judge_fingerprint = %s order by id desc limit 1",
            (fingerprint,),
        )
        recorded.append(row["check_id"])
        assert (row["exclusive_tp"], row["exclusive_fn"], row["exclusive_tn"], row["exclusive_fp"]) == (2, 1, 6, 1)
        expected = corrected_rate(3, 6, 2, 1, 6, 1)
        run = runs_row(db_url, owner)
        assert (run["judge_sensitivity"], run["judge_specificity"]) == (Decimal("0.6667"), Decimal("0.8571"))
        figures = (
            run["exclusive_rate_corrected"],
            run["exclusive_rate_corrected_low"],
            run["exclusive_rate_corrected_high"],
        )
        assert [float(f) for f in figures] == pytest.approx(expected[:3], abs=1.5e-4)
        assert run["correction_note"] == "corrected for the judge's measured error on its newest calibration (10 cases)"
        rate, low, high = (round(100 * f) for f in figures)
        assert judge_note(db_url, owner) == (
            f"judge calibrated on 10 cases (sensitivity 67%, specificity 86%): corrected rate {rate}% "
            f"(95% {low}–{high}%)"
        )

        # The MCP tool's structured output carries the same figures and the tile's note.
        transport = LocalTransport(cluster.url(), cluster.jwt_secret(), tokens.mint(cluster.jwt_secret(), owner))
        tile = transport.tile()
        structured = mcp_server.read_diagnostics(transport, tile)
        for key in ("judge_calibrated", "exclusive_rate_corrected", "exclusive_rate_corrected_low", "correction_note"):
            shown = structured[key]
            assert (float(shown) if isinstance(shown, float) else shown) == (
                float(run[key]) if isinstance(run[key], Decimal) else run[key]
            ), key
        assert mcp_server.tile_sentence(tile).endswith(tile["judge_note"])
        assert "judge_note" in mcp_server.TileResult.model_fields

        # A perfect judge: sensitivity and specificity 1, and the corrected rate is the raw one.
        fake_openai.judge_reply = PERFECT
        perfect = judgecheck.run_check(
            db_url, judge_model, f"op-{uuid.uuid4().hex[:8]}@o.test", complete=through, cases=CASES, record=True
        )
        recorded.append(perfect["check_id"])
        run = runs_row(db_url, owner)
        assert abs(run["exclusive_rate_corrected"] - run["exclusive_rate"]) <= Decimal("0.02")
        assert run["exclusive_rate_corrected_low"] <= run["exclusive_rate"] <= run["exclusive_rate_corrected_high"]
    finally:
        forget_calibrations(db_url, check_ids=recorded)


LOCAL_MODEL_REPORT = Path(__file__).resolve().parents[2] / "bench" / "results" / "2026-12-05-local-model.json"


def test_the_packaged_local_models_measured_calibration_gives_no_corrected_rate_and_says_why(
    db_url, worker_url, llm_mode, owners, fake_openai, judge_model, monkeypatch
):
    """The counts judge-check measured on SmolLM2-135M (bench/results), recorded for a run's judge: the run
    and the tile carry no corrected rate, and the tile says why."""
    measured = json.loads(LOCAL_MODEL_REPORT.read_text())["judge_check"]
    assert not measured["verdict"]["passed"], "the 135M model failed its judge-check"
    owner, _ = judged_run(db_url, worker_url, owners, fake_openai, judge_model, monkeypatch)
    check_id = uuid.uuid4()
    row = judgecheck.calibration_row(
        {**measured, "check_id": check_id, "judge_fingerprint": prompts.fingerprint(judge_model, "judge.j2")}
    )
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(query("record_judge_calibration"), row)
    try:
        run = runs_row(db_url, owner)
        assert run["judge_calibrated"] is True, "the measured calibration applies to the run's judge"
        assert run["exclusive_rate_corrected"] is None and run["exclusive_rate_corrected_low"] is None, (
            f"no corrected rate from a judge that failed its check: {run['exclusive_rate_corrected']}"
        )
        ex = measured["exclusive"]
        sensitivity, specificity = round(100 * ex["sensitivity"]), round(100 * ex["specificity"])
        assert judge_note(db_url, owner) == (
            f"judge calibrated on {measured['cases']} cases (sensitivity {sensitivity}%, specificity "
            f"{specificity}%): too close to chance to correct, so the rate above is only what the judge said"
        ), "the tile says why there is no corrected rate"
    finally:
        forget_calibrations(db_url, check_ids=[check_id])
