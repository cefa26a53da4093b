"""What a run's diagnostics say (zm_roi.diagnostics), word for word, from the runs view's figures alone:
the same sentences the dashboard, the MCP tool and the demo print."""

from __future__ import annotations

import pytest

from zm_roi import diagnostics

LLM_RUN = {
    "run_id": "r2",
    "mode": "llm",
    "judged_count": 20,
    "source_surfaced_count": 14,
    "source_median_rank": 2,
    "retrieval_agreement_count": 17,
    "previous_run_id": "r1",
    "judge_changed": False,
    "paired_count": 18,
    "improved_count": 3,
    "regressed_count": 1,
    "paired_p_value": 0.625,
    "judge_fingerprint": "openai/gpt-x#judge@abc123",
    "questions_regenerated": 2,
    "template_questions": 1,
    "input_tokens": 12_345,
    "output_tokens": 678,
    "cost_usd": 0.0123,
    "own_key_calls": 1,
}


def test_a_rate_reads_as_a_whole_percent_rounded_half_up_and_no_rate_as_a_dash():
    assert [diagnostics.percent(r) for r in (0.625, 0.124, 0.125, 0, 1, None)] == [63, 12, 13, 0, 100, None]
    assert diagnostics.percent_text(0.625) == "63%"
    assert diagnostics.percent_text(None) == "—"
    # A p-value reads as two decimals rounded half up; only what rounds to 0.00 reads "p < 0.01".
    texts = [diagnostics.p_text(p) for p in (0.625, 0.049, 0.005, 0.0049)]
    assert texts == ["p = 0.63", "p = 0.05", "p = 0.01", "p < 0.01"]


def test_retrieval_says_how_often_search_found_the_source_and_its_median_rank():
    assert diagnostics.retrieval_line(LLM_RUN) == (
        "Search surfaced the source memory for 14 of 20 judged questions, median rank 2."
    )
    assert diagnostics.retrieval_line({"judged_count": 1, "source_surfaced_count": 0}) == (
        "Search surfaced the source memory for none of the 1 judged question."
    )


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"previous_run_id": None}, "First completed run: nothing to compare with yet."),
        ({"judge_changed": True}, "Not comparable with the previous run: the judge changed."),
        ({"paired_count": 0}, "No question in common with the previous run, so no paired comparison."),
        (
            {"improved_count": 0, "regressed_count": 0},
            "No change against the previous run on 18 shared questions (raw verdicts, not the judge-corrected rate).",
        ),
        (
            {},
            "+3 / −1 against the previous run on 18 shared questions, p = 0.63 (could be chance); "
            "it compares raw verdicts, not the judge-corrected rate.",
        ),
        (
            {"improved_count": 9, "regressed_count": 0, "paired_p_value": 0.004},
            "+9 / −0 against the previous run on 18 shared questions, p < 0.01; "
            "it compares raw verdicts, not the judge-corrected rate.",
        ),
    ],
)
def test_the_paired_comparison_is_worded_for_each_case(change, sentence):
    assert diagnostics.paired_line({**LLM_RUN, **change}) == sentence


def test_a_p_value_just_under_five_percent_is_not_called_chance():
    line = diagnostics.paired_line({**LLM_RUN, "paired_p_value": 0.0499})
    assert "p = 0.05;" in line and "could be chance" not in line


def test_cost_names_the_tokens_the_price_and_calls_on_the_owners_key():
    assert diagnostics.cost_line(LLM_RUN) == "Cost $0.0123 (12,345 + 678 tokens); 1 call on your own provider key."
    unpriced = {**LLM_RUN, "cost_usd": None, "own_key_calls": 2}
    assert diagnostics.cost_line(unpriced) == (
        "12,345 + 678 tokens, no price known for the model; 2 calls on your own provider key."
    )
    assert diagnostics.cost_line({"mode": "deterministic"}) == "No model calls: deterministic runs cost nothing."
    assert diagnostics.cost_line({"mode": "llm"}) == "No model calls."
    assert [diagnostics.dollars(a) for a in (1234.5, 0.5, 0.000123)] == ["$1,234.50", "$0.5000", "$0.000123"]


def test_the_judge_line_names_the_judge_its_checks_and_what_the_gate_did():
    run = {**LLM_RUN, "withheld_checked": 4, "withheld_answered_count": 1, "order_checked": 5}
    assert diagnostics.judge_line(run) == (
        "Judged by openai/gpt-x#judge@abc123; judge checks: said answerable without its source for 1 of 4; "
        "same verdict in reverse order for 0 of 5; questions: 2 rewritten after the gate refused them, "
        "1 from templates."
    )
    assert diagnostics.judge_line({"mode": "deterministic", "judge_changed": True}) == (
        "Judged by the strict retrieval check (deterministic mode: questions come from templates); "
        "the judge changed since the previous run."
    )


def test_llm_only_sentences_stay_silent_for_a_deterministic_run():
    deterministic = {**LLM_RUN, "mode": "deterministic"}
    assert diagnostics.agreement_line(deterministic) is None
    assert diagnostics.corrected_rate(deterministic) is None
    assert diagnostics.closed_book_line(deterministic) is None
    assert diagnostics.agreement_line(LLM_RUN) == (
        "The judge and search agreed on 17 of 20; where they differ, another memory answered, "
        "or the surfaced source did not."
    )


def test_the_summary_is_every_sentence_that_applies_in_order():
    run = {**LLM_RUN, "closed_book_checked": 3, "closed_book_correct": 1, "closed_book_agreement_count": 2}
    parts = [
        diagnostics.retrieval_line(run),
        diagnostics.agreement_line(run),
        diagnostics.paired_line(run),
        diagnostics.judge_line(run),
        diagnostics.cost_line(run),
        diagnostics.closed_book_line(run),
    ]
    assert diagnostics.summary(run) == " ".join(parts)
    assert parts[-1] == (
        "Closed-book spot-check: with no memory the model answered 1 of 3 questions correctly; the judge's "
        "“answerable without memory” agreed on 2 of 3."
    )


def test_the_breakdown_keeps_a_fixed_order_and_only_the_runs_own_rows():
    rows = [
        {
            "run_id": "r2",
            "dimension": "kind",
            "value": "gotcha",
            "judged_count": 4,
            "exclusive_count": 1,
            "exclusive_rate": 0.25,
        },
        {
            "run_id": "r2",
            "dimension": "kind",
            "value": "decision",
            "judged_count": 2,
            "exclusive_count": 1,
            "exclusive_rate": 0.5,
        },
        {
            "run_id": "r1",
            "dimension": "kind",
            "value": "convention",
            "judged_count": 9,
            "exclusive_count": 9,
            "exclusive_rate": 1,
        },
        {
            "run_id": "r2",
            "dimension": "scope",
            "value": "team",
            "judged_count": 1,
            "exclusive_count": 0,
            "exclusive_rate": 0,
        },
    ]
    groups = diagnostics.breakdown_groups(rows, "r2")
    assert [(g["title"], [b["value"] for b in g["bars"]]) for g in groups] == [
        ("By kind", ["decision", "gotcha"]),
        ("By layer", ["team"]),
    ]
    assert groups[0]["bars"][1] == {"value": "gotcha", "judged": 4, "exclusive": 1, "rate": 25}


def test_the_scored_run_is_the_one_the_tile_names():
    runs = [{"run_id": "r2"}, {"run_id": "r1"}]
    assert diagnostics.scored_run({"scored_run_id": "r1"}, runs) == {"run_id": "r1"}
    assert diagnostics.scored_run({"scored_run_id": None}, runs) is None
    assert diagnostics.scored_run(None, runs) is None
