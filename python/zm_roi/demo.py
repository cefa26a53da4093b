"""`zm-roi demo`: the whole cycle on the embedded database, as a newcomer should first see it.

A fictional team (harbor: maya and leo, three projects with different memberships) gets its
memories imported once; then, on every run, an agent asks the MCP tool `benchmark_memory` over
stdio as maya, the verdicts land, and the tile is printed and rendered. Run it again and a new run
joins the trend.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from zm_roi import dashboard, embeddings, localdb, tokens
from zm_roi.diagnostics import percent_text
from zm_roi.errors import UserError
from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.queries import query
from zm_roi.recall import print_recall, recall_in
from zm_roi.settings import Settings
from zm_roi.transport import LocalTransport

CORPUS = Path(__file__).parent / "data" / "demo_corpus.jsonl"
# Paraphrased questions about checkout-api memories (our own writing): what an LLM-written probe looks
# like, and where a lexical recall falls short.
PARAPHRASES = Path(__file__).parent / "data" / "demo_paraphrases.jsonl"
LEXICAL = "public.recall_lexical"
HYBRID = "public.recall"
TEAM = "harbor"
DEMO_USER = "maya@harbor.example"
# Step 6 runs as leo, so that maya's tile and trend stay the demo's own runs.
COMPARISON_USER = "leo@harbor.example"
SAMPLE_QUESTION = "Which Stripe API version do we pin in checkout-api, and why?"
STEPS = 7


def step(number: int, text: str) -> None:
    print(f"[{number}/{STEPS}] {text}", flush=True)


def load_demo_team(db_url: str) -> int:
    """Import the demo corpus once (one transaction); returns how many memories were imported."""
    with psycopg.connect(db_url) as conn, conn.transaction():
        if conn.execute(query("user_id_by_email"), {"email": DEMO_USER}).fetchone():
            return 0
        groups: dict[tuple, list[MemoryLine]] = defaultdict(list)
        for line in CORPUS.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            groups[(row["author"], row["project"], row["team"])].append(MemoryLine.model_validate(row))
        imported = sum(
            insert_memories(conn, memories, Target(author, project=project, team=team, join=True))
            for (author, project, team), memories in groups.items()
        )
        team_id = conn.execute(query("ensure_team"), {"name": TEAM}).fetchone()[0]
        for project in {project for _, project, _ in groups if project}:
            conn.execute(query("ensure_project"), {"name": project, "team_id": team_id})
    return imported


async def _ask_agent_tool(token: str) -> dict:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "zm_roi.cli", "mcp"],
        env={**os.environ, "ZM_ACCESS_TOKEN": token},
    )
    async with Client(stdio_client(params), cache=None) as client:
        result = await client.call_tool("benchmark_memory", {})
    if result.is_error:
        raise UserError(f"the MCP tool failed: {result.content[0].text}")
    return result.structured_content


def ask_agent_tool(token: str) -> dict:
    """What an agent does: call the MCP tool `benchmark_memory` on `zm-roi mcp` over stdio."""
    return asyncio.run(_ask_agent_tool(token))


def drain_worker() -> None:
    """Let the worker do what is queued: questions and verdicts (LLM mode), question embeddings. Its log
    (a line per row) is shown only when it fails: the demo's steps are what the reader follows."""
    done = subprocess.run([sys.executable, "-m", "zm_roi.cli", "worker", "--once"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise UserError(
            "the worker could not do LLM mode's work (its reason is above): fix that and run the demo again, "
            "or use the offline mode: `zm-roi configure --extractor deterministic`"
        )


def benchmark_until_started(token: str, llm: bool, attempts: int = 5) -> dict:
    for _ in range(attempts):
        result = ask_agent_tool(token)
        print(f"      agent ← {result['message']}", flush=True)
        if result["status"] != "generating" or not llm:
            return result
        drain_worker()
    raise UserError("the probe pool is still being generated; is the worker failing? see `zm-roi worker --once`")


def wait_for_verdicts(transport: LocalTransport, llm: bool, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        tile = transport.tile()
        if tile["state"] != "judging":
            return tile
        if time.monotonic() > deadline:
            raise UserError("verdicts are still landing; check the worker with `zm-roi worker --once`")
        if llm:
            drain_worker()
        time.sleep(0.5)


def describe_tile(tile: dict) -> list[str]:
    """The tile as public.roi_benchmark_tile words it: state, hint, (deterministic mode) its caveat and
    (LLM mode) its judge note."""
    if tile.get("exclusive_rate") is None:
        return [f"  state: {tile['state']}", f"  {tile['hint']}"]
    rate, low, high = (percent_text(tile[f"exclusive_rate{end}"]) for end in ("", "_low", "_high"))
    trend = ", ".join(percent_text(r) for r in tile["trend"])
    lines = [
        "  Only memory knows",
        f"  exclusive rate: {rate}  (95% interval {low.rstrip('%')}–{high})",
        f"  {tile['hint']}",
        f"  trend of completed runs: {trend}",
    ]
    if tile.get("caveat"):
        lines.append(f"  ({tile['caveat']})")
    if tile.get("judge_note"):
        lines.append(f"  {tile['judge_note']}")
    return lines


def paraphrase_hits(conn: psycopg.Connection) -> int:
    """How many of the paraphrased questions find their memory in the top 3, with the recall function
    `conn`'s transaction sees."""
    lines = [json.loads(line) for line in PARAPHRASES.read_text(encoding="utf-8").splitlines()]
    return sum(
        any(row[3] == line["title"] for row in recall_in(conn, line["question"], DEMO_USER, "checkout-api", 3))
        for line in lines
    )


@contextmanager
def measured_with(db_url: str, recall_function: str) -> Iterator[psycopg.Connection]:
    """A superuser transaction in which the benchmark calls `recall_function`. The setting is put back
    before the transaction commits, so no other session (another user's benchmark, the upkeep job)
    ever sees it, and whatever the deployment configured stays configured."""
    with localdb.connect(db_url) as conn, conn.transaction():
        configured = conn.execute(query("get_recall_function")).fetchone()[0]
        conn.execute(query("configure_recall"), {"name": recall_function})
        yield conn
        conn.execute(query("restore_recall_function"), {"recall_function": configured})


def benchmark_in(conn: psycopg.Connection, user_id, email: str) -> dict:
    """public.benchmark_memory() as `email` inside `conn`'s transaction (the claims PostgREST would set)."""
    act_as(conn, claims_for(user_id, email), "/rpc/benchmark_memory")
    result = conn.execute(query("benchmark_memory")).fetchone()[0]
    conn.execute(query("back_to_login_role"))
    return result


def compare_recalls(cluster: localdb.Cluster, db_url: str, llm: bool) -> None:
    """One run through the lexical recall, then the worker embeds the probe questions (`zm-roi worker
    --once`: embedding a question needs no provider key) and one run goes through the hybrid; then
    paraphrased questions through both. (LLM mode compares the paraphrases only: its runs wait for the
    worker's verdicts.) Each recall is set for its own transaction only (measured_with), so the
    settings stay as the demo found them."""
    with psycopg.connect(db_url) as conn:
        leo = conn.execute(query("user_id_by_email"), {"email": COMPARISON_USER}).fetchone()[0]
    secret = cluster.jwt_secret()
    transport = LocalTransport(db_url, secret, tokens.mint(secret, leo, COMPARISON_USER, ttl=900))
    total = sum(1 for _ in PARAPHRASES.read_text(encoding="utf-8").splitlines())
    found = {}
    if llm:
        for name in (LEXICAL, HYBRID):
            with measured_with(db_url, name) as conn:
                found[name] = paraphrase_hits(conn)
        for name, hits in found.items():
            print(f"      {name:<22} paraphrases in top 3: {hits} of {total}")
        return
    with measured_with(db_url, LEXICAL) as conn:
        benchmark_in(conn, leo, COMPARISON_USER)
        found[LEXICAL] = paraphrase_hits(conn)
    model = embeddings.configured_model()
    if model is not None:
        drain_worker()
    with measured_with(db_url, HYBRID) as conn:
        benchmark_in(conn, leo, COMPARISON_USER)
        found[HYBRID] = paraphrase_hits(conn)
    runs = transport.runs()[:2]
    print("      recall                 questions embedded by               found by recall   paraphrases in top 3")
    for run in reversed(runs):
        name = run["recall_function"].split("(")[0]
        print(
            f"      {name:<22} {run['embedding_model'] or '(none: lexical only)':<35} "
            f"{run['with_memory_count']:>2} of {run['judged_count']:<11} {found[name]} of {total}"
        )
        if run.get("embedding_minilm_model"):  # the third leg's model, under the first's
            print(f"      {'':<22} + {run['embedding_minilm_model']}")
    print("      (templated questions quote the title, so both recalls find them; paraphrases, as an LLM writes")
    print("       them, are where the hybrid earns its place. Compare runs in the dashboard's trend.)")


def dashboard_page(config: Settings, cluster: localdb.Cluster) -> Path:
    """Where the demo writes the page: inside its own folders only. A ZM_DB_HOME the user chose gets it
    inside (the folder above is the user's); the default home, .zm/db, keeps it in .zm as before."""
    if config.db_home is not None:
        return cluster.home / "dashboard.html"
    return cluster.home.parent / "dashboard.html"


def run_demo(config: Settings, db_up) -> Path:
    """The six steps; returns the dashboard page it wrote."""
    started = time.monotonic()
    step(1, "starting the embedded database (PostgreSQL 15 + pg_cron, migrations via the Supabase CLI)")
    # The mode is the database's: ZM_EXTRACTOR picks it for a new database only (keep_mode).
    cluster: localdb.Cluster = db_up(config, quiet=True, keep_mode=True)
    db_url = cluster.url()
    llm = localdb.get_extractor(db_url) == "llm"

    step(2, f"loading the demo team '{TEAM}' (maya and leo, three projects with different members)")
    imported = load_demo_team(db_url)
    print(f"      {'imported ' + str(imported) + ' memories' if imported else 'already loaded: keeping the data'}")

    step(3, f"recall as {DEMO_USER} sees it, pinned to checkout-api")
    print_recall(db_url, SAMPLE_QUESTION, DEMO_USER, "checkout-api", 3)

    step(4, f"an agent calls the MCP tool benchmark_memory as {DEMO_USER}")
    with psycopg.connect(db_url) as conn:
        user_id = conn.execute(query("user_id_by_email"), {"email": DEMO_USER}).fetchone()[0]
    token = tokens.mint(cluster.jwt_secret(), user_id, DEMO_USER, ttl=900)
    benchmark_until_started(token, llm)

    step(5, "waiting for the verdicts")
    transport = LocalTransport(db_url, cluster.jwt_secret(), token)
    tile = wait_for_verdicts(transport, llm)
    print("\n".join(describe_tile(tile)))

    step(6, f"a recall change, measured: the lexical recall against the bundled hybrid ({COMPARISON_USER})")
    compare_recalls(cluster, db_url, llm)

    step(7, "rendering the dashboard")
    page = dashboard_page(config, cluster)
    dashboard.write_page(page, dashboard.render(transport))
    print(f"      open {page}")
    print(f"done in {time.monotonic() - started:.0f} s; run `make demo` again to add a run to the trend")
    return page
