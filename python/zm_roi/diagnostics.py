"""What a run's diagnostics say, in plain sentences, for the dashboard and the MCP tool alike.

The figures come from public.roi_benchmark_runs and public.roi_benchmark_breakdown (aggregates only);
this module picks the run they explain and words them. It never sees question or memory text.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

KIND_ORDER = ("decision", "gotcha", "convention")
SCOPE_ORDER = ("personal", "project", "team")
DIMENSIONS = (("kind", "By kind", KIND_ORDER), ("scope", "By layer", SCOPE_ORDER))


def scored_run(tile: dict | None, runs: list[dict]) -> dict | None:
    """The run the tile's score comes from, as the tile names it (`scored_run_id`): the view alone
    decides which run that is."""
    wanted = (tile or {}).get("scored_run_id")
    return next((r for r in runs if wanted is not None and r.get("run_id") == wanted), None)


def percent(rate) -> int | None:
    """A rate (0..1) as a whole percent, rounded half up as people do by hand (0.625 is 63): the one
    place every client turns a rate into a percent."""
    if rate is None:
        return None
    return int((Decimal(str(rate)) * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def percent_text(rate) -> str:
    """`percent()` with its sign, or a dash for no rate (never a misleading 0%)."""
    shown = percent(rate)
    return "—" if shown is None else f"{shown}%"


def _count(value: int, noun: str) -> str:
    return f"{value:,} {noun}{'' if value == 1 else 's'}"


def retrieval_line(run: dict) -> str:
    """Whether search found the memory each question came from: a search miss, not a knowledge gap."""
    judged, surfaced = run.get("judged_count") or 0, run.get("source_surfaced_count") or 0
    if surfaced == 0:
        return f"Search surfaced the source memory for none of the {_count(judged, 'judged question')}."
    line = f"Search surfaced the source memory for {surfaced} of {_count(judged, 'judged question')}"
    if run.get("source_median_rank") is not None:
        line += f", median rank {run['source_median_rank']}"
    return line + "."


def agreement_line(run: dict) -> str | None:
    """LLM mode only: how often the judge's with_memory matched "search surfaced the source"."""
    if run.get("mode") != "llm" or not run.get("judged_count"):
        return None
    return (
        f"The judge and search agreed on {run.get('retrieval_agreement_count') or 0} of {run['judged_count']}; "
        "where they differ, another memory answered, or the surfaced source did not."
    )


def p_text(p) -> str:
    """Two decimals, rounded half up as people do by hand (0.625 reads 0.63)."""
    shown = Decimal(str(p)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return "p < 0.01" if shown < Decimal("0.01") else f"p = {shown}"


def paired_line(run: dict) -> str:
    """The change against the owner's previous completed run, on the questions both runs judged."""
    if not run.get("previous_run_id"):
        return "First completed run: nothing to compare with yet."
    if run.get("judge_changed"):
        # The two runs' verdicts were made by different judges (model or prompt): a change between them
        # may be the judge's, so no p-value is given for it.
        return "Not comparable with the previous run: the judge changed."
    paired = run.get("paired_count") or 0
    if paired == 0:
        return "No question in common with the previous run, so no paired comparison."
    up, down = run.get("improved_count") or 0, run.get("regressed_count") or 0
    shared = _count(paired, "shared question")
    # Question by question only the judge's own verdicts exist: the comparison is of raw verdicts, and
    # says so beside a judge-corrected rate.
    raw = "raw verdicts, not the judge-corrected rate"
    if up == down == 0:
        return f"No change against the previous run on {shared} ({raw})."
    sentence = f"+{up} / −{down} against the previous run on {shared}, {p_text(run['paired_p_value'])}"
    if float(run["paired_p_value"]) >= 0.05:
        sentence += " (could be chance)"
    return sentence + f"; it compares {raw}."


def corrected_rate(run: dict | None) -> dict | None:
    """LLM mode only: the run's rate corrected for its judge's measured error, in whole percents beside
    the raw one, or why there is none (the runs view's correction_note)."""
    if run is None or run.get("mode") != "llm":
        return None
    return {
        "rate": percent(run.get("exclusive_rate_corrected")),
        "low": percent(run.get("exclusive_rate_corrected_low")),
        "high": percent(run.get("exclusive_rate_corrected_high")),
        "calibrated": bool(run.get("judge_calibrated")),
        "note": run.get("correction_note"),
    }


def dollars(amount) -> str:
    amount = float(amount)
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}" if amount >= 0.01 else f"${amount:.6f}"


def cost_line(run: dict) -> str:
    """What the run's model calls (judging and spot-checks) cost, by litellm's local price map."""
    tokens_in, tokens_out = run.get("input_tokens") or 0, run.get("output_tokens") or 0
    if tokens_in == tokens_out == 0:
        return "No model calls: deterministic runs cost nothing." if run.get("mode") != "llm" else "No model calls."
    tokens = f"{tokens_in:,} + {tokens_out:,} tokens"
    line = f"Cost {dollars(run['cost_usd'])} ({tokens})" if run.get("cost_usd") is not None else tokens
    if run.get("cost_usd") is None:
        line += ", no price known for the model"
    own = run.get("own_key_calls") or 0
    if own:
        line += f"; {_count(own, 'call')} on your own provider key"
    return line + "."


def closed_book_line(run: dict) -> str | None:
    """The spot-check of the judge, when it ran: the bare model's own score, and how often the judge's
    without_memory matched it."""
    checked = run.get("closed_book_checked") or 0
    if checked == 0:
        return None
    return (
        f"Closed-book spot-check: with no memory the model answered {run.get('closed_book_correct') or 0} of "
        f"{_count(checked, 'question')} correctly; the judge's “answerable without memory” agreed on "
        f"{run.get('closed_book_agreement_count') or 0} of {checked}."
    )


def judge_checks(run: dict) -> str | None:
    """The checks of the judge that ran on the run: how often it said answerable with the source withheld
    (leniency), and how often reversing the results left its verdict as it was (position bias)."""
    parts = []
    withheld, order = run.get("withheld_checked") or 0, run.get("order_checked") or 0
    if withheld:
        parts.append(f"said answerable without its source for {run.get('withheld_answered_count') or 0} of {withheld}")
    if order:
        parts.append(f"same verdict in reverse order for {run.get('order_agreement_count') or 0} of {order}")
    return "judge checks: " + "; ".join(parts) if parts else None


def judge_line(run: dict) -> str:
    """Who judged the run, what the checks of the judge found, and what the question gate did to its
    questions."""
    fingerprint = run.get("judge_fingerprint")
    if run.get("mode") != "llm":
        who = "Judged by the strict retrieval check (deterministic mode: questions come from templates)"
    elif fingerprint:
        who = f"Judged by {fingerprint}"
    else:
        who = "No judge recorded (no question was judged)"
    line = who
    checks = judge_checks(run)
    if checks:
        line += f"; {checks}"
    if run.get("mode") == "llm":
        line += (
            f"; questions: {run.get('questions_regenerated') or 0} rewritten after the gate refused them, "
            f"{run.get('template_questions') or 0} from templates"
        )
    if run.get("judge_changed"):
        line += "; the judge changed since the previous run"
    return line + "."


def breakdown_groups(rows: list[dict], run_id: str) -> list[dict]:
    """The run's breakdown as two groups of bars (kind, layer), in a fixed order."""
    groups = []
    for dimension, title, order in DIMENSIONS:
        mine = {r["value"]: r for r in rows if r.get("run_id") == run_id and r.get("dimension") == dimension}
        bars = []
        for value in [v for v in order if v in mine] + sorted(set(mine) - set(order)):
            row = mine[value]
            bars.append(
                {
                    "value": value,
                    "judged": row.get("judged_count") or 0,
                    "exclusive": row.get("exclusive_count") or 0,
                    "rate": percent(row.get("exclusive_rate")),
                }
            )
        if bars:
            groups.append({"dimension": dimension, "title": title, "bars": bars})
    return groups


def summary(run: dict) -> str:
    """All of it, one sentence after another (the MCP tool's structured output carries it)."""
    parts = [
        retrieval_line(run),
        agreement_line(run),
        paired_line(run),
        judge_line(run),
        cost_line(run),
        closed_book_line(run),
    ]
    return " ".join(p for p in parts if p)
