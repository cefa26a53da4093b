"""Pages per recall on the user's write path (issue 35, step 2): shared buffers a member's hybrid recall
touches, and the bytes per memory, on a layer written the way `zm-roi import` writes it.

Run: `PYTHONPATH=bench .venv/bin/python -m zm_roi_bench.pages [--sizes 1000,10000] [--storage external|main|...]`.

Each layer is one project of real text (the demo corpus and, when present, the public ADR corpus at
`../shared/eval`, read at run time, never copied; a layer larger than the corpus holds varied copies, as
in the layer bench, `layers.layer_rows`). Rows are written by the importer with embeddings off
(`importer.insert_memories`), then both vector columns are filled by the backfill's own UPDATE, batch
by batch in id order (`store_memory_embedding*`, backfill.BATCH rows a commit), MiniLM's column first
then e5's, as `zm-roi import` fills them. By default the vectors are deterministic random unit vectors,
not the models' (embedding 10,000 rows with both models takes ~20 min here): recall's exact scans read
every row's vector whatever its values, and what decides their pages is the vectors' bytes. An HNSW walk
does depend on the values: `--vectors real` embeds the corpus once and gives each copy its original's
vectors, perturbed as the layer bench does. Autovacuum is off on the memories and their postings while
the layers are written and measured "after import" (`analyze` only): the figure is that moment's,
before the daemon sets either table's visibility map (without it every index-only scan fetches the
heap), not a race with it. Then `vacuum analyze`, and measured again; then the large layers' HNSW
indexes built with the statements pg_cron runs, one after the other (their seconds are what building
them in the import's last step would add), and measured a third time.

`--to-fast-recall` measures instead the way from the import's end to fast recall with nothing done by
hand: autovacuum on, pg_cron's index decision switched on at the import's end, the recalls measured
every minute until the large layers' indexes are valid (`run_to_fast_recall`).

The figure is the top plan node's shared buffers (hit + read) of `EXPLAIN (ANALYZE, BUFFERS)` over
`select * from public.recall(...)`: a function's nested statements run inside that node, so it counts
every page the recall touches (checked against auto_explain's nested plans with `--explain`). p50 over
the paraphrased questions, as the project's member with row-level security applied.

`--cold` (root only): the whole run with shared_buffers 128MB, and at each moment every recall measured
again cold: the server stopped, the operating system's page cache dropped (/proc/sys/vm/drop_caches),
the server started, one recall pinned to a project that does not exist (the backend's catalogs and
plans), then the measured one: shared buffers read (not hit) and hit, p50 / p95 ms. The OS cache is
emptied, not held small: the recall's own reads stay cached while it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from zm_roi import backfill, embeddings
from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.queries import query
from zm_roi_bench import footprint
from zm_roi_bench.cluster import machine, server, throwaway_cluster
from zm_roi_bench.layers import (
    EMAIL,
    build_layer_indexes,
    embedded_corpus,
    layer_rows,
    real_memories,
    with_query_vectors,
)
from zm_roi_bench.sql import bench_query

ROOT = Path(__file__).resolve().parents[2]  # the checkout (this file is bench/zm_roi_bench/pages.py)
# Beside the main checkout (../shared/eval); a worktree names it with --adr-corpus.
ADR_CORPUS = ROOT.parent / "shared" / "eval" / "public-adr-corpus.jsonl"
QUESTIONS = 10
DIMENSIONS = 384
# The legs in the order the import fills them (embeddings.configured_models: MiniLM first).
LEGS = ("embedding_minilm", "embedding")
# The small shared_buffers of a cold run (--cold), set for the whole run, warm figures included.
COLD_SHARED_BUFFERS = "128MB"
STORE = {"embedding": "store_memory_embedding", "embedding_minilm": "store_memory_embedding_minilm"}
# Each leg's vectors under the offline model's name, as the import stores them: a vector of a model with a
# centre gets sign bits (roi.embedding_bits), which is what recall's semantic legs read.
MODELS = {"embedding": embeddings.OFFLINE_MODEL, "embedding_minilm": embeddings.MINILM_MODEL}
# The moments a layer is measured at: right after the import (statistics only), once vacuum has set the
# visibility maps, and once the large layers' HNSW indexes exist (below 20,000 rows there are none).
MOMENTS = ("after_import", "after_vacuum", "with_indexes")
# Issue 35's goal for a hybrid recall, at every layer size and moment: 2,000 shared buffers (16 MB).
GOAL_BUFFERS = 2_000
# How often --to-fast-recall measures: pg_cron's schedules move by the minute.
POLL_SECONDS = 60


def unit_vector(rng: random.Random) -> str:
    v = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    norm = sum(x * x for x in v) ** 0.5
    return embeddings.literal([x / norm for x in v])


def random_questions(paraphrases: list[dict], seed: int) -> list[dict]:
    """The first QUESTIONS paraphrases, each with a random query vector per leg."""
    rng = random.Random(seed + 1)  # noqa: S311
    return [
        {"question": p["question"], "embedding": unit_vector(rng), "embedding_minilm": unit_vector(rng)}
        for p in paraphrases[:QUESTIONS]
    ] or [
        {"question": "Which database do we use?", "embedding": unit_vector(rng), "embedding_minilm": unit_vector(rng)}
    ]


def corpus(adr_corpus: Path, seed: int, vectors: str, say) -> tuple[list[dict], dict, list[dict]]:
    """The real memories, their vectors per column (none when random), and the questions to ask."""
    if vectors == "random":
        memories, paraphrases = real_memories(ROOT, adr_corpus)
        return memories, {}, random_questions(paraphrases, seed)
    memories, paraphrases, embedded = embedded_corpus(ROOT, adr_corpus, say)
    return memories, embedded, with_query_vectors([{"question": p["question"]} for p in paraphrases[:QUESTIONS]])


def write_layer(
    conn: psycopg.Connection, memories: list[dict], vectors: dict, size: int, seed: int, say, fill_vectors: bool = True
) -> str:
    """A project of `size` rows written as the import writes them; returns its id. With `vectors` (the
    originals' real embeddings per column) a row gets its original's, perturbed as the layer bench does;
    without, a random unit vector per column; with `fill_vectors` false, none (the rows and postings alone)."""
    name = f"pages layer of {size}"
    rows = list(layer_rows(memories, vectors, size, seed))
    say(f"importing {size:,} rows (embeddings off)")
    for start in range(0, len(rows), 1000):
        batch = rows[start : start + 1000]
        lines = [MemoryLine(kind=kind, title=title, body=body) for _, kind, title, body, _ in batch]
        insert_memories(conn, lines, Target(EMAIL, project=name))
        conn.commit()
    project_id = conn.execute(bench_query("layers_project_id"), {"name": name}).fetchone()[0]
    if not fill_vectors:
        return str(project_id)
    literals = {(title, body): by_column for _, _, title, body, by_column in rows}
    rng = random.Random(seed)  # noqa: S311 - reproducible vectors, not secrets
    stored = conn.execute(bench_query("pages_project_rows"), {"project_id": project_id}).fetchall()
    for leg in LEGS:
        say(f"filling {leg} by UPDATE in batches of {backfill.BATCH}")
        for start in range(0, len(stored), backfill.BATCH):
            with conn.cursor() as cur:
                cur.executemany(
                    query(STORE[leg]),
                    [
                        {"id": i, "embedding": literals[title, body].get(leg) or unit_vector(rng), "model": MODELS[leg]}
                        for i, title, body in stored[start : start + backfill.BATCH]
                    ],
                )
            conn.commit()
    return str(project_id)


def reach(conn: psycopg.Connection, moment: str, say) -> dict:
    """Bring the database to `moment` as its owner, outside a transaction (vacuum and CREATE INDEX
    CONCURRENTLY refuse one), database-wide, the postings included: whether their visibility map is set
    decides what the lexical leg's index-only scans cost. The index builds' seconds are what building
    them in the import's last step would add to it."""
    conn.commit()
    conn.autocommit = True
    try:
        if moment == "with_indexes":
            took = {"build_seconds": build_layer_indexes(conn, say)}
            conn.execute(bench_query("pages_analyze"))
            return took
        conn.execute(bench_query("pages_analyze" if moment == "after_import" else "pages_vacuum_analyze"))
        return {}
    finally:
        conn.autocommit = False


def buffers(plan: dict) -> int:
    top = plan[0]["Plan"]
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"]


def measure(conn: psycopg.Connection, user_id, project_id: str, questions: list[dict]) -> dict:
    """p50 / max shared buffers and ms per recall, hybrid and lexical, as the member."""
    figures = {}
    for name, sql in (
        ("hybrid", bench_query("pages_hybrid_buffers")),
        ("lexical", bench_query("pages_lexical_buffers")),
    ):
        touched, ms = [], []
        for q in questions:
            with conn.transaction():
                act_as(conn, claims_for(user_id, EMAIL))
                plan = conn.execute(sql, dict(q, project_id=project_id)).fetchone()[0]
            touched.append(buffers(plan))
            ms.append(plan[0]["Execution Time"])
        figures[name] = {
            "buffers_p50": statistics.median(touched),
            "buffers_max": max(touched),
            "ms_p50": round(statistics.median(ms), 2),
            "ms_p95": p95(ms),
        }
    conn.rollback()  # the member's role was set for the transaction
    return figures


def p95(values: list[float]) -> float:
    return round(statistics.quantiles(values, n=20, method="inclusive")[18], 2) if len(values) > 1 else values[0]


def cold_start(cluster) -> None:
    """Stop the server, drop the operating system's page cache (root only), start it again."""
    cluster.stop()
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n")
    cluster.start()


def measure_cold(cluster, user_id, project_id: str, questions: list[dict]) -> dict:
    """Each recall on a server just started with the OS cache dropped: shared buffers read (not hit) and
    hit, and ms. Before it, one recall pinned to a project that does not exist warms the backend's
    catalogs and plans, so what is read is the layer's own pages, not the server's start."""
    figures = {}
    for name, sql in (
        ("hybrid", bench_query("pages_hybrid_buffers")),
        ("lexical", bench_query("pages_lexical_buffers")),
    ):
        read, hit, ms = [], [], []
        for q in questions:
            cold_start(cluster)
            with psycopg.connect(cluster.url()) as conn, conn.transaction():
                act_as(conn, claims_for(user_id, EMAIL))
                conn.execute(sql, dict(q, project_id=str(uuid.uuid4()))).fetchone()
                plan = conn.execute(sql, dict(q, project_id=project_id)).fetchone()[0]
            top = plan[0]["Plan"]
            read.append(top["Shared Read Blocks"])
            hit.append(top["Shared Hit Blocks"])
            ms.append(plan[0]["Execution Time"])
        figures[name] = {
            "read_p50": statistics.median(read),
            "hit_p50": statistics.median(hit),
            "ms_p50": round(statistics.median(ms), 2),
            "ms_p95": p95(ms),
        }
    return figures


def nested_plans(
    conn: psycopg.Connection, user_id, project_id: str, question: dict, statement: str = "pages_hybrid"
) -> list[str]:
    """auto_explain's plans of the recall's nested statements (as notices), for the first question;
    `statement`, the named query that recalls (the anchor's too)."""
    notices = []

    def collect(diagnostic) -> None:
        notices.append(diagnostic.message_primary)

    conn.add_notice_handler(collect)
    conn.execute(bench_query("pages_load_auto_explain"))
    for setting, value in (
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_analyze", "on"),
        ("auto_explain.log_buffers", "on"),
        ("auto_explain.log_nested_statements", "on"),
        ("auto_explain.log_level", "notice"),
    ):
        conn.execute(bench_query("pages_setting"), {"name": setting, "value": value})
    with conn.transaction():
        act_as(conn, claims_for(user_id, EMAIL))
        conn.execute(bench_query(statement), dict(question, project_id=project_id))
    conn.execute(bench_query("pages_setting"), {"name": "auto_explain.log_min_duration", "value": "-1"})
    conn.remove_notice_handler(collect)  # else a later moment's plans land in this moment's list too
    return notices


def run(
    sizes,
    storage: str | None,
    toast_target: int | None,
    seed: int,
    explain: bool,
    adr_corpus: Path,
    search_storage: str | None = None,
    say=print,
    cold: bool = False,
    vectors: str = "random",
) -> dict:
    memories, vectors_of, questions = corpus(adr_corpus, seed, vectors, say)
    os.environ["ZM_EMBEDDING_MODEL"] = "none"  # the import writes rows only; the vectors come after
    figures = {
        "machine": machine(),
        "storage": storage,
        "toast_tuple_target": toast_target,
        "sizes": list(sizes),
        "vectors": vectors,
        "shared_buffers": COLD_SHARED_BUFFERS if cold else None,
        "moments": {},
    }
    figures.update(corpus_memories=len(memories), questions=len(questions))
    with throwaway_cluster(ROOT, say) as cluster:
        if cold:
            with open(cluster.pgdata / "postgresql.conf", "a") as conf:
                conf.write(f"shared_buffers = {COLD_SHARED_BUFFERS}\n")
            cluster.restart()
        conn = psycopg.connect(cluster.url())
        try:
            figures["server"] = server(conn)["version"]
            conn.execute(bench_query("pages_autovacuum_off"))
            layout = [(leg, storage) for leg in LEGS if storage] + [("search", search_storage)] * bool(search_storage)
            statements = [
                conn.execute(bench_query("pages_set_storage"), {"column": column, "storage": kind}).fetchone()[0]
                for column, kind in layout
            ]
            if toast_target:
                statements.append(
                    conn.execute(bench_query("pages_set_toast_target"), {"target": toast_target}).fetchone()[0]
                )
            for statement in statements:
                conn.execute(statement)
            conn.commit()
            figures["attstorage"] = dict(conn.execute(bench_query("pages_storage")).fetchall())
            projects = {size: write_layer(conn, memories, vectors_of, size, seed, say) for size in sizes}
            user_id = conn.execute(bench_query("layers_user_id"), {"email": EMAIL}).fetchone()[0]
            for moment in MOMENTS:
                say(f"reaching {moment}")
                took = reach(conn, moment, say)
                say(f"measuring {moment}")
                figures["moments"][moment] = took | {
                    "bytes": footprint.measure(conn),
                    "layers": {size: measure(conn, user_id, projects[size], questions) for size in sizes},
                }
                if cold:
                    say(f"measuring {moment}, cold")
                    conn.close()  # each cold recall restarts the server
                    figures["moments"][moment]["cold"] = {
                        size: measure_cold(cluster, user_id, projects[size], questions) for size in sizes
                    }
                    conn = psycopg.connect(cluster.url())
                if explain:
                    conn.autocommit = True
                    figures["moments"][moment]["nested"] = nested_plans(
                        conn, user_id, projects[max(sizes)], questions[0]
                    )
                    conn.autocommit = False
            conn.execute(bench_query("pages_autovacuum_reset"))
            conn.commit()
        finally:
            conn.close()
    return figures


def run_to_fast_recall(
    sizes, seed: int, adr_corpus: Path, timeout_minutes: float, vectors: str = "random", say=print
) -> dict:
    """From the end of an import to fast recall, end to end, with nothing done by hand: pg_cron's
    one-minute index decision is switched on (the bench's cluster starts with every job paused), then the
    layers are written the import's way with autovacuum on (a build may start while they are written, as
    it would for a user), and from the import's end every POLL_SECONDS the member's recalls are measured
    and the indexes' states read, until every large layer's indexes are valid, autovacuum has visited
    both tables and the build job has nothing left (the postings' impact index rebuilt), or
    `timeout_minutes` pass. The import's own seconds are recorded beside, and at the end
    the bytes per memory (footprint.py: every layer's rows, the large layer's HNSW indexes included)."""
    memories, vectors_of, questions = corpus(adr_corpus, seed, vectors, say)
    os.environ["ZM_EMBEDDING_MODEL"] = "none"
    figures = {"machine": machine(), "sizes": list(sizes), "vectors": vectors, "goal_buffers": GOAL_BUFFERS}
    figures["timeline"] = []
    with throwaway_cluster(ROOT, say) as cluster, psycopg.connect(cluster.url()) as conn:
        figures["server"] = server(conn)["version"]
        conn.execute(bench_query("pages_activate_index_decision"))
        conn.commit()
        import_started = time.monotonic()
        projects = {size: write_layer(conn, memories, vectors_of, size, seed, say) for size in sizes}
        user_id = conn.execute(bench_query("layers_user_id"), {"email": EMAIL}).fetchone()[0]
        conn.commit()
        started, ended_at = time.monotonic(), datetime.now(UTC)
        before = vacuum_stats(conn)
        figures["import_seconds"] = round(started - import_started)
        figures["import_ended_at"] = ended_at.isoformat(timespec="seconds")
        figures["load_average_at_import_end"] = [round(x, 2) for x in os.getloadavg()]
        figures["index_builds_during_import"] = build_runs(conn)
        while True:
            point = {"seconds": round(time.monotonic() - started)}
            point["indexes"] = dict(conn.execute(bench_query("pages_index_states")).fetchall())
            point["vacuum"] = vacuum_stats(conn)
            conn.commit()
            point["layers"] = {size: measure(conn, user_id, projects[size], questions) for size in sizes}
            figures["timeline"].append(point)
            say(
                f"{point['seconds']} s: {point['indexes']} hybrid buffers "
                f"{ {size: f['hybrid']['buffers_p50'] for size, f in point['layers'].items()} }"
            )
            point["build_job_scheduled"] = conn.execute(bench_query("pages_build_job_scheduled")).fetchone()[0]
            conn.commit()
            settled = (
                all(state == "valid" for state in point["indexes"].values())
                and vacuumed_since(before, point["vacuum"])
                and not point["build_job_scheduled"]
            )
            if settled or point["seconds"] > timeout_minutes * 60:
                break
            time.sleep(POLL_SECONDS)
        figures["index_builds"] = build_runs(conn)
        figures["bytes"] = footprint.measure(conn)
        conn.commit()
    figures["settled"] = settled
    figures["seconds_to_goal"] = {size: seconds_to_goal(figures["timeline"], size) for size in sizes}
    return figures


def build_runs(conn: psycopg.Connection) -> list[dict]:
    """pg_cron's runs of the index builds so far: which index, when it started and ended, its status."""
    rows = conn.execute(bench_query("pages_index_build_runs")).fetchall()
    conn.commit()
    return [
        {"job": job, "start": start, "end": end, "status": status, "message": message}
        for job, start, end, status, message in rows
    ]


def vacuum_stats(conn: psycopg.Connection) -> dict:
    """Per table (memories, postings): autovacuum's visits, dead rows, rows inserted since a vacuum."""
    return {
        table: {"autovacuums": visits, "dead": dead, "inserted_since_vacuum": inserted}
        for table, visits, dead, inserted in conn.execute(bench_query("pages_vacuum_stats")).fetchall()
    }


def vacuumed_since(before: dict, now: dict) -> bool:
    """Whether autovacuum has visited both tables since the import's end, or had already visited them
    after its last write (nothing dead, nothing inserted since)."""
    return all(
        now[t]["autovacuums"] > before[t]["autovacuums"] or not (now[t]["dead"] or now[t]["inserted_since_vacuum"])
        for t in now
    )


def seconds_to_goal(timeline: list[dict], size: int) -> int | None:
    """When a layer's hybrid recall first touched no more than GOAL_BUFFERS, from the import's end."""
    return next((p["seconds"] for p in timeline if p["layers"][size]["hybrid"]["buffers_p50"] <= GOAL_BUFFERS), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    kinds = ("plain", "main", "external", "extended")
    parser.add_argument("--storage", choices=kinds, default=None, help="set on both vector columns before writing")
    parser.add_argument("--toast-target", type=int, default=None, help="the table's toast_tuple_target")
    parser.add_argument("--search-storage", choices=kinds, default=None, help="set on the search column first")
    parser.add_argument("--adr-corpus", type=Path, default=ADR_CORPUS)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--explain", action="store_true", help="auto_explain the nested plans")
    parser.add_argument(
        "--cold",
        action="store_true",
        help=f"shared_buffers {COLD_SHARED_BUFFERS}, and each recall also measured cold: the server restarted and "
        "the OS page cache dropped first (root only)",
    )
    parser.add_argument(
        "--to-fast-recall",
        action="store_true",
        help="instead of the moments: pg_cron's index decision on while the import writes, then from the import's "
        "end the recalls measured every minute until the large layers' indexes are valid",
    )
    parser.add_argument("--timeout-minutes", type=float, default=45)
    parser.add_argument(
        "--vectors",
        choices=("random", "real"),
        default="random",
        help="random unit vectors (the default: exact scans read every vector whatever its values), or the "
        "corpus's own embeddings, perturbed in copies as the layer bench does (what an HNSW walk visits depends "
        "on them; embedding the corpus takes a few minutes)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.to_fast_recall:
        print_json(run_to_fast_recall(sizes, args.seed, args.adr_corpus, args.timeout_minutes, args.vectors), args.out)
        return
    figures = run(
        sizes,
        args.storage,
        args.toast_target,
        args.seed,
        args.explain,
        args.adr_corpus,
        args.search_storage,
        cold=args.cold,
        vectors=args.vectors,
    )
    print_json(figures, args.out)


def print_json(figures: dict, out: Path | None) -> None:
    """The figures as json on stdout, and in `out` when given."""
    text = json.dumps(figures, indent=2, default=str)
    if out:
        out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
