"""Settings from the environment, read in one place."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from zm_roi.errors import UserError

EXTRACTORS = ("llm", "deterministic")
DEFAULT_PORT = 54322
# ZM_WORKER_CONCURRENCY when unset: model calls one worker process keeps in flight.
DEFAULT_WORKER_CONCURRENCY = 8
DEFAULT_OPERATOR_EMAIL = "operator@zm-roi.invalid"


@dataclass(frozen=True)
class Settings:
    # ZM_EXTRACTOR: the mode to write into roi.settings, or None. The mode lives in the database
    # alone: a database built by the migrations starts in the column default (`llm`), a new embedded
    # one in localdb.EMBEDDED_FIRST_MODE; nothing here holds a third default.
    extractor: str | None
    db_url: str | None
    db_port: int
    db_home: Path | None
    supabase_url: str | None
    supabase_anon_key: str | None
    access_token: str | None
    jwt_secret: str | None
    generation_model: str
    judge_model: str
    worker_db_url: str | None = None
    embedder_db_url: str | None = None
    worker_poll_seconds: float = 5.0
    # Model calls one worker process keeps in flight (each on its own connection and row).
    worker_concurrency: int = DEFAULT_WORKER_CONCURRENCY
    # Bounds each call of `zm-roi judge-check`. The worker's calls are bounded by the lease of the row
    # they serve instead (roi.settings.lease_duration; worker.call_timeout).
    model_timeout_seconds: float = 90.0
    # Encrypts owners' own provider keys at rest; never printed.
    key_encryption_key: str | None = field(default=None, repr=False)
    # The auth user `zm-roi judge-check` meters its calls to (created on first use): the operator's own
    # account, never an owner whose corpus is measured. `.invalid` is reserved (RFC 2606): no real inbox.
    operator_email: str = DEFAULT_OPERATOR_EMAIL
    # A self-hosted model's context window (ZM_MODEL_CONTEXT_TOKENS; None: unknown) and the form in which
    # its server takes a JSON schema (ZM_MODEL_SCHEMA): see llm.Endpoint.
    model_context_tokens: int | None = None
    model_schema: str = "off"


def _positive_number(env: dict[str, str], name: str, default: float) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    # "inf" and "nan" parse as floats but are no timeout at all.
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{name} must be a positive number of seconds, not {text!r}")
    return value


def _positive_integer(env: dict[str, str], name: str, default: int, most: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or not 0 < int(text) <= most:
        raise UserError(f"{name} must be a whole number from 1 to {most}, not {text!r}")
    return int(text)


def load(environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    extractor = env.get("ZM_EXTRACTOR", "").strip().lower() or None
    if extractor is not None and extractor not in EXTRACTORS:
        raise UserError(f"ZM_EXTRACTOR must be one of {', '.join(EXTRACTORS)}, not {extractor!r}")
    port_text = env.get("ZM_DB_PORT", "").strip() or str(DEFAULT_PORT)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UserError(f"ZM_DB_PORT must be a port number, not {port_text!r}")
    return Settings(
        extractor=extractor,
        db_url=env.get("ZM_DB_URL") or None,
        db_port=int(port_text),
        db_home=Path(env["ZM_DB_HOME"]) if env.get("ZM_DB_HOME") else None,
        supabase_url=env.get("SUPABASE_URL") or None,
        supabase_anon_key=env.get("SUPABASE_ANON_KEY") or None,
        access_token=env.get("ZM_ACCESS_TOKEN") or None,
        # Only needed with ZM_DB_URL: the embedded cluster keeps its own secret in its home.
        jwt_secret=env.get("ZM_JWT_SECRET") or None,
        generation_model=env.get("ZM_GENERATION_MODEL", "gpt-4o-mini"),
        judge_model=env.get("ZM_JUDGE_MODEL", "gpt-4o-mini"),
        worker_db_url=env.get("ZM_WORKER_DB_URL") or None,
        embedder_db_url=env.get("ZM_EMBEDDER_DB_URL") or None,
        worker_poll_seconds=_positive_number(env, "ZM_WORKER_POLL_SECONDS", 5.0),
        worker_concurrency=_positive_integer(env, "ZM_WORKER_CONCURRENCY", DEFAULT_WORKER_CONCURRENCY, most=64),
        model_timeout_seconds=_positive_number(env, "ZM_MODEL_TIMEOUT_SECONDS", 90.0),
        key_encryption_key=env.get("ZM_KEY_ENCRYPTION_KEY") or None,
        operator_email=env.get("ZM_OPERATOR_EMAIL", "").strip().lower() or DEFAULT_OPERATOR_EMAIL,
        model_context_tokens=(
            _positive_integer(env, "ZM_MODEL_CONTEXT_TOKENS", 0, most=10_000_000)
            if env.get("ZM_MODEL_CONTEXT_TOKENS", "").strip()
            else None
        ),
        model_schema=_model_schema(env),
    )


# The forms llm.SCHEMA_FORMS names (kept here too: settings imports nothing that loads litellm).
MODEL_SCHEMA_FORMS = ("off", "json_object", "json_schema")


def _model_schema(env: dict[str, str]) -> str:
    text = env.get("ZM_MODEL_SCHEMA", "").strip().lower() or "off"
    if text not in MODEL_SCHEMA_FORMS:
        raise UserError(f"ZM_MODEL_SCHEMA must be one of {', '.join(MODEL_SCHEMA_FORMS)}, not {text!r}")
    return text
