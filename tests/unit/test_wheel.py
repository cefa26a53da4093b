"""The wheel ships the product and nothing of the bench: `pip install zm-roi` gets the CLI, the worker,
the MCP server and their SQL, prompts and data; the `make bench` harness stays in the checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# setuptools' build_py, configured from pyproject.toml exactly as a wheel build configures it, writes
# every file the wheel will hold (the wheel adds only its .dist-info). egg_info's scratch goes to a
# temporary folder, so the checkout is left as it was.
BUILD = """
import sys
from setuptools.config.pyprojecttoml import apply_configuration
from setuptools.dist import Distribution

lib, scratch = sys.argv[1:3]
dist = apply_configuration(Distribution({"script_name": "setup.py"}), "pyproject.toml")
dist.get_command_obj("egg_info").egg_base = scratch
build_py = dist.get_command_obj("build_py")
build_py.build_lib = lib
build_py.compile = 0
dist.run_command("build_py")
"""


def wheel_files(tmp_path: Path) -> list[str]:
    lib, scratch = tmp_path / "lib", tmp_path / "egg"
    scratch.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", BUILD, str(lib), str(scratch)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return sorted(path.relative_to(lib).as_posix() for path in lib.rglob("*") if path.is_file())


def test_the_wheel_holds_the_product_and_no_bench_harness(tmp_path):
    shipped = wheel_files(tmp_path)
    for product in ("zm_roi/cli.py", "zm_roi/worker.py", "zm_roi/queries.sql", "zm_roi/prompts/judge.j2"):
        assert product in shipped
    assert {path.split("/")[0] for path in shipped} == {"zm_roi"}, "one top-level package"
    assert [path for path in shipped if path.startswith(("zm_roi/bench/", "zm_roi_bench/"))] == []
    # The bench's own files are where `make bench` finds them instead.
    assert (ROOT / "bench" / "zm_roi_bench" / "__main__.py").is_file()
    assert (ROOT / "bench" / "zm_roi_bench" / "queries.sql").is_file()
