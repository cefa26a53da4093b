"""Crashes: a client that vanishes mid-call leaves no half run, and the next call works."""

from __future__ import annotations

import socket
import threading

import psycopg

from tests.support import benchmark, user_with_knowledge, wait_for
from zm_roi.identity import act_as, claims_for


def run_count(conn, owner) -> int:
    return conn.execute("select count(*) from roi.runs where owner_id = %s", (owner,)).fetchone()[0]


def test_a_client_that_disconnects_mid_run_leaves_no_half_run(db_url, email, deterministic_mode, reliability):
    # c1 completes a run. c0 row-locks one probe. c2 calls: inserts its run and recalls, then blocks
    # on that probe. c2's socket is cut; the server notices, rolls back. c0 releases. c3 calls.
    owner = user_with_knowledge(db_url, email, count=4)
    assert benchmark(db_url, owner)["status"] == "started"
    failure = {}

    with psycopg.connect(db_url) as holder, psycopg.connect(db_url) as observer:
        observer.autocommit = True
        holder.execute("select 1 from roi.probes where owner_id = %s and state = 'active' limit 1 for update", (owner,))
        client = psycopg.connect(db_url)
        client.execute("set client_connection_check_interval = '100ms'")
        client_pid = client.info.backend_pid

        def call():
            try:
                with client.transaction():
                    act_as(client, claims_for(owner))
                    client.execute("select public.benchmark_memory()")
            except psycopg.Error as exc:
                failure["error"] = exc

        caller = threading.Thread(target=call)
        caller.start()
        wait_for(
            lambda: (
                observer.execute(
                    "select wait_event_type from pg_stat_activity where pid = %s", (client_pid,)
                ).fetchone()
                == ("Lock",)
            )
        )
        # Cut the socket under psycopg, then detach: a socket object left to the garbage collector would
        # close psycopg's descriptor later, by then reused by another test's connection or pipe (EBADF
        # and "another command is already in progress" in unrelated tests after this one).
        cut = socket.socket(fileno=client.pgconn.socket)
        cut.shutdown(socket.SHUT_RDWR)
        cut.detach()
        wait_for(
            lambda: (
                observer.execute("select count(*) from pg_stat_activity where pid = %s", (client_pid,)).fetchone()[0]
                == 0
            )
        )
        caller.join(timeout=10)
        holder.commit()
        runs_after_cut = run_count(observer, owner)
        recalls_after_cut = observer.execute(
            "select count(*) from roi.recalls where owner_id = %s", (owner,)
        ).fetchone()[0]

    next_call = benchmark(db_url, owner)["status"]
    with psycopg.connect(db_url) as conn:
        runs_after_next = run_count(conn, owner)
    # Measured before any assert: a half run left behind, a success reported on a cut connection, or a
    # next call that could not start its run is what this scenario can lose.
    left_behind = (runs_after_cut - 1) + int(recalls_after_cut != 4)
    reliability.record(
        "crashes",
        "client disconnected mid-run (socket cut while blocked)",
        tried=1,
        lost=int(left_behind > 0 or "error" not in failure or next_call != "started" or runs_after_next != 2),
    )
    assert runs_after_cut == 1, "the vanished call left nothing behind"
    assert recalls_after_cut == 4
    assert "error" in failure, "the cut connection surfaced as an error to its client, not as success"
    assert next_call == "started"
    assert runs_after_next == 2
