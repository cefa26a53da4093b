"""Acting as a user on a direct connection, exactly as PostgREST does for each request.

PostgREST connects as `authenticator`, then per request sets the transaction-local `role` and
`request.jwt.claims` from the verified token. Everything after that (RLS, auth.uid()) behaves as it
would behind the Data API.
"""

from __future__ import annotations

import json
import uuid

import psycopg

from zm_roi.queries import query


def claims_for(user_id: uuid.UUID | str, email: str | None = None) -> dict:
    """The claims Supabase Auth puts in an access token for a signed-in user."""
    claims = {"sub": str(user_id), "role": "authenticated", "aud": "authenticated"}
    if email:
        claims["email"] = email
    return claims


def act_as(conn: psycopg.Connection, claims: dict, path: str = "/rpc") -> None:
    """Switch the current transaction to the claims' role and identity (transaction-local)."""
    conn.execute(
        query("act_as_user"),
        {"role": claims.get("role", "anon"), "claims": json.dumps(claims), "path": path},
    )
