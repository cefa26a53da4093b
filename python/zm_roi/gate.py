"""`zm-roi gate`: the benchmark as a check in CI, exit 0 held, 1 failed, 2 could not measure or not comparable.

Two parts. `decide()` is a pure function of the run (a row of public.roi_benchmark_runs), its paired
comparison with the previous comparable run (public.roi_benchmark_comparison()) and the rules: it is
where the gate's judgement lives, and the unit tests hold it to a noise budget. `run_gate()` drives a
transport: it starts a run (waiting out one in progress, or a pool still being built), waits for the
verdicts with progress on stderr, reads the comparison and hands all of it to `decide()`.

With 20 questions a run's 95% interval is about 40 points wide, so the gate never compares point
estimates: `--min-rate R` fails only when the interval's upper bound is below R (the run shows the rate
is below R, not merely that it might be), and `--no-regression` fails only when the paired comparison
is a significant regression (more questions lost than gained, exact sign test p < alpha).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from zm_roi.diagnostics import dollars, percent_text
from zm_roi.errors import UserError
from zm_roi.transport import Transport

HELD, FAILED, NOT_MEASURED = 0, 1, 2
DEFAULT_ALPHA = 0.05
DEFAULT_TIMEOUT = 900.0
POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Rules:
    """What the user asked the gate to hold: at least one of the two rules."""

    min_rate: float | None = None
    no_regression: bool = False
    alpha: float = DEFAULT_ALPHA

    def check(self) -> Rules:
        """The rules, or a UserError naming the input that is wrong."""
        if self.min_rate is None and not self.no_regression:
            raise UserError(
                "the gate needs a rule: --min-rate R (fail when the rate's 95% upper bound is below R), "
                "--no-regression (fail on a significant paired regression), or both"
            )
        if self.min_rate is not None and not 0 <= self.min_rate <= 1:
            raise UserError(f"--min-rate is a rate from 0 to 1 (0.3 for 30%), not {self.min_rate!r}")
        if not 0 < self.alpha < 1:
            raise UserError(
                f"--alpha is a significance level between 0 and 1 exclusive (e.g. 0.05), not {self.alpha!r}"
            )
        return self


@dataclass(frozen=True)
class Check:
    """One rule's outcome: held, failed, or undecided (it could not be evaluated), with why."""

    rule: str
    outcome: str  # held | failed | undecided
    reason: str
    not_comparable: bool = False


@dataclass(frozen=True)
class Decision:
    code: int
    verdict: str  # held | failed | not_comparable | not_measured | aborted_budget
    reasons: tuple[str, ...]
    checks: tuple[Check, ...] = field(default_factory=tuple)


def _progress_text(run: dict) -> str:
    done = (run.get("judged_count") or 0) + (run.get("skipped_count") or 0)
    return f"{done} of {run.get('probe_count') or 0} verdicts in"


def decide(run: dict | None, comparison: dict | None, rules: Rules) -> Decision:
    """The gate's verdict on `run` (a row of public.roi_benchmark_runs) given `comparison` (the object
    public.roi_benchmark_comparison() returns for it, or None) and `rules`. Pure.

    A run that cannot be scored (missing, still judging, stopped by the spending cap, no question
    judged) is exit 2 whatever the rules. Otherwise each rule is held, failed or undecided; any failure
    is exit 1, else any undecided rule (no previous comparable run, a changed judge, no shared question)
    exit 2, else exit 0."""
    if run is None:
        return Decision(NOT_MEASURED, "not_measured", ("the run is not in your run list",))
    status = run.get("status")
    if status == "aborted_budget":
        spent = dollars(run["cost_usd"]) if run.get("cost_usd") is not None else "$0"
        return Decision(
            NOT_MEASURED,
            "aborted_budget",
            (f"the run was aborted by the spending cap, spent {spent}: it is neither a pass nor a regression",),
        )
    if status != "complete":
        return Decision(
            NOT_MEASURED, "not_measured", (f"the run was not judged in time ({_progress_text(run)}, status {status})",)
        )
    if not run.get("judged_count"):
        return Decision(
            NOT_MEASURED,
            "not_measured",
            (f"no question of the run could be judged (all {run.get('skipped_count') or 0} skipped)",),
        )

    checks = []
    if rules.min_rate is not None:
        checks.append(_min_rate_check(run, rules.min_rate))
    if rules.no_regression:
        checks.append(_regression_check(comparison, rules.alpha))
    reasons = tuple(c.reason for c in checks)
    if any(c.outcome == "failed" for c in checks):
        return Decision(FAILED, "failed", reasons, tuple(checks))
    undecided = [c for c in checks if c.outcome == "undecided"]
    if undecided:
        verdict = "not_comparable" if any(c.not_comparable for c in undecided) else "not_measured"
        return Decision(NOT_MEASURED, verdict, reasons, tuple(checks))
    return Decision(HELD, "held", reasons, tuple(checks))


def _min_rate_check(run: dict, min_rate: float) -> Check:
    high = run.get("exclusive_rate_high")
    interval = (
        f"{percent_text(run.get('exclusive_rate'))} "
        f"(95% interval {percent_text(run.get('exclusive_rate_low'))}–{percent_text(high)})"
    )
    if high is not None and float(high) < min_rate:
        return Check("min_rate", "failed", f"the rate {interval} is below --min-rate {percent_text(min_rate)}")
    return Check("min_rate", "held", f"the rate {interval} may reach --min-rate {percent_text(min_rate)}")


def _regression_check(comparison: dict | None, alpha: float) -> Check:
    if not comparison or not comparison.get("previous_run_id"):
        return Check("no_regression", "undecided", "no previous comparable run to compare with")
    if comparison.get("judge_changed"):
        return Check(
            "no_regression",
            "undecided",
            "not comparable: the judge changed since the previous comparable run "
            f"({comparison.get('previous_judge_fingerprint')} → {comparison.get('judge_fingerprint')})",
            not_comparable=True,
        )
    paired = comparison.get("paired_count") or 0
    if paired == 0:
        return Check("no_regression", "undecided", "no question judged in both this run and the previous one")
    up, down = comparison.get("improved_count") or 0, comparison.get("regressed_count") or 0
    p = comparison.get("paired_p_value")
    change = f"+{up} / −{down} on {paired} shared questions"
    if p is None:
        return Check("no_regression", "held", f"no change against the previous run ({change})")
    change += f", p = {float(p):.4f}"
    if down > up and float(p) < alpha:
        return Check("no_regression", "failed", f"a significant regression: {change} < alpha {alpha:g}")
    if down > up:
        return Check("no_regression", "held", f"a regression within noise: {change} ≥ alpha {alpha:g}")
    return Check("no_regression", "held", f"no regression: {change}")


# ---- driving a run through the transport -----------------------------------------------------------


@dataclass
class Outcome:
    """What the gate measured and decided: printed as text, markdown or JSON."""

    decision: Decision
    rules: Rules
    run: dict | None = None
    previous: dict | None = None
    comparison: dict | None = None

    def as_json(self) -> dict:
        keep = (
            "run_id",
            "started_at",
            "status",
            "mode",
            "probe_count",
            "judged_count",
            "skipped_count",
            "exclusive_count",
            "exclusive_rate",
            "exclusive_rate_low",
            "exclusive_rate_high",
            "recall_function",
            "judge_fingerprint",
            "cost_usd",
        )

        def row(r: dict | None) -> dict | None:
            return None if r is None else {key: _plain(r.get(key)) for key in keep}

        comparison = None
        if self.comparison:
            comparison = {
                key: _plain(self.comparison.get(key))
                for key in (
                    "previous_run_id",
                    "paired_count",
                    "improved_count",
                    "regressed_count",
                    "paired_p_value",
                    "judge_changed",
                )
            }
        return {
            "verdict": self.decision.verdict,
            "exit_code": self.decision.code,
            "reasons": list(self.decision.reasons),
            "rules": asdict(self.rules),
            "run": row(self.run),
            "previous": row(self.previous),
            "comparison": comparison,
        }


def _plain(value):
    """PostgREST sends numerics as numbers, the local transport as JSON numbers too: floats for JSON."""
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def run_gate(
    transport: Transport,
    rules: Rules,
    timeout: float = DEFAULT_TIMEOUT,
    say: Callable[[str], None] = lambda _text: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll: float = POLL_SECONDS,
) -> Outcome:
    """Start a run as the transport's user, wait for its verdicts (up to `timeout` seconds in all) and
    decide. A run already in progress is waited out first and then a new one started, so the gate always
    measures the recall configured when it began, against the run before it."""
    deadline = clock() + timeout
    run_id = None
    while run_id is None:
        answer = transport.benchmark_memory() or {}
        status = answer.get("status")
        if status == "started":
            run_id = answer["run_id"]
            say(f"started run {answer['run_id']} with {answer.get('probes')} questions")
            break
        if status == "empty":
            reason = answer.get("message") or "no knowledge memory to benchmark"
            return Outcome(Decision(NOT_MEASURED, "not_measured", (reason,)), rules)
        if status == "generating":
            say(f"building the question pool: {answer.get('ready', 0)} of {answer.get('target', 0)} ready")
        elif status == "in_progress":
            say(f"run {answer.get('run_id')} is in progress: waiting for it before starting the gate's own")
            _wait_for_close(transport, answer.get("run_id"), deadline, say, clock, sleep, poll)
        else:
            raise UserError(f"benchmark_memory() answered an unknown status: {status!r}")
        if clock() >= deadline:
            why = "the question pool was still being built" if status == "generating" else "a run was still in progress"
            return Outcome(
                Decision(NOT_MEASURED, "not_measured", (f"no run started within --timeout {timeout:g} s: {why}",)),
                rules,
            )
        sleep(poll)

    run = _wait_for_close(transport, run_id, deadline, say, clock, sleep, poll)
    if run is not None and run.get("status") == "judging":
        reason = f"not judged within --timeout {timeout:g} s ({_progress_text(run)})"
        return Outcome(Decision(NOT_MEASURED, "not_measured", (reason,)), rules, run=run)
    comparison = None
    previous = None
    if run is not None and run.get("status") == "complete":
        comparison = transport.comparison(run_id)
        if comparison and comparison.get("previous_run_id"):
            previous = next((r for r in transport.runs() if r.get("run_id") == comparison["previous_run_id"]), None)
    return Outcome(decide(run, comparison, rules), rules, run, previous, comparison)


def _wait_for_close(transport, run_id, deadline, say, clock, sleep, poll) -> dict | None:
    """The run's row once it is no longer judging, or as it stands at the deadline; progress on `say`."""
    shown = None
    while True:
        run = next((r for r in transport.runs() if r.get("run_id") == run_id), None)
        if run is None or run.get("status") != "judging" or clock() >= deadline:
            return run
        progress = _progress_text(run)
        if progress != shown:
            say(f"judging run {run_id}: {progress}")
            shown = progress
        sleep(poll)


# ---- output -----------------------------------------------------------------------------------------


def text_report(outcome: Outcome) -> str:
    """A few lines for a terminal or a CI log."""
    lines = [f"gate: {outcome.decision.verdict.replace('_', ' ')} (exit {outcome.decision.code})"]
    lines += [f"- {reason}" for reason in outcome.decision.reasons]
    return "\n".join(lines)


def _rate_cell(run: dict | None) -> str:
    if not run or run.get("exclusive_rate") is None:
        return "—"
    low, high = percent_text(run.get("exclusive_rate_low")), percent_text(run.get("exclusive_rate_high"))
    return f"{percent_text(run['exclusive_rate'])} ({low}–{high})"


def markdown_report(outcome: Outcome) -> str:
    """A before/after table fit for a pull-request comment."""
    before, after, comparison = outcome.previous, outcome.run, outcome.comparison or {}

    def cell(run: dict | None, key: str) -> str:
        value = (run or {}).get(key)
        return "—" if value is None else f"`{value}`" if key == "recall_function" else str(value)

    paired = "—"
    p_value = "—"
    if comparison.get("previous_run_id"):
        if comparison.get("judge_changed"):
            paired = "not comparable: the judge changed"
        else:
            paired = (
                f"+{comparison.get('improved_count') or 0} / −{comparison.get('regressed_count') or 0} "
                f"on {comparison.get('paired_count') or 0} shared"
            )
            if comparison.get("paired_p_value") is not None:
                p_value = f"{float(comparison['paired_p_value']):.4f}"
    verdict = outcome.decision.verdict.replace("_", " ")
    rows = [
        ("run", cell(before, "run_id"), cell(after, "run_id")),
        ("exclusive rate (95% interval)", _rate_cell(before), _rate_cell(after)),
        ("judged", cell(before, "judged_count"), cell(after, "judged_count")),
        ("paired improved / regressed", "", paired),
        ("p-value (sign test)", "", p_value),
        ("recall function", cell(before, "recall_function"), cell(after, "recall_function")),
        ("verdict", "", f"**{verdict}** (exit {outcome.decision.code})"),
    ]
    lines = ["### Memory benchmark gate", "", "| | before | after |", "|---|---|---|"]
    lines += [f"| {name} | {b} | {a} |" for name, b, a in rows]
    lines += [""] + [f"- {reason}" for reason in outcome.decision.reasons]
    return "\n".join(lines)
