"""`zm-roi judge-check`: the judge prompt against a calibration set. The figures are checked by hand on a
small set written here (the shipped set grows; its own test checks its structure): a scripted perfect
judge passes with kappa 1.0; one that always says true, or always says exclusive, fails with a verdict
that says why and exits 1; every call is metered to the operator; a reply that never parses skips its
case instead of being guessed; `--record` stores the four counts per label and nothing else."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from tests.support import JUDGE_MODEL, fetch, forget_calibrations, remove_users
from zm_roi import cli, judgecheck, llm, localdb, prompts
from zm_roi.judgecheck import CALIBRATION, Case, load_cases

REAL_COMPLETION = llm.litellm.completion


def case(number: int, with_memory: bool, without_memory: bool, decoy: str | None = None) -> Case:
    return Case(
        id=f"t{number:02d}",
        decoy=decoy,
        kind="decision",
        question=f"What did the team decide about topic {number}?",
        title=f"Topic {number}",
        body=f"The team settled topic {number} in its own way.",
        surfaced=[{"rank": 1, "title": f"Topic {number}", "body": f"Topic {number} was settled."}],
        with_memory=with_memory,
        without_memory=without_memory,
    )


# Ten cases, labels chosen so every figure below can be worked by hand:
#   with_memory true in t01–t04 (4 of 10); without_memory true in t04 and t06 (2 of 10);
#   exclusive (with and not without) true in t01–t03 (3 of 10), false in 7;
#   decoys: t07, t08 vague but on topic, t09, t10 specific but wrong (never with_memory).
CASES = [
    case(1, True, False),
    case(2, True, False),
    case(3, True, False),
    case(4, True, True),
    case(5, False, False),
    case(6, False, True),
    case(7, False, False, "vague"),
    case(8, False, False, "vague"),
    case(9, False, False, "wrong"),
    case(10, False, False, "wrong"),
]
GOLD = {case.prompt(): case for case in CASES}


def verdict(with_memory: bool, without_memory: bool) -> str:
    return json.dumps(
        {"with_memory": with_memory, "without_memory": without_memory, "confidence": 0.9, "reason": "Scripted."}
    )


class Judge:
    """litellm.completion with a scripted reply per prompt (litellm's mock_response builds the response)."""

    def __init__(self, reply):
        self.reply = reply
        self.prompts: list[str] = []

    def __call__(self, **kwargs):
        prompt = kwargs["messages"][0]["content"]
        self.prompts.append(prompt)
        return REAL_COMPLETION(**kwargs, mock_response=self.reply(GOLD[prompt], self.prompts.count(prompt)))


PERFECT = Judge(lambda case, _: verdict(case.with_memory, case.without_memory))


@pytest.fixture
def operator(db_url):
    email = f"operator-{uuid.uuid4().hex[:10]}@zm-roi.invalid"
    yield email
    ids = [row["id"] for row in fetch(db_url, "select id from auth.users where email = %s", (email,))]
    remove_users(db_url, ids)


def usage(db_url: str, email: str) -> list[dict]:
    return fetch(
        db_url,
        "select e.purpose, e.model, e.run_id, e.probe_id, e.byok, e.input_tokens from public.usage_events e "
        "join auth.users u on u.id = e.owner_id where u.email = %s",
        (email,),
    )


def check(db_url: str, operator: str, judge: Judge, **options) -> dict:
    return judgecheck.run_check(db_url, JUDGE_MODEL, operator, complete=judge, cases=CASES, **options)


def test_the_shipped_calibration_set_is_labelled_case_by_case_and_sourced():
    # Its structure only: another test holds its counts, which grow.
    raw = [json.loads(line) for line in CALIBRATION.read_text().splitlines()]
    shipped = load_cases()
    assert len(raw) == len(shipped) > 0
    assert len({c["id"] for c in raw}) == len(raw) == len({c.prompt() for c in shipped}), "ids and prompts are unique"
    assert {c["decoy"] for c in raw} >= {None, "vague", "wrong"} and {c["decoy"] for c in raw} <= {
        None,
        "vague",
        "wrong",
    }, "both decoy kinds are in the set, and no other"
    assert all(not c["with_memory"] for c in raw if c["decoy"]), "a decoy never answers the question"
    assert any(c["without_memory"] for c in raw), "general-knowledge questions are in the set"
    assert {c.exclusive for c in shipped} == {True, False}, "the headline's label has both classes"
    assert all(isinstance(c["with_memory"], bool) and isinstance(c["without_memory"], bool) for c in raw)
    assert all(c["with_memory_reason"].strip() and c["without_memory_reason"].strip() for c in raw)
    sources = (CALIBRATION.parent / "judge_calibration.SOURCES.md").read_text()
    assert [c["id"] for c in raw if not re.search(rf"\b{re.escape(c['id'])}\b", sources)] == [], (
        "every case is cited under its source"
    )
    assert all(f"| {c['source']} |" in sources for c in raw), "every case's source is described"


def test_a_perfect_judge_passes_with_kappa_one_and_every_call_is_metered_to_the_operator(db_url, operator):
    report = check(db_url, operator, PERFECT, concurrency=4)
    for label in judgecheck.LABELS:
        figures = report[label]
        assert (figures["accuracy"], figures["kappa"], figures["n"]) == (1.0, 1.0, len(CASES)), label
        assert (figures["sensitivity"], figures["specificity"], figures["youden"]) == (1.0, 1.0, 1.0), label
    # Exclusive: tp 3, tn 7. Wilson for 3 of 3 and 7 of 7 (z² = 3.8415): low = 1/(1 + z²/n):
    #   1/(1 + 1.28049) = 0.4385; 1/(1 + 0.54878) = 0.6457.
    ex = report["exclusive"]
    assert (ex["tp"], ex["fp"], ex["tn"], ex["fn"]) == (3, 0, 7, 0)
    assert (ex["sensitivity_low"], ex["sensitivity_high"]) == (0.4385, 1.0)
    assert (ex["specificity_low"], ex["specificity_high"]) == (0.6457, 1.0)
    assert report["verdict"] == {"passed": True, "failures": [], "thresholds": judgecheck.THRESHOLDS}
    assert report["decoys"]["vague"]["false_positives"] == report["decoys"]["wrong"]["false_positives"] == 0
    assert (report["judged"], report["skipped"], report["calls"]) == (len(CASES), 0, len(CASES))
    assert report["judge_fingerprint"] == prompts.fingerprint(JUDGE_MODEL, "judge.j2")
    assert report["recorded"] is None, "recording is asked for, never the default"
    events = usage(db_url, operator)
    assert len(events) == len(CASES), "one usage event per call"
    assert {(e["purpose"], e["model"], str(e["run_id"]), e["probe_id"], e["byok"]) for e in events} == {
        ("judge_check", JUDGE_MODEL, report["check_id"], None, False)
    }
    assert all(e["input_tokens"] > 0 for e in events)


def test_an_always_true_judge_fails_with_the_figures_worked_by_hand(db_url, operator):
    # A judge that always says with_memory and without_memory true, on the ten cases above:
    #   with_memory: tp 4, fp 6, tn 0, fn 0. Sensitivity 4/4 = 1.0, Wilson low 1/(1 + z²/4) = 1/1.96037
    #   = 0.5101; specificity 0/6 = 0.0, Wilson high z²/(6 + z²) = 3.84146/9.84146 = 0.3903; J = 0.
    #   Accuracy 4/10: Wilson centre (0.4 + 0.19207)/1.38415 = 0.42775, half 1.95996·√(0.024 + 0.0096037)
    #   /1.38415 = 0.25957 → [0.1682, 0.6873]. Kappa: pe = 1·0.4 + 0·0.6 = 0.4 = po, so 0; its interval
    #   maps the accuracy's through (b − 0.4)/0.6 → [−0.3864, 0.4789].
    #   without_memory: tp 2, fp 8; accuracy 2/10 = 0.2, kappa 0.
    #   exclusive: the judge never says "with and not without", so tp 0, fn 3, tn 7, fp 0: sensitivity 0
    #   (Wilson high 3.84146/6.84146 = 0.5615), specificity 1.0, J = 0 < 0.6: not fit to judge.
    #   Decoys: 2 of 2 of each kind judged answered, 100% > 20%.
    report = check(db_url, operator, Judge(lambda *_: verdict(True, True)))
    wm, wom, ex = report["with_memory"], report["without_memory"], report["exclusive"]
    assert (wm["tp"], wm["fp"], wm["tn"], wm["fn"]) == (4, 6, 0, 0)
    assert (wm["sensitivity"], wm["sensitivity_low"], wm["specificity"], wm["specificity_high"]) == (
        1.0,
        0.5101,
        0.0,
        0.3903,
    )
    assert (wm["agreed"], wm["accuracy"], wm["kappa"], wm["youden"]) == (4, 0.4, 0.0, 0.0)
    assert (wm["accuracy_low"], wm["accuracy_high"], wm["kappa_low"], wm["kappa_high"]) == (
        0.1682,
        0.6873,
        -0.3864,
        0.4789,
    )
    assert (wom["tp"], wom["fp"], wom["accuracy"], wom["kappa"]) == (2, 8, 0.2, 0.0)
    assert (ex["tp"], ex["fp"], ex["tn"], ex["fn"]) == (0, 0, 7, 3)
    assert (ex["sensitivity"], ex["sensitivity_high"], ex["specificity"], ex["youden"]) == (0.0, 0.5615, 1.0, 0.0)
    for decoy in ("vague", "wrong"):
        figures = report["decoys"][decoy]
        assert (figures["n"], figures["false_positives"], figures["rate"]) == (2, 2, 1.0), decoy
    assert not report["verdict"]["passed"]
    assert report["verdict"]["failures"][0] == (
        "exclusive Youden's J 0.00 is below 0.60 (sensitivity 0.0%, specificity 100.0%)"
    )
    assert len(report["verdict"]["failures"]) == 3, "the exclusive label and both decoy kinds"


def test_the_verdict_falls_between_a_missed_case_and_an_answered_decoy(db_url, operator):
    # Misses t03 (says not answered): exclusive sensitivity 2/3, specificity 7/7, J = 0.667 ≥ 0.6: passes.
    missed = check(db_url, operator, Judge(lambda c, _: verdict(c.with_memory and c.id != "t03", c.without_memory)))
    assert (missed["exclusive"]["youden"], missed["verdict"]["passed"]) == (0.6667, True)
    # Also answers the vague decoy t07: specificity 6/7, J = 2/3 + 6/7 − 1 = 0.5238 < 0.6, and 1 of 2
    # vague decoys answered (50% > 20%): fails on both counts.
    lenient = check(
        db_url,
        operator,
        Judge(lambda c, _: verdict((c.with_memory and c.id != "t03") or c.id == "t07", c.without_memory)),
    )
    assert lenient["exclusive"]["youden"] == 0.5238
    assert lenient["verdict"]["failures"] == [
        "exclusive Youden's J 0.52 is below 0.60 (sensitivity 66.7%, specificity 85.7%)",
        "1 of 2 decoys vague but on topic judged answered (50.0%, above 20.0%)",
    ]


def test_a_reply_that_never_parses_skips_its_case_and_every_attempt_is_metered(db_url, operator):
    broken, flaky = CASES[0], CASES[1]

    def reply(case, attempt):
        if case is broken:
            return f"{verdict(True, False)} Actually: {verdict(False, False)}"  # two answers: refused
        if case is flaky and attempt == 1:
            return '{"with_memory": "yes", "without_memory": false, "confidence": 1, "reason": "r"}'
        return verdict(case.with_memory, case.without_memory)

    report = check(db_url, operator, Judge(reply))
    assert report["skipped_cases"] == [broken.id] and report["judged"] == len(CASES) - 1
    assert report["with_memory"]["n"] == len(CASES) - 1 and report["with_memory"]["kappa"] == 1.0
    calls = len(CASES) + (judgecheck.ATTEMPTS - 1) + 1  # the broken case's extra attempts, the flaky one's
    assert report["calls"] == calls and len(usage(db_url, operator)) == calls
    # One skipped of ten is 10%, not above the threshold; the judge passes.
    assert report["verdict"]["passed"]


def test_record_stores_the_four_counts_per_label_and_no_case_text(db_url, operator):
    report = check(db_url, operator, Judge(lambda *_: verdict(True, True)), record=True)
    try:
        assert report["recorded"] is not None
        [row] = fetch(db_url, "select * from roi.judge_calibrations where check_id = %s", (report["check_id"],))
        assert (row["judge_fingerprint"], row["model"], row["case_count"]) == (
            prompts.fingerprint(JUDGE_MODEL, "judge.j2"),
            JUDGE_MODEL,
            len(CASES),
        )
        for label in judgecheck.LABELS:
            assert [row[f"{label}_{c}"] for c in ("tp", "fp", "tn", "fn")] == [
                report[label][c] for c in ("tp", "fp", "tn", "fn")
            ], label
        text = json.dumps(row, default=str)
        assert not any(fragment in text for c in CASES for fragment in (c.question, c.title, c.body, c.id)), (
            "no case text reaches the database"
        )
    finally:
        forget_calibrations(db_url, check_ids=[report["check_id"]])


@pytest.fixture
def command(db_url, operator, monkeypatch):
    monkeypatch.setenv("ZM_DB_URL", db_url)
    monkeypatch.setenv("ZM_OPERATOR_EMAIL", operator)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(judgecheck, "load_cases", lambda: CASES)
    return lambda judge: monkeypatch.setattr(llm.litellm, "completion", judge)


def test_the_command_prints_one_json_object_with_a_key_per_label(command, operator, capsys):
    # Judged exclusive = with_memory (without_memory always false): t04 is judged exclusive though it is
    # not (exclusive fp 1): sensitivity 3/3, specificity 6/7, J = 0.8571: passes, exit 0.
    command(Judge(lambda case, _: verdict(case.with_memory, False)))
    assert cli.main(["judge-check", "--model", JUDGE_MODEL, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == JUDGE_MODEL and report["operator"] == operator
    for label in ("with_memory", "without_memory", "exclusive"):
        assert {"sensitivity", "sensitivity_low", "sensitivity_high", "specificity", "specificity_low"} <= set(
            report[label]
        ), label
    assert report["with_memory"]["kappa"] == 1.0
    assert report["without_memory"]["accuracy"] == 0.8, "8 of 10 have without_memory false"
    assert (report["exclusive"]["fp"], report["exclusive"]["youden"]) == (1, 0.8571)
    assert cli.main(["judge-check", "--model", JUDGE_MODEL]) == 0
    text = capsys.readouterr().out
    assert "with_memory:" in text and "kappa 1.00" in text and "specific but wrong: judged answered 0 of 2" in text
    assert "exclusive:      sensitivity 100.0%" in text
    assert text.splitlines()[-1].startswith("verdict: PASS, fit to judge (exclusive Youden's J 0.86 ≥ 0.60")


def test_the_command_fails_an_always_yes_judge_with_a_clear_verdict(command, capsys):
    command(Judge(lambda *_: verdict(True, True)))
    assert cli.main(["judge-check", "--model", JUDGE_MODEL]) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("verdict: FAIL, not fit to judge: exclusive Youden's J 0.00 is below 0.60"), last


def test_a_server_that_never_answers_is_could_not_measure_exit_2_not_a_verdict(db_url, operator, monkeypatch, capsys):
    closed = localdb.free_port()  # nobody listens there: every call is refused at once
    monkeypatch.setenv("ZM_DB_URL", db_url)
    monkeypatch.setenv("ZM_OPERATOR_EMAIL", operator)
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{closed}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setattr(judgecheck, "load_cases", lambda: CASES[:2])
    assert cli.main(["judge-check", "--model", JUDGE_MODEL]) == 2, "nothing measured: no verdict on the model"
    printed = capsys.readouterr()
    assert "judge-check could not measure openai/zm-test-judge: none of the 2 cases got a reply" in printed.err
    assert "check OPENAI_API_BASE" in printed.err and "Traceback" not in printed.err + printed.out
    assert "verdict:" not in printed.out, "no verdict printed"
