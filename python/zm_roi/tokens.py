"""Access tokens for the embedded database: mint them like Supabase Auth, verify them like PostgREST.

Supabase Auth signs a user's access token; PostgREST checks signature, expiry and audience before it
lets the request touch the database. Locally there is neither, so `zm-roi token` mints an HS256 token
with the cluster's JWT secret and the local transport verifies it the same way, before any SQL.
"""

from __future__ import annotations

import time
import uuid

import jwt

from zm_roi.errors import AuthError
from zm_roi.identity import claims_for

ALGORITHM = "HS256"
AUDIENCE = "authenticated"
DEFAULT_TTL = 3600
MINT_HINT = "mint a local one with `zm-roi token --user EMAIL`"


def mint(secret: str, user_id: uuid.UUID | str, email: str | None = None, ttl: int = DEFAULT_TTL) -> str:
    """A signed access token with the claims Supabase Auth gives a signed-in user."""
    now = int(time.time())
    claims = claims_for(user_id, email) | {"iat": now, "exp": now + ttl}
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def verify(token: str | None, secret: str) -> dict:
    """The token's claims once signature, expiry, audience, subject and role check out; else AuthError."""
    if not token or not token.strip():
        raise AuthError(f"no access token: set ZM_ACCESS_TOKEN to the user's token ({MINT_HINT})")
    try:
        claims = jwt.decode(
            token.strip(),
            secret,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            options={"require": ["exp", "sub", "role", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise AuthError(f"the access token has expired: sign in again ({MINT_HINT})") from None
    except jwt.InvalidSignatureError:
        raise AuthError(
            "the access token's signature does not match this database's JWT secret "
            f"(was it minted for another database?): {MINT_HINT}"
        ) from None
    except jwt.InvalidAlgorithmError:
        raise AuthError(f"the access token is not signed with {ALGORITHM}: {MINT_HINT}") from None
    except jwt.MissingRequiredClaimError as exc:
        raise AuthError(f"the access token has no '{exc.claim}' claim: {MINT_HINT}") from None
    except jwt.InvalidAudienceError:
        raise AuthError(f"the access token is not for signed-in users (audience must be '{AUDIENCE}')") from None
    except jwt.ImmatureSignatureError:
        raise AuthError("the access token is not valid yet (check the clock)") from None
    except jwt.InvalidTokenError as exc:
        raise AuthError(f"the access token is not a valid JWT ({exc}): {MINT_HINT}") from None
    try:
        uuid.UUID(str(claims["sub"]))
    except ValueError:
        raise AuthError("the access token's subject ('sub') is not a user id") from None
    if claims["role"] != "authenticated":
        raise AuthError(f"the access token's role is {claims['role']!r}, not 'authenticated': sign in as a user")
    return claims


def peek(token: str | None) -> dict:
    """Shape and expiry of a token the server will verify itself (Supabase): fail early and clearly.

    The signature is not checked here: on Supabase the key may be asymmetric and PostgREST is the judge.
    """
    if not token or not token.strip():
        raise AuthError("no access token: set ZM_ACCESS_TOKEN to the signed-in user's access token")
    try:
        return jwt.decode(
            token.strip(),
            options={"verify_signature": False, "verify_exp": True, "verify_aud": False, "require": ["exp", "sub"]},
        )
    except jwt.ExpiredSignatureError:
        raise AuthError("the access token has expired: sign in again and set ZM_ACCESS_TOKEN") from None
    except jwt.MissingRequiredClaimError as exc:
        raise AuthError(f"the access token has no '{exc.claim}' claim") from None
    except jwt.InvalidTokenError as exc:
        raise AuthError(f"the access token is not a valid JWT ({exc})") from None
