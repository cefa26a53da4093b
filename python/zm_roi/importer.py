"""`zm-roi import`: load a JSONL file of memories for one user, all or nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import psycopg
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zm_roi import embeddings
from zm_roi.errors import UserError
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


@dataclass(frozen=True)
class Target:
    """Where the memories go: the user's personal layer, a project, or a team."""

    email: str
    project: str | None = None
    team: str | None = None


def parse_file(path: Path) -> list[MemoryLine]:
    """Every line validated before anything is written; the first bad line stops the import."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    memories = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            memories.append(MemoryLine.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        except ValidationError as exc:
            raise UserError(f"{path}:{number}: {_first_problem(exc)}") from None
    if not memories:
        raise UserError(f"{path}: no memories in the file")
    return memories


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "line"
    if error["type"] == "missing":
        return f"missing field '{field}'"
    if error["type"] == "model_type":
        return "each line must be a JSON object"
    return f"field '{field}': {error['msg']}"


def scope_for(line: MemoryLine, target: Target) -> str:
    """The line's scope, which must agree with where the import points."""
    default = "project" if target.project else "team" if target.team else "personal"
    scope = line.scope or default
    if scope == "project" and not target.project:
        raise ValueError("scope 'project' needs --project NAME")
    if scope == "team" and not target.team:
        raise ValueError("scope 'team' needs --team NAME")
    return scope


def import_memories(db_url: str, path: Path, target: Target) -> int:
    """Validate the whole file, then write it in one transaction."""
    memories = parse_file(path)
    try:
        with psycopg.connect(db_url) as conn, conn.transaction():
            return insert_memories(conn, memories, target)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None


def insert_memories(conn: psycopg.Connection, memories: list[MemoryLine], target: Target) -> int:
    """Create the user, team or project when absent (with membership), then insert the memories."""
    scopes = []
    for number, line in enumerate(memories, start=1):
        try:
            scopes.append(scope_for(line, target))
        except ValueError as exc:
            raise ValueError(f"memory {number}: {exc}") from None
    user_id = conn.execute(query("ensure_user"), {"email": target.email}).fetchone()[0]
    project_id = team_id = None
    if target.team:
        team_id = conn.execute(query("ensure_team"), {"name": target.team}).fetchone()[0]
        conn.execute(query("add_team_member"), {"team_id": team_id, "user_id": user_id})
    if target.project:
        project_id = conn.execute(query("ensure_project"), {"name": target.project, "team_id": None}).fetchone()[0]
        conn.execute(query("add_project_member"), {"project_id": project_id, "user_id": user_id})
    vectors, model = _embed(conn, user_id, memories)
    with conn.cursor() as cur:
        cur.executemany(
            query("insert_memory"),
            [
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
                }
                for line, scope, vector in zip(memories, scopes, vectors, strict=True)
            ],
        )
    return len(memories)


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
