"""`zm-roi mcp` as an agent meets it: a subprocess on stdio, driven by the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from contextlib import asynccontextmanager

import jwt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import ROOT
from tests.support import activate_pending_probes, benchmark_user, extractor, knowledge
from zm_roi import tokens
from zm_roi.mcp_server import TILE_URI

STRUCTURED_FIELDS = {"status", "run_id", "probes", "ready", "target", "message"}
# The contract's diagnostics of public.roi_benchmark_runs, all in the results tool's structured output.
DIAGNOSTICS = {
    "source_surfaced_count",
    "source_mrr",
    "retrieval_agreement_count",
    "previous_run_id",
    "paired_count",
    "improved_count",
    "regressed_count",
    "paired_p_value",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "own_key_calls",
    "closed_book_checked",
    "closed_book_correct",
    "closed_book_agreement_count",
    "questions_regenerated",
    "template_questions",
    "judge_fingerprint",
    "judge_changed",
    "withheld_checked",
    "withheld_answered_count",
    "order_checked",
    "order_agreement_count",
    "judge_calibrated",
    "judge_sensitivity",
    "judge_specificity",
    "exclusive_rate_corrected",
    "exclusive_rate_corrected_low",
    "exclusive_rate_corrected_high",
    "correction_note",
    "breakdown",
    "summary",
}


@asynccontextmanager
async def mcp_client(cluster, token: str | None, errlog_path):
    """`python -m zm_roi.cli mcp` for the token's user, against the test cluster."""
    env = {"ZM_DB_URL": cluster.url(), "ZM_JWT_SECRET": cluster.jwt_secret()}
    if token is not None:
        env["ZM_ACCESS_TOKEN"] = token
    params = StdioServerParameters(command=sys.executable, args=["-m", "zm_roi.cli", "mcp"], env=env, cwd=str(ROOT))
    with open(errlog_path, "a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            yield client


def text_of(result) -> str:
    assert len(result.content) == 1, "one plain sentence for the human"
    return result.content[0].text


def test_the_server_lists_the_tool_with_annotations_and_output_schema(cluster, email, tmp_path):
    async def scenario():
        async with mcp_client(cluster, None, tmp_path / "stderr") as client:
            return (await client.list_tools()).tools, (await client.list_resources()).resources

    tools, resources = asyncio.run(scenario())
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == {"benchmark_memory", "benchmark_results"}
    for tool in tools:  # the user is the token's; a tool that took text would need zm_roi/inputs.py first
        assert not tool.input_schema.get("properties"), f"{tool.name} takes input: normalise it in zm_roi/inputs.py"

    bench = by_name["benchmark_memory"]
    hints = bench.annotations
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        False,
        False,
        False,
        False,
    )
    assert "call benchmark_memory again" in bench.description.lower()
    assert "benchmark_results" in bench.description  # where to look after `started`
    assert bench.input_schema.get("required", []) == []
    schema = bench.output_schema
    assert set(schema["properties"]) == STRUCTURED_FIELDS
    assert set(schema["required"]) == {"status", "message"}
    assert schema["properties"]["status"]["enum"] == ["generating", "started", "in_progress", "empty"]

    results = by_name["benchmark_results"]
    assert results.annotations.read_only_hint is True and results.annotations.open_world_hint is False
    assert {
        "state",
        "exclusive_rate",
        "exclusive_rate_low",
        "exclusive_rate_high",
        "hint",
        "trend",
        "diagnostics",
        "judge_note",
    } <= set(results.output_schema["properties"])
    diagnostics = results.output_schema["$defs"]["RunDiagnostics"]["properties"]
    assert set(diagnostics) >= DIAGNOSTICS
    assert [str(resource.uri) for resource in resources] == [TILE_URI]


def test_the_tool_goes_through_generating_started_and_in_progress(cluster, email, tmp_path):
    db = cluster.url()
    with extractor(db, "llm"), benchmark_user(cluster, email, knowledge(5)) as me:

        async def scenario():
            async with mcp_client(cluster, me.token, tmp_path / "stderr") as client:
                generating = await client.call_tool("benchmark_memory", {})
                # The worker's job, done by hand: the pool's questions are ready.
                assert activate_pending_probes(db, me.id) == 5
                started = await client.call_tool("benchmark_memory", {})
                in_progress = await client.call_tool("benchmark_memory", {})
                tile = await client.call_tool("benchmark_results", {})
                resource = await client.read_resource(TILE_URI)
                return generating, started, in_progress, tile, resource

        generating, started, in_progress, tile, resource = asyncio.run(scenario())

    for result in (generating, started, in_progress, tile):
        assert not result.is_error, text_of(result)
        assert text_of(result) == result.structured_content["message"]

    assert generating.structured_content == {
        "status": "generating",
        "run_id": None,
        "probes": None,
        "ready": 0,
        "target": 5,
        "message": text_of(generating),
    }
    assert "0 of 5 questions are ready" in text_of(generating)
    assert "again in about a minute" in text_of(generating)

    run_id = started.structured_content["run_id"]
    uuid.UUID(run_id)
    assert started.structured_content == {
        "status": "started",
        "run_id": run_id,
        "probes": 5,
        "ready": None,
        "target": None,
        "message": text_of(started),
    }
    assert "started with 5 questions" in text_of(started)

    assert in_progress.structured_content["status"] == "in_progress"
    assert in_progress.structured_content["run_id"] == run_id, "the running run is reported, no second run"
    assert "nothing new was started" in text_of(in_progress)

    assert tile.structured_content["state"] == "judging"
    assert tile.structured_content["exclusive_rate"] is None, "no score before verdicts, never a 0%"
    assert tile.structured_content["latest_run_id"] == run_id
    assert "Judging 5 questions" in text_of(tile)
    assert tile.structured_content["diagnostics"] is None, "nothing to explain before a score"
    assert json.loads(resource.contents[0].text) == tile.structured_content


def test_a_deterministic_run_starts_at_once_and_the_results_tool_shows_the_score(cluster, email, tmp_path):
    with extractor(cluster.url(), "deterministic"), benchmark_user(cluster, email, knowledge(6)) as me:

        async def scenario():
            async with mcp_client(cluster, me.token, tmp_path / "stderr") as client:
                return await client.call_tool("benchmark_memory", {}), await client.call_tool("benchmark_results", {})

        started, tile = asyncio.run(scenario())
    assert started.structured_content["status"] == "started" and started.structured_content["probes"] == 6
    score = tile.structured_content
    assert score["state"] == "ready" and score["judged_count"] == 6
    assert score["exclusive_rate_low"] <= score["exclusive_rate"] <= score["exclusive_rate_high"]
    assert text_of(tile).startswith(f"Only memory knows {round(score['exclusive_rate'] * 100)}% (95% interval ")
    assert text_of(tile).endswith(score["caveat"]) and "upper bound" in score["caveat"], "the view's caveat"
    found = score["diagnostics"]
    assert set(found) >= DIAGNOSTICS
    assert found["judged_count"] == 6 and found["source_surfaced_count"] == found["retrieval_agreement_count"]
    assert 0 < found["source_mrr"] <= 1
    assert (found["previous_run_id"], found["paired_count"], found["paired_p_value"]) == (None, 0, None)
    assert (found["input_tokens"], found["cost_usd"], found["own_key_calls"], found["closed_book_checked"]) == (
        0,
        None,
        0,
        0,
    )
    for dimension in ("kind", "scope"):
        rows = [row for row in found["breakdown"] if row["dimension"] == dimension]
        assert sum(row["judged_count"] for row in rows) == 6
        assert sum(row["exclusive_count"] for row in rows) == score["exclusive_count"]
    assert found["summary"].startswith(f"Search surfaced the source memory for {found['source_surfaced_count']} of 6")
    assert "First completed run" in found["summary"] and "deterministic runs cost nothing" in found["summary"]
    assert (found["judge_fingerprint"], found["judge_changed"]) == ("deterministic:retrieval-check", False)
    assert (found["questions_regenerated"], found["template_questions"]) == (0, 0)
    assert (found["withheld_checked"], found["order_checked"]) == (0, 0), "deterministic runs check no judge"
    assert "Judged by the strict retrieval check" in found["summary"]


def test_a_user_without_knowledge_gets_empty(cluster, email, tmp_path):
    with benchmark_user(cluster, email) as me:

        async def scenario():
            async with mcp_client(cluster, me.token, tmp_path / "stderr") as client:
                return await client.call_tool("benchmark_memory", {})

        empty = asyncio.run(scenario())
    assert empty.structured_content["status"] == "empty"
    assert "store some knowledge first" in text_of(empty)


@pytest.mark.parametrize(
    ("case", "phrase"),
    [
        ("missing", "no access token"),
        ("garbage", "not a valid JWT"),
        ("expired", "expired"),
        ("wrong secret", "signature does not match"),
        ("unknown user", "does not exist"),
    ],
)
def test_a_bad_token_is_a_tool_error_with_a_clear_message(cluster, tmp_path, case, phrase):
    now = int(time.time())
    token = {
        "missing": None,
        "garbage": "not-a-token",
        "expired": jwt.encode(
            {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated", "exp": now - 5},
            cluster.jwt_secret(),
            algorithm="HS256",
        ),
        "wrong secret": tokens.mint("s" * 64, uuid.uuid4()),
        "unknown user": tokens.mint(cluster.jwt_secret(), uuid.uuid4()),
    }[case]

    async def scenario():
        async with mcp_client(cluster, token, tmp_path / "stderr") as client:
            return await client.call_tool("benchmark_memory", {}), await client.call_tool("benchmark_results", {})

    for result in asyncio.run(scenario()):
        assert result.is_error
        assert result.structured_content is None
        assert text_of(result).startswith("zm-roi: ") and phrase in text_of(result)
        assert "Traceback" not in text_of(result)
    assert "Traceback" not in (tmp_path / "stderr").read_text()
