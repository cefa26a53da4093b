"""`zm-roi demo` as a newcomer runs it, on its own embedded database: the whole cycle twice, the
printed tile equal to what public.roi_benchmark_tile holds, and the page it writes opened in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
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
    for variable in ("ZM_DB_URL", "ZM_EXTRACTOR", "ZM_ACCESS_TOKEN", "SUPABASE_URL", "SUPABASE_ANON_KEY"):
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
    assert [line[:5] for line in first.splitlines() if line.startswith("[")] == [f"[{n}/6]" for n in range(1, 7)]
    assert "imported 178 memories" in first
    assert "recall for maya@harbor.example" in first and "1. [decision, project]" in first

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

    page = Path(re.search(r"open (\S+dashboard\.html)", second).group(1))
    dom = open_page(tmp_path, "demo", page.as_uri())
    assert dom.text("rate") == percent(tile["exclusive_rate"])
    assert dom.has("sparkline"), "after the second run the trend shows"
