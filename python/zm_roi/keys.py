"""`zm-roi set-key`: keep an owner's own provider key, so the worker runs that owner's model calls on
it (and marks them as such). The key is encrypted in the database under ZM_KEY_ENCRYPTION_KEY, which
the worker needs too; the database never holds the passphrase."""

from __future__ import annotations

import difflib
import getpass
import sys

import psycopg

from zm_roi import inputs
from zm_roi.errors import UserError
from zm_roi.llm import litellm
from zm_roi.queries import query


def known_providers() -> list[str]:
    """The provider names litellm knows (openai, anthropic, …): a key stored under another name
    would never be used, since the worker looks keys up by litellm's name for the model."""
    return sorted(str(getattr(p, "value", p)) for p in litellm.provider_list)


def check_provider(provider: str) -> None:
    """A clear error, with a suggestion, for a provider name litellm does not know."""
    known = known_providers()
    if provider in known:
        return
    near = difflib.get_close_matches(provider.lower(), known, n=1)
    hint = f" (did you mean {near[0]}?)" if near else " such as openai or anthropic"
    raise UserError(f"--provider must be a provider litellm knows{hint}, not {provider!r}")


def read_key(prompt: str) -> str:
    """The key from standard input (piped), or typed without echo at a terminal."""
    text = getpass.getpass(prompt) if sys.stdin.isatty() else sys.stdin.read()
    return text.strip()


def store_key(db_url: str, email: str, provider: str, api_key: str, passphrase: str | None) -> None:
    """Store (or replace) `email`'s key for `provider`, as litellm names providers (openai, anthropic…)."""
    if not passphrase:
        raise UserError("set ZM_KEY_ENCRYPTION_KEY: keys are stored encrypted with it (the worker needs it too)")
    check_provider(provider)
    if not api_key or any(ch.isspace() for ch in api_key):
        raise UserError("give the key on standard input: one key, no spaces")
    email = inputs.email(email)
    with psycopg.connect(db_url) as conn, conn.transaction():
        row = conn.execute(query("user_id_by_email"), {"email": email}).fetchone()
        if row is None:
            raise UserError(f"no user {email}")
        conn.execute(
            query("store_provider_key"),
            {"owner_id": row[0], "provider": provider, "api_key": api_key, "passphrase": passphrase},
        )
