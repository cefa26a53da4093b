"""Docs that stay true: every line of the README's quick start runs, in order, on a throwaway database."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import ROOT
from zm_roi import localdb


def quick_start_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- quickstart:begin -->\s*```sh\n(.*?)```\s*<!-- quickstart:end -->", readme, re.S)
    assert block, "the README keeps its quick start between the quickstart markers"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_every_quick_start_line_runs(tmp_path):
    home = Path(tempfile.mkdtemp(prefix="zm-roi-readme-"))
    home.chmod(0o755)
    port = localdb.free_port()
    env = {**os.environ, "ZM_DB_HOME": str(home / "db"), "ZM_DB_PORT": str(port)}
    for variable in (
        "ZM_DB_URL",
        "ZM_EXTRACTOR",
        "ZM_ACCESS_TOKEN",
        "SUPABASE_URL",
        "SUPABASE_ANON_KEY",
        "ZM_EMBEDDING_MODEL",
    ):
        env.pop(variable, None)
    script = "set -euo pipefail\n" + "\n".join(quick_start_lines()).replace("tile.html", str(tmp_path / "tile.html"))
    try:
        result = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert "imported 5 memories for me@example.com into project atlas" in result.stdout
        assert "Queue invoice emails through the outbox table" in result.stdout, "recall found the outbox decision"
        assert "Only memory knows" in (tmp_path / "tile.html").read_text()
    finally:
        localdb.Cluster(home / "db", port).destroy()
        subprocess.run(["rm", "-rf", str(home)], check=False)
