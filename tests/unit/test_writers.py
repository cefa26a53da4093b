"""Nothing a command writes lands outside the folder the user named. Every call in the package that
writes, moves or removes a file is listed here with the folder it writes in, so a new writer fails
this test until someone has looked at where it writes (and tested it). What each listed writer does
is tested where it runs: the page (`dashboard.write_page`) in tests/e2e/test_cli_inputs.py, the
demo's page in tests/unit/test_demo_page.py and tests/e2e/test_demo.py, the embedded database's
folder in tests/e2e/test_localdb.py, the local model server's in tests/model/test_local_model.py,
MiniLM's temporary graph in tests/unit/test_minilm.py.
`zm-roi judge-check --record` and every other command write to the database only."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "python" / "zm_roi"

# Methods of a Path (or file) that write, and module functions that do. `.replace` is left out as a
# method (str and datetime have one); os.replace is listed.
WRITE_METHODS = {"write_text", "write_bytes", "mkdir", "unlink", "rmdir", "touch", "chmod", "chown", "rename"}
WRITE_METHODS |= {"symlink_to", "hardlink_to"}
WRITE_FUNCTIONS = {
    ("os", name)
    for name in ("open", "replace", "rename", "remove", "unlink", "mkdir", "makedirs", "chmod", "chown", "rmdir")
}
WRITE_FUNCTIONS |= {("os", "symlink")}
WRITE_FUNCTIONS |= {("shutil", name) for name in ("rmtree", "move", "copy", "copy2", "copyfile", "copytree")}
WRITE_FUNCTIONS |= {("tempfile", name) for name in ("mkdtemp", "mkstemp", "NamedTemporaryFile", "TemporaryDirectory")}

# (module, function) -> the writes it makes, and where.
WRITERS = {
    # The page, to the file the user named (--out) or the demo's page in its own folder: a new file
    # beside it, renamed over it (a symlink there is replaced, not followed).
    ("dashboard.py", "write_page"): {"os.open", "os.replace", ".unlink"},
    # MiniLM's rewritten int8 graph: a private folder under TMPDIR, removed once the session exists
    # (decision 0040; tests/unit/test_minilm.py). The child process writes the graph into it.
    ("embeddings.py", "_MiniLM.__init__"): {"tempfile.TemporaryDirectory"},
    # `zm-roi … | head`: stdout to /dev/null once the reader has gone.
    ("cli.py", "main"): {"os.open"},
    # The embedded database: everything inside ZM_DB_HOME (default .zm/db of the checkout).
    ("localdb.py", "Cluster.exclusive"): {".mkdir", "open('a')"},
    ("localdb.py", "Cluster.create"): {".mkdir", "os.chown", ".write_text", ".chmod", ".unlink", "open('a')"},
    ("localdb.py", "Cluster.update_settings"): {"open('a')"},
    ("localdb.py", "Cluster.start"): {".touch", "os.chown"},
    ("localdb.py", "Cluster.destroy"): {"shutil.rmtree", ".unlink", ".rmdir"},
    # The one write outside ZM_DB_HOME: run as root, the folders above it get o+x (traverse only, no
    # read) when the server user `postgres` could not otherwise reach its data directory.
    ("localdb.py", "_grant_traverse"): {"os.chmod"},
    # The local model server: its pid file and log, inside ZM_MODEL_HOME (default .zm/model).
    ("localmodel.py", "start"): {".mkdir", "open('ab')", ".write_text", ".unlink"},
    ("localmodel.py", "stop"): {".unlink"},
}


def writes(path: Path) -> dict[tuple[str, str], set[str]]:
    """(module, enclosing function) -> the writing calls in it."""
    found: dict[tuple[str, str], set[str]] = {}
    scope: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node):
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        visit_AsyncFunctionDef = visit_FunctionDef
        visit_ClassDef = visit_FunctionDef

        def visit_Call(self, node):
            call, what = node.func, None
            if isinstance(call, ast.Name) and call.id == "open":
                given = (
                    node.args[1]
                    if len(node.args) > 1
                    else next((k.value for k in node.keywords if k.arg == "mode"), None)
                )
                mode = given.value if isinstance(given, ast.Constant) else "r"
                what = f"open({mode!r})" if any(flag in mode for flag in "wax+") else None
            elif isinstance(call, ast.Attribute):
                owner = call.value.id if isinstance(call.value, ast.Name) else None
                if (owner, call.attr) in WRITE_FUNCTIONS:
                    what = f"{owner}.{call.attr}"
                elif call.attr in WRITE_METHODS and owner not in ("os", "shutil"):
                    what = f".{call.attr}"
            if what:
                found.setdefault((path.name, ".".join(scope)), set()).add(what)
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text()))
    return found


def test_every_writer_in_the_package_is_one_whose_folder_is_known():
    found: dict[tuple[str, str], set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found |= writes(path)
    unlisted = {where: calls for where, calls in found.items() if not calls <= WRITERS.get(where, set())}
    assert not unlisted, f"writers whose folder nobody has checked (list them in WRITERS, and test them): {unlisted}"
    assert found.keys() == WRITERS.keys(), f"listed writers that no longer write: {WRITERS.keys() - found.keys()}"


def test_a_new_writer_is_found(tmp_path):
    module = tmp_path / "report.py"
    module.write_text(
        "from pathlib import Path\n"
        "def save(text):\n"
        "    Path('report.txt').write_text(text)\n"
        "    with open('log', mode='a') as log:\n"
        "        log.write(text)\n"
        "    return text.replace('a', 'b')\n"
    )
    assert writes(module) == {("report.py", "save"): {".write_text", "open('a')"}}
