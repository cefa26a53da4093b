"""Recall as a member would see it: the query runs under the user's identity, RLS applied, through the
recall function the benchmark is configured to call, with the question embedded as the benchmark's
questions are (the embedding call is metered for that user)."""

from __future__ import annotations

import textwrap

import psycopg

from zm_roi import embeddings, inputs, localdb
from zm_roi.errors import UserError, nearest_name
from zm_roi.identity import act_as, claims_for
from zm_roi.queries import query


def recall_as(
    db_url: str,
    question: str,
    email: str,
    project: str | None,
    limit: int,
    team: str | None = None,
    notes: list[str] | None = None,
) -> list[tuple]:
    with localdb.connect(db_url) as conn, conn.transaction():
        return recall_in(conn, question, email, project, limit, team, notes)


def _pin(conn: psycopg.Connection, what: str, name: str | None):
    """The id of the project or team named `name` (None for no pin), refused with the nearest name."""
    if name is None:
        return None
    name = inputs.name(name, f"--{what}")
    found = conn.execute(query(f"{what}_id_by_name"), {"name": name}).fetchone()
    if found is None:
        existing = [known for (known,) in conn.execute(query(f"{what}_names")).fetchall()]
        near = nearest_name(name, existing)
        raise UserError(f"no {what} named {name!r}" + (f"; did you mean {near!r}?" if near else ""))
    return found[0]


def recall_in(
    conn: psycopg.Connection,
    question: str,
    email: str,
    project: str | None,
    limit: int,
    team: str | None = None,
    notes: list[str] | None = None,
) -> list[tuple]:
    """recall_as() inside the caller's transaction on a superuser connection, which is back in its own
    role afterwards (the demo measures a recall function it sets for one transaction alone). Pinned to
    `project` or `team` (plus the personal layer) as a probe sourced there is, or to nothing. A semantic
    leg whose read set holds vectors of another model than the one in force is left out (a query vector
    is only ever compared with vectors of its own model), and `notes` gets the hint to re-embed."""
    if not 1 <= limit <= 100:
        raise UserError(f"--limit must be between 1 and 100, not {limit}")
    email = inputs.email(email)
    row = conn.execute(query("user_id_by_email"), {"email": email}).fetchone()
    if row is None:
        raise UserError(f"no user {email}: import memories for them first")
    project_id, team_id = _pin(conn, "project", project), _pin(conn, "team", team)
    models = embeddings.configured_models()
    stale = {}
    if models:
        act_as(conn, claims_for(row[0], email))
        found = conn.execute(
            query("stale_embedding_models_in_read_set"),
            {"project_id": project_id, "team_id": team_id, **{leg: models.get(leg) for leg in embeddings.LEGS}},
        ).fetchall()
        conn.execute(query("back_to_login_role"))
        for leg, model, count in found:
            stale.setdefault(leg, []).append((model, count))
    vectors = {"embedding": None, "embedding_minilm": None}
    for leg, model in models.items():
        if leg in stale:
            if notes is not None:
                notes.append(stale_hint(stale[leg], model, "this recall left that semantic leg out"))
            continue
        embedded = embeddings.embed([question], as_query=True, model=model)
        vectors[leg] = embeddings.literal(embedded.vectors[0])
        conn.execute(
            query("record_embedding_usage"),
            {"owner_id": row[0], "model": model, "probe_id": None, "input_tokens": embedded.input_tokens},
        )
    act_as(conn, claims_for(row[0], email))
    hits = conn.execute(
        query("recall"),
        {"query": question, "project_id": project_id, "team_id": team_id, "match_count": limit, **vectors},
    ).fetchall()
    conn.execute(query("back_to_login_role"))
    return hits


def stale_hint(stale: list[tuple[str, int]], model: str, consequence: str) -> str:
    """The hint when stored vectors are of another model than the one in force (ZM_EMBEDDING_MODEL)."""
    held = ", ".join(f"{count} by {old}" for old, count in stale)
    return (
        f"memories here were embedded by another model than {model} ({held}): {consequence}, "
        "as vectors of two models cannot be compared; run `zm-roi embed` to re-embed them"
    )


def recall_hits(
    db_url: str,
    question: str,
    email: str,
    project: str | None,
    limit: int,
    team: str | None = None,
    notes: list[str] | None = None,
) -> list[dict]:
    """The hits as `zm-roi recall --json` prints them, best first."""
    return [
        {"memory_id": str(memory_id), "kind": kind, "scope": scope, "title": title, "score": score, "rank": rank}
        for rank, (memory_id, kind, scope, title, _, score) in enumerate(
            recall_as(db_url, question, email, project, limit, team, notes), start=1
        )
    ]


def print_recall(
    db_url: str,
    question: str,
    email: str,
    project: str | None,
    limit: int,
    team: str | None = None,
    notes: list[str] | None = None,
) -> None:
    rows = recall_as(db_url, question, email, project, limit, team, notes)
    print(f"recall for {email}: {question}")
    if not rows:
        print("  (nothing visible to this user matches)")
    for rank, (_, kind, scope, title, body, score) in enumerate(rows, start=1):
        print(f"  {rank}. [{kind}, {scope}] {title}  (score {score:.3f})")
        print(textwrap.indent(textwrap.shorten(body, 160), "     "))
