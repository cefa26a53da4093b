"""`zm-roi judge-check`: the judge prompt against the shipped calibration set. A scripted perfect judge
scores kappa 1.0; one that always says true scores what the set's labels give by hand; every call is
metered to the operator; a reply that never parses skips its case instead of being guessed."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from tests.support import remove_users
from tests.worker_support import JUDGE_MODEL, fetch
from zm_roi import cli, judgecheck, llm
from zm_roi.judgecheck import CALIBRATION, load_cases

CASES = load_cases()
GOLD = {case.prompt(): case for case in CASES}
REAL_COMPLETION = llm.litellm.completion


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


def test_the_calibration_set_is_big_enough_labelled_case_by_case_and_sourced():
    raw = [json.loads(line) for line in CALIBRATION.read_text().splitlines()]
    assert len(raw) >= 60
    assert len({c["id"] for c in raw}) == len(raw) == len(GOLD), "ids and prompts are unique"
    assert sum(c["decoy"] == "vague" for c in raw) >= 10 and sum(c["decoy"] == "wrong" for c in raw) >= 10
    assert all(not c["with_memory"] for c in raw if c["decoy"]), "a decoy never answers the question"
    assert sum(c["without_memory"] for c in raw) >= 10, "general-knowledge questions are in the set"
    assert all(c["with_memory_reason"].strip() and c["without_memory_reason"].strip() for c in raw)
    sources = (CALIBRATION.parent / "judge_calibration.SOURCES.md").read_text()
    cited = set(re.findall(r"\b[abvwg]\d\d\b", sources))
    assert cited == {c["id"] for c in raw}, "every case is cited under its source"
    assert all(f"| {c['source']} |" in sources for c in raw), "every case's source is described"


def test_a_perfect_judge_scores_kappa_one_and_every_call_is_metered_to_the_operator(db_url, operator):
    judge = Judge(lambda case, _: verdict(case.with_memory, case.without_memory))
    report = judgecheck.run_check(db_url, JUDGE_MODEL, operator, complete=judge, concurrency=4)
    for label in ("with_memory", "without_memory"):
        assert report[label]["accuracy"] == 1.0 and report[label]["kappa"] == 1.0, label
        assert report[label]["n"] == len(CASES)
    assert report["decoys"]["vague"]["false_positives"] == report["decoys"]["wrong"]["false_positives"] == 0
    assert (report["judged"], report["skipped"], report["calls"]) == (len(CASES), 0, len(CASES))
    assert report["judge_fingerprint"].startswith(f"{JUDGE_MODEL}#judge.j2@")
    events = usage(db_url, operator)
    assert len(events) == len(CASES), "one usage event per call"
    assert {(e["purpose"], e["model"], str(e["run_id"]), e["probe_id"], e["byok"]) for e in events} == {
        ("judge_check", JUDGE_MODEL, report["check_id"], None, False)
    }
    assert all(e["input_tokens"] > 0 for e in events)


def test_an_always_true_judge_scores_what_the_labels_give_by_hand(db_url, operator):
    # By hand from the set's labels (62 cases; with_memory true in 25, without_memory true in 12; 12
    # decoys of each kind, all with_memory false). A judge that always says true agrees where gold is true:
    #   with_memory accuracy = 25/62 = 0.4032; without_memory accuracy = 12/62 = 0.1935.
    #   Cohen's kappa: po = 25/62, pe = P(judge true)·P(gold true) + P(judge false)·P(gold false)
    #   = 1·25/62 + 0·37/62 = 25/62, so kappa = (po − pe)/(1 − pe) = 0 (likewise 0 for without_memory).
    #   Wilson 95% for 25/62 (z = 1.96, z² = 3.8415, 1 + z²/n = 1.06196):
    #   centre = (0.40323 + 3.8415/124)/1.06196 = 0.40888; half = 1.96·√(0.40323·0.59677/62
    #   + 3.8415/15376)/1.06196 = 1.96·√0.0041310/1.06196 = 0.11862 → [0.2902, 0.5275];
    #   kappa's interval maps those through (b − pe)/(1 − pe): (0.2902 − 0.4032)/0.5968 = −0.1893,
    #   (0.5275 − 0.4032)/0.5968 = 0.2082.
    #   Every decoy is judged answered: false-positive rate 12/12 = 1.0 for each kind; Wilson for 12/12:
    #   centre = (1 + 3.8415/24)/(1 + 3.8415/12) = 1.16006/1.32013 = 0.87875, half = 1.96·√(3.8415/576)
    #   /1.32013 = 0.12125 → [0.7575, 1.0].
    report = judgecheck.run_check(db_url, JUDGE_MODEL, operator, complete=Judge(lambda *_: verdict(True, True)))
    wm, wom = report["with_memory"], report["without_memory"]
    assert (wm["agreed"], wm["n"], wm["accuracy"], wm["kappa"]) == (25, 62, 0.4032, 0.0)
    assert (wm["accuracy_low"], wm["accuracy_high"], wm["kappa_low"], wm["kappa_high"]) == (
        0.2902,
        0.5275,
        -0.1893,
        0.2082,
    )
    assert (wom["agreed"], wom["accuracy"], wom["kappa"]) == (12, 0.1935, 0.0)
    for decoy in ("vague", "wrong"):
        figures = report["decoys"][decoy]
        assert (figures["n"], figures["false_positives"], figures["rate"]) == (12, 12, 1.0), decoy
        assert (figures["rate_low"], figures["rate_high"]) == (0.7575, 1.0), decoy


def test_a_reply_that_never_parses_skips_its_case_and_every_attempt_is_metered(db_url, operator):
    broken, flaky = CASES[0], CASES[1]

    def reply(case, attempt):
        if case is broken:
            return f"{verdict(True, False)} Actually: {verdict(False, False)}"  # two answers: refused
        if case is flaky and attempt == 1:
            return '{"with_memory": "yes", "without_memory": false, "confidence": 1, "reason": "r"}'
        return verdict(case.with_memory, case.without_memory)

    report = judgecheck.run_check(db_url, JUDGE_MODEL, operator, complete=Judge(reply))
    assert report["skipped_cases"] == [broken.id] and report["judged"] == len(CASES) - 1
    assert report["with_memory"]["n"] == len(CASES) - 1 and report["with_memory"]["kappa"] == 1.0
    calls = len(CASES) + (judgecheck.ATTEMPTS - 1) + 1  # the broken case's extra attempts, the flaky one's
    assert report["calls"] == calls and len(usage(db_url, operator)) == calls


def test_the_command_prints_one_json_object(db_url, operator, monkeypatch, capsys):
    monkeypatch.setenv("ZM_DB_URL", db_url)
    monkeypatch.setenv("ZM_OPERATOR_EMAIL", operator)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(llm.litellm, "completion", Judge(lambda case, _: verdict(case.with_memory, False)))
    assert cli.main(["judge-check", "--model", JUDGE_MODEL, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == JUDGE_MODEL and report["operator"] == operator
    assert report["with_memory"]["kappa"] == 1.0
    assert report["without_memory"]["accuracy"] == 0.8065, "50 of 62 have without_memory false"
    assert cli.main(["judge-check", "--model", JUDGE_MODEL]) == 0
    text = capsys.readouterr().out
    assert "with_memory:" in text and "kappa 1.00" in text and "specific but wrong: judged answered 0 of 12" in text
