"""Errors a user can act on: the CLI prints them as one line, never as a traceback.

`database_error()` is the one place that says what a database error means; the CLI, the MCP server,
the dashboard and the local transport all go through it (`with database_errors(): …`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import psycopg


class UserError(Exception):
    """Something the user can fix; the message says what to do."""


def nearest_name(name: str, names: Sequence[str]) -> str | None:
    """The existing name a mistyped one most likely meant (same letters in another case first), for a
    "did you mean" in an error message; None when nothing is close."""
    same = [n for n in names if n.lower() == name.strip().lower()]
    near = same or difflib.get_close_matches(name, names, n=1)
    return near[0] if near else None


class AuthError(UserError):
    """The access token is missing, malformed, expired, wrongly signed or names no user.

    Raised before any SQL runs, so a bad token never reaches the database as anything but a refusal.
    """


RESTART = "restart it: `zm-roi db up` for the embedded database (the data is kept), or restart your PostgreSQL service"
MIGRATE = "apply the migrations: `zm-roi db up` for the embedded database, `supabase db push` for a project"


# The setting that gave the URL in use, for messages that tell the user what to fix: ZM_DB_URL unless
# a command reads its own (ZM_WORKER_DB_URL, ZM_EMBEDDER_DB_URL) and says so with `url_from()`.
URL_SETTING: ContextVar[str] = ContextVar("URL_SETTING", default="ZM_DB_URL")


def url_from(setting: str) -> None:
    """Name the setting this command's database URL came from, for every error message after it."""
    URL_SETTING.set(setting)


def database_error(exc: psycopg.Error) -> UserError:
    """What a database error means, as a UserError whose one line says what to do about it."""
    diag = getattr(exc, "diag", None)
    message = (diag.message_primary if diag and diag.message_primary else "") or _last_line(exc)
    state = exc.sqlstate or ""
    if "could not load library" in message:
        # apt upgraded PostgreSQL under a running server: its old binary cannot load the new libraries.
        return UserError(f"the PostgreSQL server predates the installed binaries ({message}); {RESTART}")
    if state == "28000":
        return AuthError(message)
    if state == "28P01" or "password authentication failed" in message:
        return UserError(
            f"the database refused the login ({message}): check the user and password in {URL_SETTING.get()}"
        )
    if not state and isinstance(exc, psycopg.OperationalError):
        return UserError(_unreachable(exc, message))
    if not state and _from_connection_string(exc):
        return UserError(f"the database connection settings are not usable ({message}): check {URL_SETTING.get()}")
    if not state:
        # psycopg's own refusal of a call (a wrong parameter count, a closed cursor): not the settings.
        return UserError(f"the database call failed: {message}")
    if state == "54001":
        return UserError(f"the request is too large for the database to parse ({message}): make it shorter")
    if state == "57014":
        return UserError(f"the database cancelled the statement ({message}): it ran past a timeout")
    if state.startswith("57P"):
        return UserError(f"the database is shutting down or starting up ({message}): try again, or {RESTART}")
    if state.startswith("53"):
        return UserError(f"the database is out of resources ({message}): free some, or raise its limits")
    if state in ("3F000", "42P01", "42883", "42703"):
        return UserError(f"the database lacks part of the zm-roi schema ({message}): {MIGRATE}")
    if state == "42501":
        return UserError(f"the database refused access ({message})")
    if state.startswith("22"):
        return UserError(f"the database refused a value ({message})")
    if state.startswith("23"):
        return UserError(f"the database refused the change ({message})")
    return UserError(f"the database refused the call: {message} (SQLSTATE {state})")


@contextmanager
def database_errors() -> Iterator[None]:
    """Database failures inside the block leave it as the UserError `database_error()` makes."""
    try:
        yield
    except psycopg.Error as exc:
        raise database_error(exc) from None


def _unreachable(exc: psycopg.OperationalError, message: str) -> str:
    """What a failed connection means. `zm-roi db up` only manages the embedded database, which always
    listens on 127.0.0.1: it is the advice for a local address alone, never for a missing database
    (db up makes `postgres` only) or another host."""
    pgconn = exc.pgconn
    host, port, dbname = (
        ((value or b"").decode(errors="replace") for value in (pgconn.host, pgconn.port, pgconn.db))
        if pgconn is not None
        else ("", "", "")
    )
    where = f" at {host}:{port}" if host else ""
    if dbname and f'database "{dbname}" does not exist' in message:
        return (
            f"the database server{where} has no database {dbname!r} ({message}): create it, "
            f"or name an existing database in {URL_SETTING.get()}"
        )
    if host in ("", "127.0.0.1", "localhost", "::1"):
        return (
            f"cannot reach the database{where} ({message}); is it up? For the embedded database run "
            f"`zm-roi db up`; otherwise start your PostgreSQL or fix {URL_SETTING.get()}"
        )
    return (
        f"cannot reach the database{where} ({message}): check the host and port in {URL_SETTING.get()}, and that "
        "the server runs and accepts connections from this machine"
    )


def _from_connection_string(exc: psycopg.Error) -> bool:
    """Whether psycopg raised `exc` while reading a connection string. psycopg raises ProgrammingError
    both for a malformed URL (from psycopg.conninfo, as connect() parses it) and for a misused call."""
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_globals.get("__name__") == "psycopg.conninfo":
            return True
        frame = frame.tb_next
    return False


def _last_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[-1].strip() if lines else type(exc).__name__
