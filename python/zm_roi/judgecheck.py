"""`zm-roi judge-check`: is a model fit to judge? The project's own judge prompt (prompts/judge.j2) is
put to the model on a calibration set shipped with the package (data/judge_calibration.jsonl: cases
written by hand from public engineering knowledge, each with gold labels decided case by case; sources
in data/judge_calibration.SOURCES.md), and its verdicts are compared with the gold labels.

Per label it reports accuracy and Cohen's kappa (agreement corrected for chance, which a lenient judge
cannot inflate by saying "true" to everything), each with a Wilson 95% interval, and the false-positive
rate on the two decoy kinds of the LoCoMo judge audit (surfaced sets that are vague but on topic, and
specific but wrong). Replies fail closed as in the worker: a reply that does not parse is retried, and a
case whose every attempt fails is skipped and counted, never guessed.

Every call is metered as a usage event with purpose `judge_check`, on the deployment's key, attributed
to the operator: the auth user ZM_OPERATOR_EMAIL (operator@zm-roi.invalid unless set; created on first
use), with one fresh run id per check, so a check's calls add up and stay out of every owner's runs.
"""

from __future__ import annotations

import json
import math
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from zm_roi import llm, prompts
from zm_roi.queries import query
from zm_roi.worker import RETRYABLE, describe

CALIBRATION = Path(__file__).parent / "data" / "judge_calibration.jsonl"
PURPOSE = "judge_check"
# Attempts per case: a reply that does not parse is asked again, as the worker's queue would.
ATTEMPTS = 3
DECOYS = {"vague": "vague but on topic", "wrong": "specific but wrong"}
LABELS = ("with_memory", "without_memory")
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Case:
    """One calibration case: what the judge sees, and the gold labels."""

    id: str
    decoy: str | None
    kind: str
    question: str
    title: str
    body: str
    surfaced: list[dict]
    with_memory: bool
    without_memory: bool

    def prompt(self) -> str:
        return prompts.judge_prompt(self.question, self.kind, self.title, self.body, self.surfaced)


def load_cases(path: Path = CALIBRATION) -> list[Case]:
    """The calibration set, surfaced results ranked in their listed order."""
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        surfaced = [{"rank": rank, **hit} for rank, hit in enumerate(raw["surfaced"], start=1)]
        cases.append(
            Case(
                id=raw["id"],
                decoy=raw["decoy"],
                kind=raw["kind"],
                question=raw["question"],
                title=raw["memory"]["title"],
                body=raw["memory"]["body"],
                surfaced=surfaced,
                with_memory=raw["with_memory"],
                without_memory=raw["without_memory"],
            )
        )
    return cases


@dataclass
class Judged:
    """A case's outcome: the verdict (None when every attempt failed) and every call it took."""

    case: Case
    verdict: prompts.Judgment | None
    replies: list[llm.Reply] = field(default_factory=list)
    last_failure: str | None = None


def wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval of k successes in n trials (well-behaved at 0 and n, unlike k/n ± …)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def label_figures(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Accuracy and Cohen's kappa of (gold, judged) pairs. Kappa's interval maps the Wilson interval of
    the observed agreement through kappa = (po - pe) / (1 - pe), holding the chance agreement pe fixed:
    an approximation, stated as such in docs/reading-a-run.md. Kappa is None when pe = 1 (one class only)."""
    n = len(pairs)
    agreed = sum(gold == judged for gold, judged in pairs)
    low, high = wilson(agreed, n)
    figures: dict[str, Any] = {
        "n": n,
        "agreed": agreed,
        "accuracy": _r(agreed / n) if n else None,
        "accuracy_low": _r(low),
        "accuracy_high": _r(high),
        "kappa": None,
        "kappa_low": None,
        "kappa_high": None,
    }
    if n == 0:
        return figures
    gold_yes = sum(gold for gold, _ in pairs) / n
    judged_yes = sum(judged for _, judged in pairs) / n
    pe = gold_yes * judged_yes + (1 - gold_yes) * (1 - judged_yes)
    if pe < 1:
        po = agreed / n
        figures.update(
            kappa=_r((po - pe) / (1 - pe)), kappa_low=_r((low - pe) / (1 - pe)), kappa_high=_r((high - pe) / (1 - pe))
        )
    return figures


def _r(value: float) -> float:
    return round(value, 4)


def judge_case(complete: llm.Complete, model: str, case: Case, timeout: float) -> Judged:
    """Up to ATTEMPTS calls for one case; a provider error or an unparseable reply is retried."""
    judged = Judged(case, None)
    for _ in range(ATTEMPTS):
        try:
            reply = llm.call(complete, model=model, prompt=case.prompt(), temperature=0, api_key=None, timeout=timeout)
        except RETRYABLE as exc:
            judged.last_failure = describe(exc)
            continue
        judged.replies.append(reply)
        try:
            judged.verdict = prompts.parse_judgment(reply.text)
            return judged
        except prompts.OutputError as exc:
            judged.last_failure = describe(exc)
    return judged


def summarise(model: str, results: list[Judged]) -> dict[str, Any]:
    """The report: per label accuracy and kappa, decoy false-positive rates, calls and their cost."""
    done = [r for r in results if r.verdict is not None]
    report: dict[str, Any] = {
        "model": model,
        "judge_fingerprint": prompts.fingerprint(model, "judge.j2"),
        "cases": len(results),
        "judged": len(done),
        "skipped": len(results) - len(done),
        "skipped_cases": sorted(r.case.id for r in results if r.verdict is None),
    }
    for label in LABELS:
        report[label] = label_figures([(getattr(r.case, label), getattr(r.verdict, label)) for r in done])
    decoys = {}
    for decoy, description in DECOYS.items():
        mine = [r for r in done if r.case.decoy == decoy]
        passed = sum(r.verdict.with_memory for r in mine)
        low, high = wilson(passed, len(mine))
        decoys[decoy] = {
            "description": description,
            "n": len(mine),
            "false_positives": passed,
            "rate": _r(passed / len(mine)) if mine else None,
            "rate_low": _r(low),
            "rate_high": _r(high),
        }
    report["decoys"] = decoys
    replies = [reply for r in results for reply in r.replies]
    costs = [reply.cost_usd for reply in replies]
    report.update(
        calls=len(replies),
        input_tokens=sum(reply.input_tokens for reply in replies),
        output_tokens=sum(reply.output_tokens for reply in replies),
        cost_usd=None if not replies or None in costs else round(sum(costs), 6),
    )
    return report


def run_check(
    db_url: str,
    model: str,
    operator_email: str,
    *,
    complete: llm.Complete | None = None,
    timeout: float = 90.0,
    concurrency: int = 8,
    cases: list[Case] | None = None,
) -> dict[str, Any]:
    """Judge every case (`concurrency` calls in flight) and meter each call as it comes back."""
    complete = complete or llm.litellm.completion
    cases = load_cases() if cases is None else cases
    check_id = uuid.uuid4()
    results = []
    with psycopg.connect(db_url, autocommit=True) as conn:
        operator = conn.execute(query("ensure_user"), {"email": operator_email}).fetchone()[0]
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(judge_case, complete, model, case, timeout) for case in cases]
            for future in as_completed(futures):
                judged = future.result()
                with conn.transaction():
                    for reply in judged.replies:
                        conn.execute(
                            query("record_usage"),
                            {
                                "owner_id": operator,
                                "purpose": PURPOSE,
                                "model": model,
                                "run_id": check_id,
                                "probe_id": None,
                                "input_tokens": reply.input_tokens,
                                "output_tokens": reply.output_tokens,
                                "byok": False,
                                "cost_usd": reply.cost_usd,
                            },
                        )
                results.append(judged)
    results.sort(key=lambda r: r.case.id)
    report = summarise(model, results)
    report.update(operator=operator_email, check_id=str(check_id))
    return report


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _kappa(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def format_report(report: dict[str, Any]) -> str:
    """The report as a few lines for a terminal."""
    cost = "" if report["cost_usd"] is None else f", ${report['cost_usd']:.4f}"
    lines = [
        f"judge-check: {report['model']} on {report['cases']} calibration cases ({report['judge_fingerprint']})",
        f"  {report['judged']} judged, {report['skipped']} skipped (no reply parsed in {ATTEMPTS} attempts)"
        + (f": {', '.join(report['skipped_cases'])}" if report["skipped_cases"] else ""),
    ]
    for label in LABELS:
        f = report[label]
        lines.append(
            f"  {label + ':':<16}accuracy {_pct(f['accuracy'])} (95% CI {_pct(f['accuracy_low'])}–"
            f"{_pct(f['accuracy_high'])}), kappa {_kappa(f['kappa'])} "
            f"(95% CI {_kappa(f['kappa_low'])}–{_kappa(f['kappa_high'])}), {f['agreed']} of {f['n']} agree"
        )
    for decoy in report["decoys"].values():
        lines.append(
            f"  decoys {decoy['description']}: judged answered {decoy['false_positives']} of {decoy['n']} "
            f"({_pct(decoy['rate'])}, 95% CI {_pct(decoy['rate_low'])}–{_pct(decoy['rate_high'])})"
        )
    lines.append(
        f"  {report['calls']} calls, {report['input_tokens']:,} + {report['output_tokens']:,} tokens{cost}, "
        f"metered to {report['operator']} (purpose {PURPOSE}, run {report['check_id']})"
    )
    return "\n".join(lines)
