"""Questions never reach a client, tested where clients read. After a deterministic
run and an LLM-mode run with rows in every owner table (the red-team's scenes, tests/db/test_redteam.py),
everything a client of the owner receives is collected: the MCP tools' text and structured results and
the tile resource (`zm-roi mcp` over stdio), the local transport's replies, the dashboard page, and what
`zm-roi` prints for the user. Then every probe question and every recall snapshot text (and each probe's
source text) is read as the superuser, and none may appear in any of it. The database suites check the
rule inside the database; this checks what the code on top of it hands out."""

from __future__ import annotations

import asyncio
import html
import json
import subprocess
import sys
import threading
import urllib.request
import uuid

import psycopg
import pytest

from tests.conftest import ROOT
from tests.db.test_redteam import deterministic_owner, llm_owner
from tests.support import extractor, remove_users, set_settings
from zm_roi import dashboard, localdb, tokens
from zm_roi.mcp_server import TILE_URI
from zm_roi.transport import LocalTransport

SCENE_SETTINGS = ("pool_target", "rotation_per_run", "closed_book_checks", "withheld_source_checks", "order_checks")


def strings(value) -> list[str]:
    """Every string in a JSON-like value (keys included), so an escaped quote cannot hide a match."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *strings(item)]]
    if isinstance(value, list | tuple):
        return [text for item in value for text in strings(item)]
    return [] if value is None else [str(value)]


def secrets_of(db_url: str, owner: uuid.UUID) -> dict[str, list[str]]:
    """As the superuser: the owner's probe questions, and the memory text their snapshots and probes hold."""
    with psycopg.connect(db_url) as conn:
        questions = [
            row[0]
            for row in conn.execute(
                "select question from roi.probes where owner_id = %s and question is not null", (owner,)
            )
        ]
        texts = [
            row[0]
            for row in conn.execute(
                """select s ->> field from roi.recalls r, jsonb_array_elements(r.surfaced) s,
                          unnest(array['title', 'body']) field
                   where r.owner_id = %s
                   union select source_title from roi.probes where owner_id = %s
                   union select source_body from roi.probes where owner_id = %s""",
                (owner, owner, owner),
            )
            if row[0]
        ]
    return {"questions": questions, "snapshot texts": texts}


def mcp_outputs(db_url: str, jwt_secret: str, token: str, errlog) -> dict[str, list[str]]:
    """Both tools (text and structured) and the tile resource, from `zm-roi mcp` as the agent meets it."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {"ZM_DB_URL": db_url, "ZM_JWT_SECRET": jwt_secret, "ZM_ACCESS_TOKEN": token}
    params = StdioServerParameters(command=sys.executable, args=["-m", "zm_roi.cli", "mcp"], env=env, cwd=str(ROOT))

    async def scenario():
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            results = await client.call_tool("benchmark_results", {})
            started = await client.call_tool("benchmark_memory", {})
            again = await client.call_tool("benchmark_results", {})
            resource = await client.read_resource(TILE_URI)
            return results, started, again, resource

    results, started, again, resource = asyncio.run(scenario())
    seen = {}
    for name, result in (("benchmark_results", results), ("benchmark_memory", started), ("benchmark_results 2", again)):
        assert not result.is_error, result.content
        seen[f"MCP {name} text"] = [part.text for part in result.content]
        seen[f"MCP {name} structured"] = strings(result.structured_content)
    assert results.structured_content["diagnostics"] is not None, "a scored run: the diagnostics are read too"
    seen["MCP tile resource"] = [content.text for content in resource.contents] + strings(
        json.loads(resource.contents[0].text)
    )
    return seen


def transport_outputs(db_url: str, jwt_secret: str, token: str) -> dict[str, list[str]]:
    """The local transport's four replies, and the dashboard page as `dashboard --serve` hands it out."""
    transport = LocalTransport(db_url, jwt_secret, token)
    server = dashboard.http_server(lambda: LocalTransport(db_url, jwt_secret, token), 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/", timeout=60) as reply:  # noqa: S310
            served = reply.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    return {
        "transport benchmark_memory": strings(transport.benchmark_memory()),
        "transport tile": strings(transport.tile()),
        "transport runs": strings(transport.runs()),
        "transport breakdown": strings(transport.breakdown()),
        "dashboard page (served)": [html.unescape(served)],
    }


def command_outputs(db_url: str, jwt_secret: str, token: str, email: str, folder) -> tuple[dict, dict]:
    """What `zm-roi` prints for the user (stdout and stderr), and the page `dashboard --out` writes."""
    env = {"ZM_DB_URL": db_url, "ZM_JWT_SECRET": jwt_secret, "ZM_ACCESS_TOKEN": token, "ZM_EMBEDDING_MODEL": "none"}
    page = folder / "dashboard.html"
    commands = {
        "zm-roi dashboard --out": ["dashboard", "--out", str(page)],
        "zm-roi configure": ["configure"],
        "zm-roi token": ["token", "--user", email, "--ttl", "60"],
    }
    seen = {}
    for name, args in commands.items():
        done = subprocess.run(
            [sys.executable, "-m", "zm_roi.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(ROOT),
            timeout=120,
        )
        assert done.returncode == 0, f"{name}: {done.stderr}"
        seen[name] = [done.stdout, done.stderr]
    seen["zm-roi dashboard --out (the page)"] = [html.unescape(page.read_text())]
    # `recall` prints the user's own memories (that is its job), so only questions are looked for in it.
    # Asked for the sentinel every memory of the scene carries.
    sentinel = email.split("@")[0]
    recall = subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", "recall", f"What about {sentinel}?", "--user", email, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=120,
    )
    assert recall.returncode == 0, recall.stderr
    assert json.loads(recall.stdout), "the recall found the owner's memories"
    return seen, {"zm-roi recall --json": [recall.stdout, recall.stderr]}


@pytest.fixture(scope="module", params=["deterministic", "llm"])
def owner_scene(request, cluster):
    """An owner after a deterministic run, or after LLM-mode runs with rows in every owner table (the
    red-team's scenes), read in the mode it was made in."""
    db_url = cluster.url()
    sentinel = f"PRIVACY{uuid.uuid4().hex}"
    # llm_owner sets the pool and check settings for its scene: put them back for the tests after this one.
    with psycopg.connect(db_url) as conn:
        before = conn.execute(f"select {', '.join(SCENE_SETTINGS)} from roi.settings").fetchone()
    request.addfinalizer(lambda: set_settings(db_url, **dict(zip(SCENE_SETTINGS, before, strict=True))))
    held = extractor(db_url, request.param)
    held.__enter__()
    request.addfinalizer(lambda: held.__exit__(None, None, None))
    if request.param == "deterministic":
        owner = deterministic_owner(db_url, sentinel)
    else:
        owner = llm_owner(db_url, cluster.url(user="roi_worker", password=localdb.WORKER_PASSWORD), sentinel)
    request.addfinalizer(lambda: remove_users(db_url, [owner]))
    return {"mode": request.param, "owner": owner, "email": f"{sentinel}@o.test"}


def leaks(outputs: dict[str, list[str]], secrets: dict[str, list[str]]) -> list[str]:
    found = []
    for where, texts in outputs.items():
        haystack = "\n".join(texts).casefold()
        for kind, values in secrets.items():
            found += [
                f"{where} holds one of the {kind}: {value[:60]!r}" for value in values if value.casefold() in haystack
            ]
    return found


def test_no_client_output_holds_a_question_or_a_snapshot(cluster, owner_scene, tmp_path):
    db_url, jwt_secret = cluster.url(), cluster.jwt_secret()
    token = tokens.mint(jwt_secret, owner_scene["owner"], owner_scene["email"])
    with open(tmp_path / "mcp-stderr", "w") as errlog:
        outputs = mcp_outputs(db_url, jwt_secret, token, errlog)
    outputs |= transport_outputs(db_url, jwt_secret, token)
    commands, recall = command_outputs(db_url, jwt_secret, token, owner_scene["email"], tmp_path)
    outputs |= commands
    outputs["MCP server stderr"] = [(tmp_path / "mcp-stderr").read_text()]
    # Read last, so the questions and snapshots of the run the MCP call just started are in it too.
    secrets = secrets_of(db_url, owner_scene["owner"])
    assert secrets["questions"] and secrets["snapshot texts"], "there are questions and snapshots to hide"
    silent = [where for where, texts in outputs.items() if not "".join(texts).strip() and where != "MCP server stderr"]
    assert silent == [], "every path said something"
    # The collection can find what it looks for: the owner's own recall prints snapshot text.
    assert leaks(recall, {"snapshot texts": secrets["snapshot texts"]}), "(sensitivity) recall prints memory text"
    assert leaks(outputs, secrets) == []
    assert leaks(recall, {"questions": secrets["questions"]}) == []
