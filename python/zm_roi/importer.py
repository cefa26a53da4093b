"""`zm-roi import`: load a JSONL file of memories for one user, all or nothing.

An import never changes who can see what behind the user's back: it refuses to make them a member of
an existing project or team unless asked (`--join`), and says so when it creates a user, project or
team. Importing the same file again adds nothing: identical memories are skipped and counted."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

import psycopg
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zm_roi import embeddings, localdb
from zm_roi.errors import UserError, nearest_name
from zm_roi.queries import query

MAX_TITLE = 1_000
MAX_BODY = 1_048_576


class MemoryLine(BaseModel):
    """One line of an import file."""

    model_config = ConfigDict(extra="ignore")

    title: str = Field(max_length=MAX_TITLE)
    body: str = Field(max_length=MAX_BODY)
    kind: Literal["decision", "gotcha", "convention", "episode"]
    scope: Literal["personal", "project", "team"] | None = None
    created_at: datetime | None = None
    invalidated_at: datetime | None = None

    @field_validator("title", "body")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        return value


# Enough to catch a typo or a blank, not a full RFC 5322 parser: something@domain.tld, no spaces.
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalize_email(email: str) -> str:
    """Trimmed and lower-cased, as Supabase Auth stores it; an empty or malformed address is refused."""
    normalized = email.strip().lower()
    if not EMAIL.match(normalized):
        raise UserError(f"{email!r} is not an email address (expected name@example.com)")
    return normalized


@dataclass(frozen=True)
class Target:
    """Where the memories go: the user's personal layer, a project, or a team. `join` lets the import
    make the user a member of an existing project or team (which shows them its memories)."""

    email: str
    project: str | None = None
    team: str | None = None
    join: bool = False


@dataclass
class ImportResult:
    """What an import did: memories written, identical ones skipped, and what it created or joined."""

    imported: int = 0
    skipped: int = 0
    notes: list[str] = field(default_factory=list)


def parse_file(path: Path) -> list[tuple[int, MemoryLine]]:
    """Every line validated before anything is written, with its line number; the first bad line stops
    the import. A UTF-8 byte order mark is accepted."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a JSONL file") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror})") from None
    memories = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            unknown = sorted(set(row) - set(MemoryLine.model_fields)) if isinstance(row, dict) else []
            if unknown:
                known = ", ".join(MemoryLine.model_fields)
                raise UserError(f"{path}:{number}: unknown field '{unknown[0]}' (a line has only: {known})")
            memories.append((number, MemoryLine.model_validate(row)))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        except ValidationError as exc:
            raise UserError(f"{path}:{number}: {_first_problem(exc)}") from None
    if not memories:
        raise UserError(f"{path}: no memories in the file")
    return memories


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field_name = ".".join(str(part) for part in error["loc"]) or "line"
    if error["type"] == "missing":
        return f"missing field '{field_name}'"
    if error["type"] == "model_type":
        return "each line must be a JSON object"
    return f"field '{field_name}': {error['msg']}"


def scoped(lines: Iterable[tuple[str, MemoryLine]], target: Target) -> list[tuple[str, MemoryLine]]:
    """Each (where, line) as (scope, line). A line's scope must agree with where the import points;
    the error names `where` (the file and line number, for an import file)."""
    default = "project" if target.project else "team" if target.team else "personal"
    result = []
    for where, line in lines:
        scope = line.scope or default
        if scope == "project" and not target.project:
            raise UserError(f"{where}: scope 'project' needs --project NAME")
        if scope == "team" and not target.team:
            raise UserError(f"{where}: scope 'team' needs --team NAME")
        result.append((scope, line))
    return result


def import_memories(db_url: str, path: Path, target: Target) -> ImportResult:
    """Validate the whole file (names, email, every line and its scope), then write it in one transaction."""
    target = checked_target(target)
    memories = scoped(((f"{path}:{number}", line) for number, line in parse_file(path)), target)
    with localdb.connect(db_url) as conn, conn.transaction():
        return write_memories(conn, memories, target)


def checked_target(target: Target) -> Target:
    """The target with a normalized email and trimmed names; blank names are refused."""
    names = {}
    for option in ("project", "team"):
        value = getattr(target, option)
        if value is not None:
            if not value.strip():
                raise UserError(f"--{option} must name a {option}, not be blank")
            names[option] = value.strip()
    return Target(normalize_email(target.email), join=target.join, **names)


def insert_memories(conn: psycopg.Connection, memories: list[MemoryLine], target: Target) -> int:
    """Write memories for `target` on an open transaction (tests and the demo); returns how many were new."""
    target = checked_target(target)
    numbered = ((f"memory {number}", line) for number, line in enumerate(memories, start=1))
    return write_memories(conn, scoped(numbered, target), target).imported


def write_memories(conn: psycopg.Connection, memories: list[tuple[str, MemoryLine]], target: Target) -> ImportResult:
    """Find or create the user, project or team (membership only when new or asked for), then insert
    the (scope, line) memories, scopes checked by `scoped()`, that are not already in that layer."""
    result = ImportResult()
    found = conn.execute(query("user_id_by_email"), {"email": target.email}).fetchone()
    if found is None:
        user_id = conn.execute(query("create_user"), {"email": target.email}).fetchone()[0]
        result.notes.append(f"created user {target.email}")
    else:
        user_id = found[0]
    team_id = project_id = None
    if target.team:
        team_id = _place(conn, "team", target.team, user_id, target, result)
    if target.project:
        project_id = _place(conn, "project", target.project, user_id, target, result)
    vectors, model = _embed(conn, user_id, [line for _, line in memories])
    with conn.cursor() as cur:
        for (scope, line), vector in zip(memories, vectors, strict=True):
            cur.execute(
                query("insert_memory"),
                {
                    "author_id": user_id,
                    "scope": scope,
                    "project_id": project_id if scope == "project" else None,
                    "team_id": team_id if scope == "team" else None,
                    "kind": line.kind,
                    "title": line.title,
                    "body": line.body,
                    "created_at": line.created_at,
                    "invalidated_at": line.invalidated_at,
                    "embedding": vector,
                    "embedding_model": model if vector else None,
                },
            )
            if cur.rowcount:
                result.imported += 1
            else:
                result.skipped += 1
    return result


def _place(conn: psycopg.Connection, kind: str, name: str, user_id, target: Target, result: ImportResult):
    """The id of project/team `name`, created (user as first member) when absent. The user joins an
    existing one only with `target.join`; otherwise a non-member is refused."""
    found = conn.execute(query(f"{kind}_id_by_name"), {"name": name}).fetchone()
    if found is None:
        others = [row[0] for row in conn.execute(query(f"{kind}_names")).fetchall()]
        near = nearest_name(name, others)
        place_id = conn.execute(query(f"create_{kind}"), {"name": name}).fetchone()[0]
        conn.execute(query(f"add_{kind}_member"), {f"{kind}_id": place_id, "user_id": user_id})
        hint = f" (did you mean '{near}'? it exists already)" if near else ""
        result.notes.append(f"created {kind} '{name}' with {target.email} as its member{hint}")
        return place_id
    place_id = found[0]
    member = conn.execute(query(f"is_{kind}_member"), {f"{kind}_id": place_id, "user_id": user_id}).fetchone()[0]
    if not member:
        if not target.join:
            raise UserError(
                f"{target.email} is not a member of {kind} '{name}': importing would make them one and show them "
                f"its memories; pass --join if that is intended"
            )
        conn.execute(query(f"add_{kind}_member"), {f"{kind}_id": place_id, "user_id": user_id})
        result.notes.append(f"{target.email} joined {kind} '{name}' (--join): they now see its memories")
    return place_id


def _embed(conn: psycopg.Connection, user_id, memories: list[MemoryLine]) -> tuple[list[str | None], str | None]:
    """Embeddings for the memories being imported (one metered call), or none when embeddings are off."""
    model = embeddings.configured_model()
    if model is None or not memories:
        return [None] * len(memories), None
    embedded = embeddings.embed(
        [embeddings.memory_text(line.title, line.body) for line in memories], as_query=False, model=model
    )
    conn.execute(
        query("record_embedding_usage"),
        {"owner_id": user_id, "model": model, "probe_id": None, "input_tokens": embedded.input_tokens},
    )
    return [embeddings.literal(v) for v in embedded.vectors], model
