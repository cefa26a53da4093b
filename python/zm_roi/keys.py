"""`zm-roi set-key`: keep an owner's own provider key, so the worker runs that owner's model calls on
it (and marks them as such). The key is encrypted in the database under ZM_KEY_ENCRYPTION_KEY, which
the worker needs too; the database never holds the passphrase."""

from __future__ import annotations

import getpass
import re
import sys

import psycopg

from zm_roi.errors import UserError
from zm_roi.queries import query

PROVIDER = re.compile(r"^[a-z0-9_]+$")


def read_key(prompt: str) -> str:
    """The key from standard input (piped), or typed without echo at a terminal."""
    text = getpass.getpass(prompt) if sys.stdin.isatty() else sys.stdin.read()
    return text.strip()


def store_key(db_url: str, email: str, provider: str, api_key: str, passphrase: str | None) -> None:
    """Store (or replace) `email`'s key for `provider`, as litellm names providers (openai, anthropic…)."""
    if not passphrase:
        raise UserError("set ZM_KEY_ENCRYPTION_KEY: keys are stored encrypted with it (the worker needs it too)")
    if not PROVIDER.match(provider):
        raise UserError(f"--provider must be a litellm provider name such as openai, not {provider!r}")
    if not api_key or any(ch.isspace() for ch in api_key):
        raise UserError("give the key on standard input: one key, no spaces")
    with psycopg.connect(db_url) as conn, conn.transaction():
        row = conn.execute(query("user_id_by_email"), {"email": email}).fetchone()
        if row is None:
            raise UserError(f"no user {email}")
        conn.execute(
            query("store_provider_key"),
            {"owner_id": row[0], "provider": provider, "api_key": api_key, "passphrase": passphrase},
        )
