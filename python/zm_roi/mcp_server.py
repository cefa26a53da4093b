"""`zm-roi mcp`: the MCP server an agent calls to run the benchmark for its user (stdio).

The server acts for the one user named by ZM_ACCESS_TOKEN. The token is checked on every call, not at
start-up, so a bad or expired token is a tool error the agent can read and relay, never a dead server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from zm_roi import diagnostics
from zm_roi.diagnostics import percent_text
from zm_roi.errors import UserError, database_errors
from zm_roi.transport import Transport

TILE_URI = "zm-roi://benchmark/tile"

INSTRUCTIONS = (
    "zm-roi measures what the user would lose without memory. Call benchmark_memory when the user asks "
    "how much their memory is worth; read the result with benchmark_results."
)

BENCHMARK_DESCRIPTION = """\
Run the memory ROI benchmark for the signed-in user: "what would you lose without memory?".
It asks questions drawn from the user's own stored decisions, gotchas and conventions (up to the
deployment's pool target, a setting), recalls each one as the user,
and has a judge decide which ones only memory could answer.
Statuses:
- generating: the question pool is still being built (ready of target). Call benchmark_memory again
  in about a minute.
- started: a run began with `probes` questions. Verdicts land shortly: call benchmark_results in a
  minute to see the score (calling benchmark_memory again would start another run). When the
  memories hold vectors of another embedding model than the questions, the message says that
  semantic recall was left out of the run and to run `zm-roi embed` (tell the user).
- in_progress: a run is still being judged; nothing new was started. Call benchmark_results later.
- empty: the user has no decision, gotcha or convention memory yet; nothing to measure.
Each call may start a new run, so call it when the user wants a fresh measurement, not to poll."""

RESULTS_DESCRIPTION = """\
The user's "Only memory knows" tile: the share of benchmark questions their memory answered that a bare
agent could not (the exclusive rate, with its 95% interval), how many were judged, the trend over
completed runs, and whether a run is still being judged (state judging) or finished with no question
judged (state no_score: no rate, even after an earlier score; call benchmark_memory again) or was stopped
by a spending cap (state aborted_budget: never scored or compared; the words say what it spent). `hint` says
what the count is ("N of M questions only memory answered"). `memories_gained_since_run` and
`memories_lost_since_run` count the knowledge learned and invalidated since the latest run started;
`rerun_hint`, when set, says enough has changed to run benchmark_memory again (offer it to the user). In
deterministic mode `caveat` says which figure is bounded in which direction. `diagnostics` explains the
scored run: whether search surfaced each question's source memory (count, MRR, median rank, agreement
with the judge), the rate by kind and by layer, the paired change against the previous run (with an
exact sign test), what the run's model calls cost, the closed-book spot-check of the judge when enabled,
and the judge checks: who judged (judge_fingerprint; judge_changed, when the paired comparison is not
comparable and has no p-value), how many questions the question gate sent back for quoting their source
(questions_regenerated) or replaced by their template (template_questions), how often the judge still
said answerable with the source withheld (withheld_answered_count of withheld_checked) and kept its
verdict with the results reversed (order_agreement_count of order_checked), and the judge's measured
error: judge_calibrated (an operator recorded a calibration of this judge), its sensitivity and
specificity on the exclusive label, and exclusive_rate_corrected with its 95% interval (the rate with
the judge's errors taken out; null with the reason in correction_note when the judge is not calibrated,
too close to chance, or in deterministic mode). The tile's `judge_note` says the same in a sentence. The
paired comparison compares raw verdicts. Aggregates only; changes nothing."""


class BenchmarkResult(BaseModel):
    """What benchmark_memory() answered, plus one sentence for the human."""

    status: Literal["generating", "started", "in_progress", "empty"]
    run_id: str | None = Field(None, description="the run started (started) or still executing (in_progress)")
    probes: int | None = Field(None, description="questions that went into the run (started)")
    ready: int | None = Field(None, description="questions ready so far (generating)")
    target: int | None = Field(None, description="questions the pool is being built to (generating)")
    message: str = Field(description="one plain sentence for the user")


class BreakdownRow(BaseModel):
    """The scored run's figures for one kind or one layer (scope)."""

    dimension: Literal["kind", "scope"]
    value: str
    judged_count: int
    with_memory_count: int
    without_memory_count: int
    exclusive_count: int
    exclusive_rate: float | None = None


class RunDiagnostics(BaseModel):
    """What explains the scored run (public.roi_benchmark_runs' diagnostics): aggregates only."""

    run_id: str
    mode: str
    judged_count: int
    source_surfaced_count: int = Field(description="judged questions whose source memory search surfaced")
    source_mrr: float | None = Field(None, description="mean of 1/rank of the source, 0 when it did not surface")
    source_median_rank: int | None = Field(None, description="median rank of the source where it surfaced")
    retrieval_agreement_count: int = Field(description="judged questions where with_memory = source surfaced")
    previous_run_id: str | None = Field(None, description="the previous completed run it is paired with")
    paired_count: int = Field(description="questions judged in both runs")
    improved_count: int = Field(description="exclusive now, not in the previous run")
    regressed_count: int = Field(description="exclusive in the previous run, not now")
    paired_p_value: float | None = Field(
        None, description="two-sided exact sign test; null with no change, or when the judge changed"
    )
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(None, description="the run's model calls, litellm's price map; null if unpriced")
    own_key_calls: int = Field(description="calls made on the user's own provider key")
    closed_book_checked: int = Field(description="questions also put to the model with no memory (spot-check)")
    closed_book_correct: int = Field(description="of those, answered correctly with no memory")
    closed_book_agreement_count: int = Field(description="of those, where the judge's without_memory agreed")
    questions_regenerated: int = Field(
        0, description="questions the gate refused for quoting their source, rewritten by the model on its one retry"
    )
    template_questions: int = Field(0, description="questions that failed the gate twice and took their template")
    judge_fingerprint: str | None = Field(
        None, description="judge model#prompt@hash ('deterministic:retrieval-check' in deterministic mode)"
    )
    judge_changed: bool | None = Field(
        None, description="true when the previous run's judge differs: the paired comparison then has no p-value"
    )
    withheld_checked: int = Field(0, description="questions judged again with their source memory withheld")
    withheld_answered_count: int = Field(
        0, description="of those, judged answerable anyway: another memory answers it, or the judge is lenient"
    )
    order_checked: int = Field(0, description="judged questions judged again with the results in reverse order")
    order_agreement_count: int = Field(0, description="of those, where both verdicts were the same")
    judge_calibrated: bool | None = Field(
        None, description="an operator recorded a calibration of this run's judge (zm-roi judge-check --record)"
    )
    judge_sensitivity: float | None = Field(None, description="the judge's sensitivity on the exclusive label")
    judge_specificity: float | None = Field(None, description="the judge's specificity on the exclusive label")
    exclusive_rate_corrected: float | None = Field(
        None, description="the exclusive rate with the judge's measured error taken out (Rogan–Gladen), 0..1"
    )
    exclusive_rate_corrected_low: float | None = Field(None, description="its 95% interval, lower bound")
    exclusive_rate_corrected_high: float | None = Field(None, description="its 95% interval, upper bound")
    correction_note: str | None = Field(None, description="what was corrected with, or why there is no correction")
    breakdown: list[BreakdownRow] = Field(default_factory=list, description="by kind and by layer (scope)")
    summary: str = Field(description="the figures in plain sentences")


class TileResult(BaseModel):
    """The caller's tile: aggregates only, no question or memory text."""

    state: Literal["invite", "judging", "aborted_budget", "no_score", "ready"]
    exclusive_rate: float | None = Field(None, description="0..1; null until a judged run exists")
    exclusive_rate_low: float | None = Field(None, description="95% Wilson interval, lower bound")
    exclusive_rate_high: float | None = Field(None, description="95% Wilson interval, upper bound")
    exclusive_count: int | None = None
    judged_count: int | None = None
    hint: str
    latest_run_id: str | None = None
    latest_run_at: str | None = None
    trend: list[float] = Field(default_factory=list, description="exclusive rates of completed runs, oldest first")
    caveat: str | None = Field(None, description="what deterministic mode's figures bound; null in LLM mode")
    scored_run_id: str | None = Field(None, description="the run the rate comes from; null without a rate")
    headline: str | None = Field(None, description="the tile's large line in a state without a rate")
    explanation: str | None = Field(None, description="the sentence under it")
    note: str | None = Field(
        None, description="set while a newer run is being judged, or when a spending cap stopped the latest run"
    )
    judge_note: str | None = Field(
        None, description="whether the judge is calibrated and the corrected rate; null in deterministic mode"
    )
    memories_gained_since_run: int | None = Field(
        None, description="live knowledge memories the user can see, created since the latest run started"
    )
    memories_lost_since_run: int | None = Field(
        None, description="knowledge memories live when the latest run started and invalidated since"
    )
    rerun_hint: str | None = Field(
        None, description="set once enough knowledge changed since the latest run: suggest running the benchmark again"
    )
    message: str = Field(description="one plain sentence for the user")
    diagnostics: RunDiagnostics | None = Field(None, description="what explains the scored run; null before one")


def benchmark_sentence(result: dict) -> str:
    status = result.get("status")
    if status == "generating":
        return (
            f"Building your benchmark: {result.get('ready', 0)} of {result.get('target', 0)} questions are ready; "
            "ask again in about a minute."
        )
    if status == "started":
        # The database's hint, when a semantic leg was left out (vectors of another model): say what to run.
        hint = f" {result['hint']}" if result.get("hint") else ""
        return (
            f"Benchmark started with {result.get('probes', 0)} questions from your memory; "
            f"the score appears on your tile (benchmark_results) within a minute or two.{hint}"
        )
    if status == "in_progress":
        return "A benchmark run is already being judged, so nothing new was started; check the tile in a minute."
    return result.get("message") or "There is nothing in your memory to benchmark yet."


def tile_sentence(tile: dict) -> str:
    """The tile's own wording (public.roi_benchmark_tile says it; this only strings it together)."""
    rerun = f" {tile['rerun_hint']}." if tile.get("rerun_hint") else ""
    if tile.get("exclusive_rate") is None:
        return tile["hint"] + rerun
    low, high = (percent_text(tile.get(key)) for key in ("exclusive_rate_low", "exclusive_rate_high"))
    sentence = f"Only memory knows {percent_text(tile['exclusive_rate'])} (95% interval {low}–{high}): {tile['hint']}."
    sentence += rerun
    for extra in (tile.get("note"), tile.get("caveat"), tile.get("judge_note")):
        if extra:
            sentence += f" {extra}"
    return sentence


def build_server(make_transport: Callable[[], Transport]) -> MCPServer:
    """The server; `make_transport` is called per request so settings and token errors surface as tool errors."""
    server = MCPServer(name="zm-roi", instructions=INSTRUCTIONS, log_level="WARNING")

    def read_tile() -> dict:
        transport = make_transport()
        with database_errors():
            tile = transport.tile()
        if tile is None:
            # The view has a row for every signed-in caller; none means the API hid it (not our words to invent).
            raise UserError("the tile view returned no row for this token: is public.roi_benchmark_tile exposed?")
        tile = {key: tile.get(key) for key in TileResult.model_fields if key not in ("message", "diagnostics")}
        tile["trend"] = [float(rate) for rate in tile.get("trend") or []]
        return {**tile, "message": tile_sentence(tile), "diagnostics": read_diagnostics(transport, tile)}

    @server.tool(
        name="benchmark_memory",
        title="Benchmark my memory",
        description=BENCHMARK_DESCRIPTION,
        annotations=ToolAnnotations(
            title="Benchmark my memory",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def benchmark_memory() -> Annotated[CallToolResult, BenchmarkResult]:
        try:
            with database_errors():
                answer = make_transport().benchmark_memory()
        except UserError as exc:
            return tool_error(exc)
        result = BenchmarkResult(
            **{key: answer.get(key) for key in ("status", "run_id", "probes", "ready", "target")},
            message=benchmark_sentence(answer),
        )
        return CallToolResult(
            content=[TextContent(type="text", text=result.message)],
            structured_content=result.model_dump(mode="json"),
        )

    @server.tool(
        name="benchmark_results",
        title="My memory benchmark results",
        description=RESULTS_DESCRIPTION,
        annotations=ToolAnnotations(
            title="My memory benchmark results",
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    def benchmark_results() -> Annotated[CallToolResult, TileResult]:
        try:
            tile = read_tile()
        except UserError as exc:
            return tool_error(exc)
        return CallToolResult(content=[TextContent(type="text", text=tile["message"])], structured_content=tile)

    @server.resource(
        TILE_URI,
        name="benchmark_tile",
        title="Only memory knows",
        description=RESULTS_DESCRIPTION,
        mime_type="application/json",
    )
    def tile_resource() -> str:
        try:
            return json.dumps(read_tile())
        except UserError as exc:
            raise ResourceError(str(exc)) from None

    return server


def read_diagnostics(transport: Transport, tile: dict) -> dict | None:
    """The scored run's diagnostics and breakdown, or None before a run was scored."""
    if tile.get("exclusive_rate") is None:
        return None
    run = diagnostics.scored_run(tile, transport.runs())
    if run is None:
        return None
    rows = [row for row in transport.breakdown() if row.get("run_id") == run["run_id"]]
    fields = {key: run.get(key) for key in RunDiagnostics.model_fields if key not in ("breakdown", "summary")}
    result = RunDiagnostics(
        **fields,
        breakdown=[BreakdownRow(**{k: row.get(k) for k in BreakdownRow.model_fields}) for row in rows],
        summary=diagnostics.summary(run),
    )
    return result.model_dump(mode="json")


def tool_error(exc: UserError) -> CallToolResult:
    """A refusal the agent can read and relay: isError with the one-line reason, no traceback."""
    return CallToolResult(content=[TextContent(type="text", text=f"zm-roi: {exc}")], is_error=True)


def serve(make_transport: Callable[[], Transport]) -> None:
    build_server(make_transport).run("stdio")
