"""Docs that stay true: every line of the README's quick start runs, in order, on a throwaway database."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import ROOT
from zm_roi import localdb
from zm_roi.settings import DEFAULT_WORKER_CONCURRENCY


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


def test_the_readme_states_the_default_worker_concurrency_the_code_uses():
    readme = (ROOT / "README.md").read_text()
    assert f"`ZM_WORKER_CONCURRENCY` ({DEFAULT_WORKER_CONCURRENCY}, at most 64)" in readme


def test_every_readme_paragraph_closes_the_parentheses_it_opens():
    """Before: the Configuration section repeated a line, the second a dangling fragment whose ")"
    closed nothing. Code and code spans are left out (they quote SQL and shell)."""
    text = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    unbalanced = [p[:80] for p in re.split(r"\n\s*\n", text) if p.count("(") != p.count(")")]
    assert unbalanced == []


def test_the_readme_states_the_settings_defaults_the_schema_writes():
    """The knobs the Configuration section names, against roi.settings' column defaults."""
    schema = (ROOT / "supabase" / "schemas" / "30_roi_benchmark.sql").read_text()
    readme = (ROOT / "README.md").read_text()
    pool = re.search(r"pool_target integer not null default (\d+)", schema).group(1)
    checks = re.search(r"closed_book_checks integer not null default (\d+)", schema).group(1)
    assert f"pool target {pool}," in readme and f"`closed_book_checks` {checks}:" in readme
    assert readme.count("2 minutes, 5 attempts") == 1, "said once"
