"""A red-team of the privacy rules: every relation and function a client role can reach, tried as
anon, as another user and as the owner without the benchmark's gate. None may yield probe questions,
recall snapshots, or another user's memories and results."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from tests.support import benchmark
from zm_roi.identity import act_as, claims_for

# What the Data API may expose (schemas public and graphql_public). A new entry is a conscious choice.
EXPOSED_RELATIONS = {
    "memories",
    "project_members",
    "projects",
    "roi_benchmark_breakdown",
    "roi_benchmark_runs",
    "roi_benchmark_tile",
    "team_members",
    "teams",
    "usage_events",
}
EXPOSED_FUNCTIONS = {
    "benchmark_memory",
    "caller_project_ids",
    "caller_team_ids",
    "recall",
    "recall_lexical",
    "recall_query",
}
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")


@pytest.fixture(scope="module")
def scene(db_url):
    """An owner with a sentinel memory and a completed run; another user with nothing."""
    sentinel = f"SENTINEL{uuid.uuid4().hex}"
    with psycopg.connect(db_url) as conn:
        extractor = conn.execute("select extractor from roi.settings").fetchone()[0]
        conn.execute("update roi.settings set extractor = 'deterministic'")
        owner = conn.execute(
            "insert into auth.users (email) values (%s) returning id", (f"{sentinel}@o.test",)
        ).fetchone()[0]
        other = conn.execute(
            "insert into auth.users (email) values (%s) returning id", (f"x{sentinel}@o.test",)
        ).fetchone()[0]
        conn.execute(
            "insert into public.memories (author_id, scope, kind, title, body) "
            "values (%s, 'personal', 'decision', %s, %s)",
            (owner, f"The {sentinel} decision", f"We chose {sentinel} because it is secret."),
        )
        conn.commit()
        assert benchmark(db_url, owner)["status"] == "started"
        question = conn.execute("select question from roi.probes where owner_id = %s", (owner,)).fetchone()[0]
        conn.execute("update roi.settings set extractor = %s", (extractor,))
    assert sentinel in question
    return {"sentinel": sentinel, "question": question, "owner": owner, "other": other}


def reachable_relations(conn, role: str) -> list[tuple[str, str]]:
    return conn.execute(
        """select n.nspname, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
           where c.relkind in ('r', 'v', 'm', 'f', 'p') and n.nspname <> all(%s)
             and has_schema_privilege(%s, n.oid, 'usage') and has_table_privilege(%s, c.oid, 'select')
           order by 1, 2""",
        (list(SYSTEM_SCHEMAS), role, role),
    ).fetchall()


def everything_readable(db_url: str, claims: dict) -> dict[str, str]:
    """As `claims`, the text of every row of every relation the role can select from."""
    seen = {}
    with psycopg.connect(db_url) as conn:
        for schema, name in reachable_relations(conn, claims["role"]):
            with conn.transaction():
                act_as(conn, claims)
                rows = conn.execute(
                    sql.SQL("select row_to_json(t)::text from {}.{} t").format(
                        sql.Identifier(schema), sql.Identifier(name)
                    )
                ).fetchall()
            seen[f"{schema}.{name}"] = "\n".join(r[0] for r in rows)
    return seen


def test_the_data_api_exposes_only_the_allowlisted_relations_and_functions(db_url):
    with psycopg.connect(db_url) as conn:
        relations = {
            name
            for schema, name in reachable_relations(conn, "authenticated")
            if schema in ("public", "graphql_public")
        }
        functions = {
            r[0]
            for r in conn.execute(
                """select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                   where n.nspname in ('public', 'graphql_public')
                     and has_function_privilege('authenticated', p.oid, 'execute')
                     and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')"""
            ).fetchall()
        }
        anon_reach = [r for r in reachable_relations(conn, "anon") if r[0] in ("public", "roi", "auth")]
    assert relations == EXPOSED_RELATIONS
    assert functions == EXPOSED_FUNCTIONS
    assert anon_reach == []


def test_anon_reads_nothing_of_the_owner_anywhere(db_url, scene, reliability):
    seen = everything_readable(db_url, {"role": "anon"})
    leaks = [name for name, text in seen.items() if scene["sentinel"] in text]
    reliability.record("privacy", "relations anon can select from, read in full", tried=len(seen), lost=len(leaks))
    assert leaks == []


def test_another_user_reads_nothing_of_the_owner_anywhere(db_url, scene, reliability):
    seen = everything_readable(db_url, claims_for(scene["other"]))
    leaks = [name for name, text in seen.items() if scene["sentinel"] in text or str(scene["owner"]) in text]
    reliability.record(
        "privacy", "relations another user can select from, read in full", tried=len(seen), lost=len(leaks)
    )
    assert leaks == []
    assert "roi.probes" in seen, "the enumeration reached the private schema as authenticated"
    assert {"public.roi_benchmark_breakdown", "roi.recall_outcomes", "roi.closed_book_results"} <= set(seen), (
        "the enumeration reached the diagnostics too"
    )


def test_the_owner_reads_no_question_and_no_snapshot_without_the_gate(db_url, scene):
    seen = everything_readable(db_url, claims_for(scene["owner"]))
    assert scene["sentinel"] in seen["public.memories"], "the owner does read their own memory"
    assert [name for name, text in seen.items() if scene["question"] in text] == []
    assert seen["roi.probes"] == seen["roi.recalls"] == seen["roi.work"] == ""
    # The diagnostics reach the owner as aggregates and text-free facts: kind, scope, rank, counts.
    assert '"dimension":"scope","value":"personal"' in seen["public.roi_benchmark_breakdown"]
    assert '"source_rank":1' in seen["roi.recall_outcomes"]
    assert '"source_surfaced_count":1' in seen["public.roi_benchmark_runs"]


def outcome_as(db_url: str, claims: dict, statement: str, summary, params: tuple = ()) -> str:
    """One statement under forged claims, in its own transaction: its error class, or a summary of what it
    returned. Each check runs on its own, so a refusal of one never skips the others."""
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        try:
            with conn.transaction():
                act_as(conn, claims)
                return summary(conn.execute(statement, params).fetchall())
        except psycopg.Error as exc:
            return type(exc).__name__


REFUSED_AS_ANON = ("InsufficientPrivilege",) * 3
UNKNOWN_ROLE = ("InvalidParameterValue",) * 3


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"role": "authenticated"}, ("InvalidAuthorizationSpecification", "no tile", "recalled 0")),
        ({"role": "authenticated", "sub": str(uuid.uuid4())}, ("empty", "invite", "recalled 0")),
        ({"role": "anon", "sub": "REPLACED_BY_OWNER"}, REFUSED_AS_ANON),
        ({"role": "service_role_typo", "sub": "REPLACED_BY_OWNER"}, UNKNOWN_ROLE),
    ],
    ids=["no-sub", "unknown-user", "anon-with-owner-sub", "unknown-role"],
)
def test_forged_claims_reach_nothing(db_url, scene, claims, expected):
    claims = {k: (str(scene["owner"]) if v == "REPLACED_BY_OWNER" else v) for k, v in claims.items()}
    sentinel = scene["sentinel"]
    answer = outcome_as(db_url, claims, "select public.benchmark_memory() as r", lambda rows: rows[0]["r"]["status"])
    tile = outcome_as(
        db_url,
        claims,
        "select state from public.roi_benchmark_tile",
        lambda rows: ",".join(row["state"] for row in rows) or "no tile",
    )
    recalled = outcome_as(
        db_url,
        claims,
        "select memory_id from public.recall(%s)",
        lambda rows: f"recalled {len(rows)}",
        (sentinel,),
    )
    assert (answer, tile, recalled) == expected
    assert sentinel not in answer + tile + recalled
