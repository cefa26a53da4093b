"""Helpers only the worker tier uses (the cast it shares with the other tiers is in tests/support.py,
its fixtures in tests/conftest.py)."""

from __future__ import annotations

import uuid

import psycopg

from tests.support import as_user

EPISODE = {"kind": "episode", "title": "Standup notes", "body": "We talked about the release train."}


def tile(db_url: str, owner: uuid.UUID) -> dict:
    return as_user(db_url, owner, "select * from public.roi_benchmark_tile")[0]


def seed_queued_judgments(db_url: str, owner: uuid.UUID, count: int) -> uuid.UUID:
    """A run of `count` probes whose judgments are queued, as start_run() leaves them in LLM mode,
    written directly so a test can queue hundreds without hundreds of memories."""
    with psycopg.connect(db_url) as conn, conn.transaction():
        run_id = conn.execute(
            "insert into roi.runs (owner_id, mode, probe_count) values (%s, 'llm', %s) returning id", (owner, count)
        ).fetchone()[0]
        conn.execute(
            "insert into roi.pending_runs (run_id, owner_id, started_at) values (%s, %s, now())", (run_id, owner)
        )
        # Embedded already, as the worker leaves the questions it writes: no embed_question work.
        probes = conn.execute(
            """insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                                       question, state, activated_at, question_embedding, question_embedding_model)
               select %s, gen_random_uuid(), 'decision', 'personal', 'Seeded decision ' || g,
                      'The seeded body of decision ' || g, 'Which way did seeded decision ' || g || ' go?',
                      'active', now(), array_fill(0.05::real, array[384])::extensions.vector, 'seeded'
               from generate_series(1, %s) g
               returning id""",
            (owner, count),
        ).fetchall()
        conn.execute(
            """insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
               select %s, p.id, p.owner_id, '{}', '[]' from roi.probes p where p.id = any(%s)""",
            (run_id, [row[0] for row in probes]),
        )
        conn.execute("select roi.note_recall_outcomes(%s)", (run_id,))
        conn.execute("select roi.enqueue('judge', %s, %s, %s)", (owner, [row[0] for row in probes], run_id))
        # The seeded run stands in for the owner's pool: pg_cron's minute upkeep must not top it up from
        # the owner's memories mid-test and queue a question to write beside the judgments.
        conn.execute(
            """delete from roi.dirty_layers d using public.memories m
               where m.author_id = %s and d.layer = m.scope
                 and d.layer_id = case m.scope when 'personal' then m.author_id
                                               when 'project' then m.project_id else m.team_id end""",
            (owner,),
        )
    return run_id
