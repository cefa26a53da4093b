"""A red-team of the privacy rules: every relation and function a client role can reach, tried as
anon, as another user and as the owner without the benchmark's gate. None may yield probe questions,
recall snapshots, or another user's memories and results."""

from __future__ import annotations

import itertools
import json
import uuid

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from tests.support import (
    GENERATION_MODEL,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    benchmark,
    default_answer,
    extractor,
    forget_calibrations,
    remove_users,
    set_settings,
)
from zm_roi import localdb, prompts
from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.keys import store_key
from zm_roi.queries import query
from zm_roi.schedule import schedule_as
from zm_roi.worker import Worker, WorkerConfig

KEY_PASSPHRASE = "red team passphrase"
# How each scene's owner is named in the reliability report.
SCENES = {"deterministic": "owner after a deterministic run", "llm": "LLM-mode owner with rows in every owner table"}

# What the Data API may expose (schemas public and graphql_public). A new entry is a conscious choice.
EXPOSED_RELATIONS = {
    "memories",
    "memory_postings",
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
    "benchmark_schedule",
    "caller_project_ids",
    "caller_team_ids",
    "recall",
    "recall_lexical",
    "recall_query",
    "roi_benchmark_comparison",
}
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")


def owner_tables(conn) -> list[tuple[str, str]]:
    """Every table with a column that names a user (a foreign key to auth.users), from the catalog: the
    tables that can hold an owner's rows, queues and results alike. A new one is in the list at once."""
    return conn.execute(
        """select format('%I.%I', n.nspname, r.relname), a.attname
           from pg_constraint c join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
           join pg_class r on r.oid = c.conrelid join pg_namespace n on n.oid = r.relnamespace
           where c.contype = 'f' and c.confrelid = 'auth.users'::regclass and c.conrelid <> 'auth.users'::regclass
           order by 1"""
    ).fetchall()


def owner_row_counts(conn, owner: uuid.UUID) -> dict[str, int]:
    """As the superuser: how many of `owner`'s rows each owner table holds."""
    counts = {}
    for relation, column in owner_tables(conn):
        schema, name = relation.split(".")
        counts[relation] = conn.execute(
            sql.SQL("select count(*) from {}.{} where {} = %s").format(
                sql.Identifier(schema), sql.Identifier(name), sql.Identifier(column)
            ),
            (owner,),
        ).fetchone()[0]
    return counts


def owner_fingerprint(conn, owner: uuid.UUID) -> dict[str, str]:
    """As the superuser: a digest of `owner`'s rows in every owner table, to see that nothing changed them."""
    digests = {}
    for relation, column in owner_tables(conn):
        schema, name = relation.split(".")
        digests[relation] = conn.execute(
            sql.SQL(
                "select md5(coalesce(string_agg(row_to_json(t)::text, ',' order by row_to_json(t)::text), ''))"
                " from {}.{} t where {} = %s"
            ).format(sql.Identifier(schema), sql.Identifier(name), sql.Identifier(column)),
            (owner,),
        ).fetchone()[0]
    return digests


def bare_or_grading(model: str, prompt: str) -> str:
    """The scripted model, closed-book calls included: a bare answer that knows nothing, graded wrong."""
    if prompt.startswith("Answer the question below"):
        return json.dumps({"answer": "I do not know."})
    if prompt.startswith("You grade an answer"):
        return json.dumps({"correct": False, "reason": "The answer does not say."})
    return default_answer(model, prompt)


def deterministic_owner(db_url: str, sentinel: str) -> uuid.UUID:
    """An owner with one sentinel memory and a completed deterministic run."""
    with extractor(db_url, "deterministic"), psycopg.connect(db_url) as conn:
        with conn.transaction():
            insert_memories(
                conn,
                [MemoryLine(kind="decision", title=f"The {sentinel} decision", body=f"We chose {sentinel}, a secret.")],
                Target(f"{sentinel}@o.test"),
            )
        owner = conn.execute(query("user_id_by_email"), {"email": f"{sentinel}@o.test"}).fetchone()[0]
        assert benchmark(db_url, owner)["status"] == "started"
    return owner


def llm_owner(db_url: str, worker_url: str, sentinel: str) -> uuid.UUID:
    """An owner whose rows fill every owner table, through the real paths: an import into a personal
    layer, a project and a team; a stored provider key; in LLM mode a run judged by the worker (with
    closed-book spot-checks and verdict notes), a second run left queued for judging, and upkeep
    rotating the first run's pool, so pending probes wait for their questions too."""
    email = f"{sentinel}@o.test"
    # Every body shares words with every scripted question ("What did the team settle on for topic
    # number N?"), so each recall surfaces its source and, in a layer of two or more, more than it:
    # every probe qualifies for both judge checks, whichever memories the pool takes (ties in
    # created_at). Without it a pool that missed the two memories sharing "number" or "team" queued none.
    memories = [
        MemoryLine(kind=m["kind"], title=f"{m['title']} {sentinel}", body=f"{m['body']} A team topic. {sentinel}")
        for m in KNOWLEDGE
    ]
    with psycopg.connect(db_url) as conn, conn.transaction():
        insert_memories(conn, memories[:3], Target(email))
        insert_memories(conn, memories[3:5], Target(email, project=f"project {sentinel}"))
        insert_memories(conn, memories[5:], Target(email, team=f"team {sentinel}"))
        owner = conn.execute(query("user_id_by_email"), {"email": email}).fetchone()[0]
    store_key(db_url, email, "openai", f"sk-{sentinel}", KEY_PASSPHRASE)
    worker = Worker(
        worker_url,
        WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL, key_encryption_key=KEY_PASSPHRASE),
        ScriptedModel(bare_or_grading),
    )
    with extractor(db_url, "llm"):
        # Every probe that qualifies gets both judge checks: sampled, the checks once fell on none.
        set_settings(
            db_url, pool_target=4, rotation_per_run=1, closed_book_checks=2, withheld_source_checks=4, order_checks=4
        )
        assert benchmark(db_url, owner)["status"] == "generating"
        worker.run(once=True)
        assert benchmark(db_url, owner)["status"] == "started"
        worker.run(once=True)
        assert benchmark(db_url, owner)["status"] == "started"
        with psycopg.connect(db_url) as conn:
            conn.execute("select roi.upkeep()")
    # A routine-run wish, written as the owner; and the first run marked as one a schedule started (what
    # upkeep records when pg_cron starts a scheduled run: tests/db/test_benchmark_schedule.py drives that).
    schedule_as(db_url, email, "daily")
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "insert into roi.scheduled_runs (run_id, owner_id, period_start)"
            " select id, owner_id, date_trunc('day', started_at) from roi.runs where owner_id = %s"
            " order by started_at limit 1",
            (owner,),
        )
    return owner


@pytest.fixture(scope="module", params=["deterministic", "llm"])
def scene(request, cluster):
    """An owner with sentinel memories and their benchmark's rows; another user with nothing. In LLM
    mode the owner has rows in every owner table (checked here, before anything reads as the other)."""
    db_url = cluster.url()
    sentinel = f"SENTINEL{uuid.uuid4().hex}"
    if request.param == "deterministic":
        # Held for the whole scene, so it is read in the mode it was made in: in LLM mode any call of
        # the owner's would hand the template questions to the writer (roi.hand_template_questions_to_writer)
        # and leave no question to hide.
        held = extractor(db_url, "deterministic")
        held.__enter__()
        request.addfinalizer(lambda: held.__exit__(None, None, None))
        owner = deterministic_owner(db_url, sentinel)
    else:
        owner = llm_owner(db_url, cluster.url(user="roi_worker", password=localdb.WORKER_PASSWORD), sentinel)
    # Two judge calibrations, as `zm-roi judge-check --record` writes them: one of the judge of the LLM
    # owner's runs, one of a judge nobody here used.
    calibrated = [prompts.fingerprint(JUDGE_MODEL, "judge.j2"), f"openai/stranger-{sentinel}#judge.j2@0"]
    with psycopg.connect(db_url) as conn:
        for fingerprint in calibrated:
            conn.execute(
                query("record_judge_calibration"),
                {"check_id": uuid.uuid4(), "judge_fingerprint": fingerprint, "model": "openai/m", "case_count": 20}
                | {
                    f"{label}_{count}": 5
                    for label in ("with_memory", "without_memory", "exclusive")
                    for count in ("tp", "fp", "tn", "fn")
                },
            )
        other = conn.execute(query("ensure_user"), {"email": f"x{sentinel}@o.test"}).fetchone()[0]
        conn.commit()
        questions = [
            r[0]
            for r in conn.execute(
                "select question from roi.probes where owner_id = %s and question is not null", (owner,)
            ).fetchall()
        ]
        counts = owner_row_counts(conn, owner)
        # Said when the LLM scene comes up short: what is still queued, and what each recall surfaced
        # (how many, and whether the source) decides which probes qualified for a judge check.
        left_queued = conn.execute("select kind, count(*) from roi.work group by kind").fetchall()
        surfaced = conn.execute(
            "select cardinality(r.surfaced_ids), p.memory_id = any (r.surfaced_ids)"
            " from roi.recalls r join roi.probes p on p.id = r.probe_id where r.owner_id = %s",
            (owner,),
        ).fetchall()
    assert questions, "the owner has probe questions to hide"
    if request.param == "llm":
        assert [relation for relation, rows in counts.items() if rows == 0] == [], (
            "the LLM scene fills every table that can hold an owner's rows"
            f" (still queued: {left_queued}; surfaced, source among them: {surfaced})"
        )
    try:
        yield {
            "mode": request.param,
            "sentinel": sentinel,
            "questions": questions,
            "owner": owner,
            "other": other,
            "counts": counts,
            "calibrated": calibrated,
        }
    finally:
        remove_users(db_url, [owner, other])
        forget_calibrations(db_url, fingerprints=calibrated)


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
    scenario = f"relations anon can select from, read in full ({SCENES[scene['mode']]})"
    reliability.record("privacy", scenario, tried=len(seen), lost=len(leaks))
    assert leaks == []


def test_another_user_reads_nothing_of_the_owner_anywhere(db_url, scene, reliability):
    seen = everything_readable(db_url, claims_for(scene["other"]))
    leaks = [name for name, text in seen.items() if scene["sentinel"] in text or str(scene["owner"]) in text]
    reliability.record(
        "privacy",
        f"relations another user can select from, read in full ({SCENES[scene['mode']]})",
        tried=len(seen),
        lost=len(leaks),
    )
    assert leaks == []
    # Each table that holds the owner's rows was read, so "0 leaked" is about rows that exist.
    # The others (no select privilege) are tried too, and refused.
    holding = {relation for relation, rows in scene["counts"].items() if rows > 0}
    refused = {
        relation: outcome_as(db_url, claims_for(scene["other"]), f"select * from {relation}", len)  # noqa: S608
        for relation in holding - set(seen)
    }
    assert set(refused.values()) <= {"InsufficientPrivilege"}, refused
    assert "roi.probes" in seen, "the enumeration reached the private schema as authenticated"
    reached = {
        "public.memory_postings",
        "public.roi_benchmark_breakdown",
        "roi.recall_outcomes",
        "roi.closed_book_results",
        "roi.judge_check_results",
    }
    assert reached <= set(seen), "the enumeration reached the diagnostics too"


def test_the_owner_reads_no_question_and_no_snapshot_without_the_gate(db_url, scene):
    seen = everything_readable(db_url, claims_for(scene["owner"]))
    with psycopg.connect(db_url) as conn:
        titles = [
            r[0] for r in conn.execute("select title from public.memories where author_id = %s", (scene["owner"],))
        ]
    assert all(title in seen["public.memories"] for title in titles), "the owner does read their own memories"
    assert [name for name, text in seen.items() if any(q in text for q in scene["questions"])] == []
    # Memory text reaches the owner through public.memories only: no probe's source, no recall snapshot.
    assert [name for name, text in seen.items() if name != "public.memories" and any(t in text for t in titles)] == []
    if scene["mode"] == "deterministic":
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


def client_functions(conn) -> list[dict]:
    """Every function anon or authenticated may execute, from the catalog (extensions' own and the
    test helpers left out): the list a new function joins by itself."""
    return (
        conn.cursor(row_factory=dict_row)
        .execute(
            """select p.oid::regprocedure::text as signature, format('%%I.%%I', n.nspname, p.proname) as name,
                  coalesce(array(select format_type(t, null) from unnest(p.proargtypes) t), '{}') as arg_types,
                  has_function_privilege('anon', p.oid, 'execute') as anon
           from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where n.nspname <> all(%s) and n.nspname <> 'tests' and p.prokind = 'f'
             and (has_function_privilege('authenticated', p.oid, 'execute')
                  or has_function_privilege('anon', p.oid, 'execute'))
             and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')
           order by 1""",
            (list(SYSTEM_SCHEMAS),),
        )
        .fetchall()
    )


def argument_choices(conn, owner: uuid.UUID) -> dict[str, list]:
    """For each argument type, values that aim at the owner: their id, runs, probes, memories, lock key
    and memory rows. A function taking a type not listed here fails the test until it is added."""
    ids = [owner]
    for statement in (
        "select id from roi.runs where owner_id = %s",
        "select id from roi.probes where owner_id = %s",
        "select id from public.memories where author_id = %s limit 2",
    ):
        ids += [row[0] for row in conn.execute(statement, (owner,))]
    lock_key = conn.execute("select roi.owner_lock_key(%s)", (owner,)).fetchone()[0]
    rows = conn.execute("select array_agg(m)::text from public.memories m where author_id = %s", (owner,)).fetchone()[0]
    probes = [row[0] for row in conn.execute("select id from roi.probes where owner_id = %s", (owner,))]
    sources = [row[0] for row in conn.execute("select memory_id from roi.probes where owner_id = %s", (owner,))]
    return {
        "uuid": ids,
        "uuid[]": ["{" + ",".join(str(p) for p in probes) + "}", "{" + ",".join(str(m) for m in sources) + "}"],
        "text[]": ["{pending,active}"],
        "real": [0.9],
        "text": ["llm", "decision"],
        "integer": [20],
        "bigint": [lock_key, 1],
        "boolean": [False, True],
        "vector": [None],
        "halfvec": [None],
        "memories[]": ["{}", rows],
        "timestamp with time zone": ["-infinity", "2000-01-01T00:00:00Z"],
    }


def calls_of(function: dict, choices: dict[str, list]) -> list[tuple]:
    missing = [t for t in function["arg_types"] if t not in choices]
    assert missing == [], f"{function['signature']}: no red-team values for {missing}; add some"
    return list(itertools.product(*(choices[t] for t in function["arg_types"])))


def call_as(conn, claims: dict, function: dict, arguments: tuple, owner: uuid.UUID, before: dict) -> tuple[str, bool]:
    """One call as `claims`, rolled back: what it returned (or its error class), and whether the owner's
    rows were still intact right after it, inside the same transaction."""
    casts = sql.SQL(", ").join(sql.SQL("%s::{}").format(sql.SQL(t)) for t in function["arg_types"])
    statement = sql.SQL("select coalesce(string_agg(row_to_json(t)::text, ','), '') from {}({}) t").format(
        sql.SQL(function["name"]), casts
    )
    try:
        with conn.transaction(force_rollback=True):
            act_as(conn, claims)
            returned = conn.execute(statement, arguments).fetchone()[0]
            conn.execute("reset role")
            return returned, owner_fingerprint(conn, owner) == before
    except psycopg.Error as exc:
        return type(exc).__name__, True


def test_every_function_a_client_role_can_execute_yields_nothing_of_the_owner(db_url, scene, reliability):
    owner = scene["owner"]
    with psycopg.connect(db_url, autocommit=True) as conn:
        functions = client_functions(conn)
        choices = argument_choices(conn, owner)
        before = owner_fingerprint(conn, owner)
        owner_ids = {str(i) for i in choices["uuid"][1:]} | {str(owner)}
        outcomes = {}
        for function in functions:
            as_who = [("other", claims_for(scene["other"]))] + (
                [("anon", {"role": "anon"})] if function["anon"] else []
            )
            for who, claims in as_who:
                for arguments in calls_of(function, choices):
                    outcomes[(function["signature"], who, arguments)] = call_as(
                        conn, claims, function, arguments, owner, before
                    )
        after = owner_fingerprint(conn, owner)
    leaked = [
        key
        for key, (returned, intact) in outcomes.items()
        if not intact or scene["sentinel"] in returned or any(i in returned for i in owner_ids)
    ]
    reliability.record(
        "privacy",
        f"calls of every client-executable function as another user and anon ({SCENES[scene['mode']]})",
        tried=len(outcomes),
        lost=len(leaked) + (after != before),
    )
    assert leaked == []
    assert after == before, "no call changed the owner's rows"
    called = {function["name"] for function in functions}
    assert {"public.benchmark_memory", "roi.start_run", "roi.open_gate", "roi.refill_pool"} <= called, (
        "the catalog listed the roi verbs a signed-in user may execute"
    )
    assert {signature for signature, _, _ in outcomes} == {function["signature"] for function in functions}


def test_judge_calibrations_reach_an_owner_only_for_their_own_runs_judges(db_url, scene):
    """roi.judge_calibrations holds counts, a fingerprint and a model name: no case text at all, and an
    owner reads a calibration only of a judge that judged one of their runs; anon reads none."""
    with psycopg.connect(db_url) as conn:
        text_columns = {
            r[0]
            for r in conn.execute(
                "select column_name from information_schema.columns where table_schema = 'roi'"
                " and table_name = 'judge_calibrations' and data_type not in"
                " ('integer', 'bigint', 'uuid', 'timestamp with time zone')"
            )
        }
    assert text_columns == {"judge_fingerprint", "model"}, "only the judge's name, never a case's text"
    read = "select judge_fingerprint from roi.judge_calibrations"
    fingerprints = lambda rows: sorted(r["judge_fingerprint"] for r in rows)  # noqa: E731
    mine, stranger = scene["calibrated"]
    assert outcome_as(db_url, claims_for(scene["other"]), read, fingerprints) == []
    assert outcome_as(db_url, {"role": "anon"}, read, fingerprints) == "InsufficientPrivilege"
    owner_reads = outcome_as(db_url, claims_for(scene["owner"]), read, fingerprints)
    assert owner_reads == ([mine] if scene["mode"] == "llm" else []), "their runs' judge's only"
    assert stranger not in str(owner_reads)
    # The runs view shows the owner the figures of that calibration, and nothing of it to another user.
    runs = "select judge_calibrated, judge_sensitivity, correction_note from public.roi_benchmark_runs"
    owner_runs = outcome_as(db_url, claims_for(scene["owner"]), runs, lambda rows: rows)
    assert any(r["judge_calibrated"] for r in owner_runs) == (scene["mode"] == "llm")
    assert outcome_as(db_url, claims_for(scene["other"]), runs, len) == 0
