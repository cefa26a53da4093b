"""`zm-roi judge-check`: is a model fit to judge? The project's own judge prompt (prompts/judge.j2) is
put to the model on a calibration set shipped with the package (data/judge_calibration.jsonl: cases
written by hand from public engineering knowledge, each with gold labels decided case by case; sources
in data/judge_calibration.SOURCES.md), and its verdicts are compared with the gold labels.

Per label (with_memory, without_memory, and exclusive: with_memory and not without_memory, the headline's
own label) it reports sensitivity and specificity, each with a Wilson 95% interval (a yes-machine wins on
overall agreement, so the two are reported apart), beside accuracy and Cohen's kappa, and the
false-positive rate on the two decoy kinds of the LoCoMo judge audit (surfaced sets that are vague but on
topic, and specific but wrong). A verdict says whether the judge meets the thresholds of
docs/judge-calibration.md (THRESHOLDS); the command exits 1 when it does not. Replies fail closed as in
the worker: a reply that does not parse is retried, and a case whose every attempt fails is skipped and
counted, never guessed.

`--record` stores the four counts per label, the judge's fingerprint (as runs record it), the model and
the case count in roi.judge_calibrations, which the runs view reads to correct the exclusive rate of
every run that judge judged. No case text reaches the database.

Every call is metered as a usage event with purpose `judge_check`, on the deployment's key, attributed
to the operator: the auth user ZM_OPERATOR_EMAIL (operator@zm-roi.invalid unless set; created on first
use), with one fresh run id per check, so a check's calls add up and stay out of every owner's runs.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from zm_roi import llm, prompts
from zm_roi.errors import UserError
from zm_roi.progress import Progress
from zm_roi.queries import query
from zm_roi.worker import JUDGMENT_SCHEMA, RETRYABLE, describe

CALIBRATION = Path(__file__).parent / "data" / "judge_calibration.jsonl"
PURPOSE = "judge_check"
# Attempts per case: a reply that does not parse is asked again, as the worker's queue would.
ATTEMPTS = 3
DECOYS = {"vague": "vague but on topic", "wrong": "specific but wrong"}
LABELS = ("with_memory", "without_memory", "exclusive")
# What a judge must meet to be fit to judge (docs/judge-calibration.md says why each).
THRESHOLDS = {"exclusive_youden_min": 0.6, "decoy_rate_max": 0.2, "skipped_share_max": 0.1}
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

    @property
    def exclusive(self) -> bool:
        """The headline's label: memory answers it and a bare agent could not."""
        return self.with_memory and not self.without_memory

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
    # The prompt did not fit the model's context window: no call was made.
    too_long: bool = False


def wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval of k successes in n trials (well-behaved at 0 and n, unlike k/n ± …)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def judged_label(verdict: prompts.Judgment, label: str) -> bool:
    if label == "exclusive":
        return verdict.with_memory and not verdict.without_memory
    return getattr(verdict, label)


def label_figures(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Of (gold, judged) pairs: the four counts; sensitivity (judged true among gold true) and
    specificity (judged false among gold false), each with its Wilson 95% interval, and Youden's J =
    sensitivity + specificity - 1 (0 for a judge that says the same to everything); accuracy and
    Cohen's kappa. Kappa's interval maps the Wilson interval of the observed agreement through kappa =
    (po - pe) / (1 - pe), holding the chance agreement pe fixed: an approximation, stated as such in
    docs/reading-a-run.md. Kappa is None when pe = 1 (one class only); a rate is None when its class is empty."""
    n = len(pairs)
    agreed = sum(gold == judged for gold, judged in pairs)
    counts = {
        "tp": sum(gold and judged for gold, judged in pairs),
        "fp": sum(not gold and judged for gold, judged in pairs),
        "tn": sum(not gold and not judged for gold, judged in pairs),
        "fn": sum(gold and not judged for gold, judged in pairs),
    }
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
        **counts,
    }
    for name, hits, total in (
        ("sensitivity", counts["tp"], counts["tp"] + counts["fn"]),
        ("specificity", counts["tn"], counts["tn"] + counts["fp"]),
    ):
        rate_low, rate_high = wilson(hits, total)
        figures.update(
            {
                name: _r(hits / total) if total else None,
                f"{name}_low": _r(rate_low) if total else None,
                f"{name}_high": _r(rate_high) if total else None,
            }
        )
    both = figures["sensitivity"] is not None and figures["specificity"] is not None
    figures["youden"] = _r(figures["sensitivity"] + figures["specificity"] - 1) if both else None
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


def judge_case(
    complete: llm.Complete,
    model: str,
    case: Case,
    timeout: float,
    endpoint: llm.Endpoint = llm.Endpoint(),  # noqa: B008
) -> Judged:
    """Up to ATTEMPTS calls for one case; a provider error or an unparseable reply is retried. A prompt
    that does not fit the model's context window is refused before any call: skipped and counted."""
    judged = Judged(case, None)
    for _ in range(ATTEMPTS):
        try:
            reply = llm.call(
                complete,
                model=model,
                prompt=case.prompt(),
                temperature=0,
                api_key=None,
                timeout=timeout,
                schema=JUDGMENT_SCHEMA,
                endpoint=endpoint,
            )
        except llm.TooLong as exc:
            judged.last_failure = str(exc)
            judged.too_long = True
            return judged
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
        # Of the skipped: refused before any call, their prompt longer than the model's context window.
        "too_long_cases": sorted(r.case.id for r in results if r.too_long),
        # Why the last skipped case got no verdict (no case or reply text: a provider's or the parser's words).
        "last_failure": next((r.last_failure for r in results if r.verdict is None and r.last_failure), None),
    }
    for label in LABELS:
        report[label] = label_figures([(getattr(r.case, label), judged_label(r.verdict, label)) for r in done])
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
        # Replies that came back and did not parse (fail closed: retried, never a verdict).
        unparseable_replies=sum(len(r.replies) - (r.verdict is not None) for r in results),
        input_tokens=sum(reply.input_tokens for reply in replies),
        output_tokens=sum(reply.output_tokens for reply in replies),
        cost_usd=None if not replies or None in costs else round(sum(costs), 6),
    )
    report["verdict"] = verdict(report)
    return report


def verdict(report: dict[str, Any]) -> dict[str, Any]:
    """Whether the judge is fit to judge, against THRESHOLDS, and every reason it is not."""
    failures = []
    youden = report["exclusive"]["youden"]
    minimum = THRESHOLDS["exclusive_youden_min"]
    if youden is None:
        failures.append("the exclusive label cannot be measured: the judged cases hold only one of its classes")
    elif youden < minimum:
        ex = report["exclusive"]
        failures.append(
            f"exclusive Youden's J {youden:.2f} is below {minimum:.2f} (sensitivity {_pct(ex['sensitivity'])}, "
            f"specificity {_pct(ex['specificity'])})"
        )
    for decoy in report["decoys"].values():
        if decoy["rate"] is not None and decoy["rate"] > THRESHOLDS["decoy_rate_max"]:
            failures.append(
                f"{decoy['false_positives']} of {decoy['n']} decoys {decoy['description']} judged answered "
                f"({_pct(decoy['rate'])}, above {_pct(THRESHOLDS['decoy_rate_max'])})"
            )
    skipped_share = report["skipped"] / report["cases"] if report["cases"] else 1.0
    if skipped_share > THRESHOLDS["skipped_share_max"]:
        failures.append(
            f"{report['skipped']} of {report['cases']} cases got no parseable reply "
            f"({_pct(skipped_share)}, above {_pct(THRESHOLDS['skipped_share_max'])})"
        )
    return {"passed": not failures, "failures": failures, "thresholds": dict(THRESHOLDS)}


def calibration_row(report: dict[str, Any]) -> dict[str, Any]:
    """The parameters of queries.sql's record_judge_calibration: counts only, no case text."""
    row = {
        "check_id": report["check_id"],
        "judge_fingerprint": report["judge_fingerprint"],
        "model": report["model"],
        "case_count": report["cases"],
    }
    for label in LABELS:
        row.update({f"{label}_{count}": report[label][count] for count in ("tp", "fp", "tn", "fn")})
    return row


def run_check(
    db_url: str,
    model: str,
    operator_email: str,
    *,
    complete: llm.Complete | None = None,
    timeout: float = 90.0,
    concurrency: int = 8,
    cases: list[Case] | None = None,
    record: bool = False,
    endpoint: llm.Endpoint = llm.Endpoint(),  # noqa: B008 - frozen, never mutated
    progress: bool = False,
) -> dict[str, Any]:
    """Judge every case (`concurrency` calls in flight) and meter each call as it comes back; with
    `record`, store the counts as the judge's calibration (refused when no case was judged). With
    `progress`, cases done, rate and time left go to stderr (a slow local model takes minutes)."""
    complete = complete or llm.litellm.completion
    cases = load_cases() if cases is None else cases
    check_id = uuid.uuid4()
    results = []
    shown = Progress("judge-check", len(cases), quiet=not progress, unit="cases")
    began = time.monotonic()
    with psycopg.connect(db_url, autocommit=True) as conn:
        operator = conn.execute(query("ensure_user"), {"email": operator_email}).fetchone()[0]
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(judge_case, complete, model, case, timeout, endpoint) for case in cases]
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
                shown.advance(1)
    shown.close()
    results.sort(key=lambda r: r.case.id)
    report = summarise(model, results)
    report.update(
        operator=operator_email, check_id=str(check_id), recorded=None, seconds=round(time.monotonic() - began, 1)
    )
    if record:
        if not report["judged"]:
            raise UserError("judge-check --record: no case was judged, so there is no calibration to record")
        with psycopg.connect(db_url, autocommit=True) as conn:
            row_id, recorded_at = conn.execute(query("record_judge_calibration"), calibration_row(report)).fetchone()
        report["recorded"] = {"id": row_id, "recorded_at": recorded_at.isoformat()}
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
    if report["too_long_cases"]:
        lines.append(
            f"  {len(report['too_long_cases'])} of them refused before any call: the prompt does not fit the "
            "model's context window (ZM_MODEL_CONTEXT_TOKENS)"
        )
    for label in LABELS:
        f = report[label]
        lines.append(
            f"  {label + ':':<16}sensitivity {_pct(f['sensitivity'])} (95% CI {_pct(f['sensitivity_low'])}–"
            f"{_pct(f['sensitivity_high'])}), specificity {_pct(f['specificity'])} (95% CI "
            f"{_pct(f['specificity_low'])}–{_pct(f['specificity_high'])}), Youden's J {_kappa(f['youden'])}"
        )
        lines.append(
            f"  {'':<16}accuracy {_pct(f['accuracy'])} (95% CI {_pct(f['accuracy_low'])}–"
            f"{_pct(f['accuracy_high'])}), kappa {_kappa(f['kappa'])} "
            f"(95% CI {_kappa(f['kappa_low'])}–{_kappa(f['kappa_high'])}), {f['agreed']} of {f['n']} agree"
        )
    for decoy in report["decoys"].values():
        lines.append(
            f"  decoys {decoy['description']}: judged answered {decoy['false_positives']} of {decoy['n']} "
            f"({_pct(decoy['rate'])}, 95% CI {_pct(decoy['rate_low'])}–{_pct(decoy['rate_high'])})"
        )
    lines.append(
        f"  {report['calls']} calls ({report['unparseable_replies']} replies did not parse), "
        f"{report['input_tokens']:,} + {report['output_tokens']:,} tokens{cost}, "
        + (f"{report['seconds']:g} s, " if "seconds" in report else "")
        + f"metered to {report['operator']} (purpose {PURPOSE}, run {report['check_id']})"
    )
    if report["recorded"]:
        lines.append(
            f"  recorded as the calibration of {report['judge_fingerprint']}: the runs it judged carry its "
            "measured error (a corrected exclusive rate where the judge is far enough from chance; else why not)"
        )
    else:
        lines.append("  not recorded (add --record to make it the calibration the runs view corrects with)")
    checked = report["verdict"]
    if checked["passed"]:
        lines.append(
            f"verdict: PASS, fit to judge (exclusive Youden's J {_kappa(report['exclusive']['youden'])} ≥ "
            f"{THRESHOLDS['exclusive_youden_min']:.2f}, every decoy kind answered at most "
            f"{_pct(THRESHOLDS['decoy_rate_max'])}, at most {_pct(THRESHOLDS['skipped_share_max'])} skipped)"
        )
    else:
        lines.append("verdict: FAIL, not fit to judge: " + "; ".join(checked["failures"]))
    return "\n".join(lines)
