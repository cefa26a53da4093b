"""`zm-roi import`: load a JSONL file of memories for one user.

The whole file is read and validated first (every line, its scope and its timestamps): a bad line
stops the import, naming its line, before anything is written. Then the memories are written in
batches, each committed at once, so recall's lexical leg finds them while the rest is written; then
they are embedded in batches of the model's batch API (`backfill.embed_memories`), a progress line
showing rows, rate and time left. Importing the same file again adds nothing: identical memories are
skipped and counted, so an interrupted import run again resumes where it stopped. Imports into one
layer take turns (a lock per layer), so concurrent imports of one file write each memory once.

An import never changes who can see what behind the user's back: it refuses to make them a member of
an existing project or team unless asked (`--join`), and says so when it creates a user, project or
team."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal
from uuid import UUID

import psycopg
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from zm_roi import backfill, embeddings, inputs, localdb
from zm_roi.errors import UserError, nearest_name
from zm_roi.progress import Progress
from zm_roi.queries import query

MAX_TITLE = 1_000
MAX_BODY = 1_048_576
# How far ahead of this machine's clock a timestamp may be (another machine's clock drifts).
CLOCK_SKEW = timedelta(minutes=5)
# Memories per insert statement and commit: each batch is searchable once committed; 500 real-text
# memories take well under a second, so the progress line moves and no transaction stays open long.
WRITE_BATCH = 500
BOM = b"\xef\xbb\xbf"


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

    @field_validator("created_at", "invalidated_at")
    @classmethod
    def not_in_the_future(cls, value: datetime | None) -> datetime | None:
        """A time without a zone is UTC. A memory from the future is a typo (2099 for 2029), and one
        invalidated in the future would be hidden from recall at once: both are refused."""
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if value > datetime.now(UTC) + CLOCK_SKEW:
            raise ValueError(f"{value.isoformat()} is in the future")
        return value

    @field_validator("invalidated_at")
    @classmethod
    def not_before_created(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        """A memory cannot be invalidated before it was created; without `created_at` it is created at
        the import, after any `invalidated_at` that passed the check above."""
        if value is None or "created_at" not in info.data:  # an invalid created_at is reported itself
            return value
        created = info.data["created_at"]
        if created is None:
            raise ValueError("needs created_at too (else the memory is created now, after it was invalidated)")
        if value < created:
            raise ValueError(f"{value.isoformat()} is before created_at ({created.isoformat()})")
        return value


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
    """What an import did: memories written, identical ones skipped, memories embedded, and what it
    created or joined."""

    imported: int = 0
    skipped: int = 0
    embedded: int = 0
    notes: list[str] = field(default_factory=list)


def parse_file(path: Path) -> list[tuple[int, MemoryLine]]:
    """Every line validated before anything is written, with its line number; the first bad line stops
    the import. Read as JSON Lines tools read it: a line ends at "\n" (a "\r" before it is dropped;
    U+2028 or U+0085 inside a string end nothing), blank lines are skipped, a UTF-8 byte order mark
    may open the file, and each line is decoded on its own so that invalid UTF-8 names its line."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a JSONL file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror})") from None
    with handle:
        memories = list(_lines(path, handle))
    if not memories:
        raise UserError(f"{path}: no memories in the file")
    return memories


def _lines(path: Path, handle) -> Iterator[tuple[int, MemoryLine]]:
    for number, raw in enumerate(handle, start=1):
        if number == 1:
            raw = raw.removeprefix(BOM)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(
                f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start + 1} of the line)"
            ) from None
        if not line.strip(" \t\r\n"):  # JSON's whitespace, not every Unicode space
            continue
        try:
            row = json.loads(line)
            unknown = sorted(set(row) - set(MemoryLine.model_fields)) if isinstance(row, dict) else []
            if unknown:
                known = ", ".join(MemoryLine.model_fields)
                raise UserError(f"{path}:{number}: unknown field '{unknown[0]}' (a line has only: {known})")
            yield number, MemoryLine.model_validate(row)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            # json.loads recurses once per level: a line nested ~1,000 deep exhausts Python's stack.
            raise UserError(
                f"{path}:{number}: nested too deeply to read (a memory line is one flat object of text fields)"
            ) from None
        except ValidationError as exc:
            raise UserError(f"{path}:{number}: {_first_problem(exc)}") from None


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


def import_memories(db_url: str, path: Path, target: Target, *, quiet: bool = False) -> ImportResult:
    """Validate the whole file (names, email, every line and its scope), then write it in committed
    batches and embed what it wrote (or found there without an embedding), with progress on stderr."""
    target = checked_target(target)
    memories = scoped(((f"{path}:{number}", line) for number, line in parse_file(path)), target)
    models = embeddings.configured_models()
    result = ImportResult()
    say = (lambda _: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    with localdb.connect(db_url, autocommit=True) as conn:
        with conn.transaction():
            place = _find_or_create(conn, target, result)
        with _layers_locked(conn, _layers(memories, place), session=True, say=say):
            ids = _write(conn, memories, place, result, quiet=quiet)
        if models:
            try:
                result.embedded = backfill.embed_every_leg(conn, models, ids, quiet=quiet)
            except UserError as exc:
                raise UserError(
                    f"{exc}; the {result.imported + result.skipped} memories of {path} are written and searchable: "
                    "run the same import again (or `zm-roi embed`) to embed what is left"
                ) from None
            result.notes += stale_embeddings(conn, _layers(memories, place), models)
    return result


def stale_embeddings(conn: psycopg.Connection, layers: list[tuple[str, str]], models: dict[str, str]) -> list[str]:
    """A hint per leg when the layers just written into hold vectors of another model than the one in
    force (ZM_EMBEDDING_MODEL changed since they were embedded): recall leaves that leg out there."""
    from zm_roi.recall import stale_hint

    stale: dict[str, list[tuple[str, int]]] = {}
    for scope, layer_id in layers:
        params = {"scope": scope, "layer_id": layer_id, **{leg: models.get(leg) for leg in embeddings.LEGS}}
        for leg, model, count in conn.execute(query("stale_embedding_models_in_layer"), params).fetchall():
            stale.setdefault(leg, []).append((model, count))
    consequence = "`zm-roi recall` leaves that semantic leg out here"
    return [stale_hint(held, models[leg], consequence) for leg, held in stale.items()]


def checked_target(target: Target) -> Target:
    """The target with a normalized email and trimmed names; blank names are refused."""
    places = {}
    for option in ("project", "team"):
        value = getattr(target, option)
        if value is not None:
            places[option] = inputs.name(value, f"--{option}")
    return Target(inputs.email(target.email), join=target.join, **places)


def insert_memories(conn: psycopg.Connection, memories: list[MemoryLine], target: Target) -> int:
    """Write and embed memories for `target` on an open transaction (tests and the demo); returns how
    many were new."""
    target = checked_target(target)
    scoped_lines = scoped(((f"memory {number}", line) for number, line in enumerate(memories, start=1)), target)
    result = ImportResult()
    place = _find_or_create(conn, target, result)
    with _layers_locked(conn, _layers(scoped_lines, place), session=False):
        ids = _write(conn, scoped_lines, place, result, quiet=True)
    backfill.embed_every_leg(conn, embeddings.configured_models(), ids, quiet=True)
    return result.imported


@dataclass(frozen=True)
class Place:
    """Where an import writes: the user's id and the project's or team's (at most one of the two)."""

    user_id: UUID
    project_id: UUID | None = None
    team_id: UUID | None = None

    def layer(self, scope: str) -> tuple[str, str]:
        """(scope, id of its layer): the author for personal memories, else the project or team."""
        layer_id = {"personal": self.user_id, "project": self.project_id, "team": self.team_id}[scope]
        return scope, str(layer_id)


def _find_or_create(conn: psycopg.Connection, target: Target, result: ImportResult) -> Place:
    """The user, and the project or team, found or created (membership only when new or asked for).
    One import at a time does this (a transaction lock), so parallel first imports create each once."""
    conn.execute(query("lock_import_setup"))
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
    return Place(user_id, project_id, team_id)


def _layers(memories: list[tuple[str, MemoryLine]], place: Place) -> list[tuple[str, str]]:
    return sorted({place.layer(scope) for scope, _ in memories})


@contextmanager
def _layers_locked(
    conn: psycopg.Connection, layers: list[tuple[str, str]], *, session: bool, say: Callable[[str], None] = print
) -> Iterator[None]:
    """Hold each layer's import lock (in one order, so two imports never wait for each other): for the
    session (`session`, an import that commits as it goes) or until the open transaction ends."""
    held = []
    try:
        for scope, layer_id in layers:
            params = {"scope": scope, "layer_id": layer_id}
            if not session:
                conn.execute(query("lock_import_layer_xact"), params)
                continue
            # Session locks count: taken twice, one unlock would leave the layer held.
            if not conn.execute(query("try_lock_import_layer"), params).fetchone()[0]:
                say(f"waiting for another import into this {scope} layer to finish")
                conn.execute(query("lock_import_layer"), params)
            held.append(params)
        yield
    finally:
        for params in held:
            if not conn.broken:
                conn.execute(query("unlock_import_layer"), params)


def _digest(kind: str, title: str, body: str) -> tuple[str, bytes, bytes]:
    """What `memories_in_layer` returns for a memory: its kind and the SHA-256 of its title and body."""
    return kind, hashlib.sha256(title.encode()).digest(), hashlib.sha256(body.encode()).digest()


def _write(
    conn: psycopg.Connection, memories: list[tuple[str, MemoryLine]], place: Place, result: ImportResult, *, quiet: bool
) -> list[UUID]:
    """Insert the (scope, line) memories, scopes checked by `scoped()`, that their layer does not hold
    yet (nor an earlier line of the file); the caller holds the layers' locks. Returns the ids of the
    memories written and of those found already there, which the caller embeds."""
    seen: dict[tuple, UUID | None] = {}
    for scope, layer_id in _layers(memories, place):
        for memory_id, *digest in conn.execute(query("memories_in_layer"), {"scope": scope, "layer_id": layer_id}):
            seen[(scope, layer_id, *digest)] = memory_id
    ids, fresh = [], []
    for scope, line in memories:
        key = (*place.layer(scope), *_digest(line.kind, line.title, line.body))
        if key in seen:
            result.skipped += 1
            if seen[key] is not None:
                ids.append(seen[key])
        else:
            seen[key] = None
            fresh.append((scope, line))
    progress = Progress("importing", len(fresh), quiet=quiet or not fresh)
    try:
        for start in range(0, len(fresh), WRITE_BATCH):
            batch = fresh[start : start + WRITE_BATCH]
            with conn.transaction():
                written = conn.execute(query("insert_memories"), _columns(batch, place)).fetchall()
            ids += [row[0] for row in written]
            result.imported += len(written)
            progress.advance(len(written))
    finally:
        progress.close()
    return ids


def _columns(batch: list[tuple[str, MemoryLine]], place: Place) -> dict:
    """A batch as the parallel arrays `insert_memories` unnests."""
    return {
        "author_id": place.user_id,
        "scope": [scope for scope, _ in batch],
        "project_id": [place.project_id if scope == "project" else None for scope, _ in batch],
        "team_id": [place.team_id if scope == "team" else None for scope, _ in batch],
        "kind": [line.kind for _, line in batch],
        "title": [line.title for _, line in batch],
        "body": [line.body for _, line in batch],
        "created_at": [line.created_at for _, line in batch],
        "invalidated_at": [line.invalidated_at for _, line in batch],
    }


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
