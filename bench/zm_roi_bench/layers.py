"""`make bench SIZE=layers`: pinned recall cost against the size of the pinned layer, on real text.

The synthetic corpus of `make bench` has pinned layers of at most ~10,000 rows and a Zipf vocabulary;
real memories match more of a question's words, so they cost more per row (issue 22). This builds one
project per layer size from real memories: the demo corpus (in the package) and, when present, the
public ADR corpus (`../shared/eval`, read at run time, never copied into the repo). A layer larger
than the corpus holds varied copies: a distinct title and the body followed by another memory's first
sentence. Every row has both embeddings the offline configuration ships (`embeddings.configured_models`:
e5 in `embedding`, MiniLM in `embedding_minilm`; a copy gets its original's two vectors, each slightly
perturbed), so the hybrid recall ranks every row of the layer in each semantic leg, as with a fully
embedded layer.

Questions: the paraphrases of `bench/eval/adr-paraphrases.jsonl` when the ADR corpus is there, and the
deterministic template questions of demo memories; each with its real query embedding from both
models. Every recall runs as a member of the project with row-level security applied, in blocks of
all questions that take turns (`measure`):
- `lexical_before` / `lexical`: today's lexical leg (every match of the layer ranked from the covering
  indexes the postings replaced, recreated on the bench cluster) and `public.recall_lexical`;
- `hybrid_before`: today's two-leg hybrid (that lexical leg fused with the e5 leg, one query embedding),
  as a plain statement;
- `hybrid`: the shipped three-leg `public.recall` (postings, e5 and MiniLM), with both query embeddings;
  in a layer of 20,000 rows or more it reads that layer's own HNSW indexes, built first with the
  statements pg_cron would run (`roi.layer_vector_indexes`).
p50 / p95 per layer, and how often the source memory or one of its copies is in the top 10 (ranking
quality itself: `make bench-recall`). The report's json records each arm's legs (`arms`: the query
embeddings the timed statement binds and every question carries) and the models of the stored vectors
(`embedded`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import psycopg

from zm_roi import backfill, embeddings
from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi_bench import footprint
from zm_roi_bench.cluster import machine, throwaway_cluster
from zm_roi_bench.sql import bench_query
from zm_roi_bench.timing import Series, timed

EMAIL = "layers@zm-roi.example"
LAYER_SIZES = (1_000, 10_000, 100_000)
ROUNDS = 2  # blocks per layer and recall; each asks every question twice (measure)
# Per column, the per-dimension perturbation of a copy's vector (before it is normalised again), set so that
# a copy moves as far from its original as the column's model moves a real varied copy (varied_copy's text,
# 150 of them embedded for real): median cosine e5 0.989, MiniLM 0.904; `python -m zm_roi_bench.copy_noise`,
# bench/results/2026-12-07-copy-noise.md. One 0.02 for both (cosine 0.931) had flipped twice the sign bits
# of a real e5 copy, since e5's vectors lie close together (docs/decisions/0048-copies-move-as-real-copies-do.md).
NOISE = {"embedding": 0.0077, "embedding_minilm": 0.0242}
TEMPLATED = 40  # template questions of demo memories, besides the paraphrases
RECALLS = ("lexical_before", "lexical", "hybrid_before", "hybrid")
# The embedding columns and their models, as the offline configuration fills them (e5 and MiniLM).
MODELS = embeddings.configured_models({})


def real_memories(root: Path, adr_corpus: Path) -> tuple[list[dict], list[dict]]:
    """(memories, paraphrase questions with their source's index); the ADR half only when it exists."""
    demo = root / "python" / "zm_roi" / "data" / "demo_corpus.jsonl"
    memories = [
        dict(json.loads(line), demo=True) for line in demo.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    questions = []
    if adr_corpus.exists():
        adr = [json.loads(line) for line in adr_corpus.read_text(encoding="utf-8").splitlines()]
        offset = len(memories)
        memories += adr
        paraphrases = root / "bench" / "eval" / "adr-paraphrases.jsonl"
        for line in paraphrases.read_text(encoding="utf-8").splitlines():
            p = json.loads(line)
            questions.append({"question": p["question"], "source": offset + p["line"] - 1, "set": "paraphrased"})
    keys = ("kind", "title", "body", "demo")
    return [{key: m.get(key, False) for key in keys} for m in memories], questions


def first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") + "."


def perturbed(vector: list[float], rng: random.Random, noise: float) -> list[float]:
    noisy = [x + rng.gauss(0, noise) for x in vector]
    norm = sum(x * x for x in noisy) ** 0.5
    return [x / norm for x in noisy]


def passages(texts: list[str], model: str) -> list[list[float]]:
    """The memories' vectors, in the backfill's batches, as an import computes them: e5's batch call runs
    all its texts' tokens at once, so one call on the whole corpus would hold all their activations."""
    return [
        vector
        for start in range(0, len(texts), backfill.BATCH)
        for vector in embeddings.embed(texts[start : start + backfill.BATCH], as_query=False, model=model).vectors
    ]


def layer_rows(memories: list[dict], vectors: dict[str, list[list[float]]], size: int, seed: int):
    """`size` rows of (original's index, kind, title, body, {column: embedding literal}): the originals
    first, then varied copies, each of a copy's vectors perturbed on its own."""
    rng = random.Random(seed)  # noqa: S311 - reproducible perturbations, not secrets
    n = len(memories)
    for i in range(size):
        base = memories[i % n]
        if i < n:
            literals = {column: embeddings.literal(v[i]) for column, v in vectors.items()}
            yield i, base["kind"], base["title"], base["body"], literals
            continue
        literals = {
            column: embeddings.literal(perturbed(v[i % n], rng, NOISE[column])) for column, v in vectors.items()
        }
        yield (i % n, base["kind"], *varied_copy(memories, i), literals)


def varied_copy(memories: list[dict], i: int) -> tuple[str, str]:
    """Row `i`'s title and body, past the originals: its original's title numbered by the copy, and its
    body followed by another memory's first sentence."""
    n = len(memories)
    base, copy = memories[i % n], i // n
    other = memories[(i * 7 + copy) % n]
    return f"{base['title']} ({copy})", f"{base['body']} {first_sentence(other['body'])}"


def build(conn: psycopg.Connection, memories: list[dict], vectors: dict, sizes, seed: int, say) -> dict:
    """One project per layer size, the evaluation user its member; returns the user, {size: project id} and,
    per size, {title: the originals a row of that title copies} (titles repeat across the ADR corpus)."""
    projects, originals = {}, {}
    for size in sizes:
        name = f"layer of {size}"
        insert_memories(
            conn, [MemoryLine(kind="episode", title=name, body="The layer's first row.")], Target(EMAIL, project=name)
        )
        projects[size] = conn.execute(bench_query("layers_project_id"), {"name": name}).fetchone()[0]
    user_id = conn.execute(bench_query("layers_user_id"), {"email": EMAIL}).fetchone()[0]
    for size in sizes:
        say(f"writing a layer of {size:,} real-text memories")
        originals[size] = defaultdict(set)
        with conn.cursor().copy(bench_query("layers_copy")) as copy:
            for original, kind, title, body, literals in layer_rows(memories, vectors, size - 1, seed):
                originals[size][title].add(original)
                copy.write_row(
                    (user_id, projects[size], kind, title, body)
                    + tuple(x for column in embeddings.LEGS for x in (literals[column], MODELS[column]))
                    + ("project",)
                )
    conn.commit()
    return {"user_id": user_id, "projects": projects, "originals": originals}


def build_layer_indexes(conn: psycopg.Connection, say) -> dict[str, float]:
    """The HNSW indexes the large layers get in production (pg_cron runs the same statements one at a
    time), built here directly; seconds per index."""
    seconds = {}
    while rows := conn.execute(bench_query("layers_index_statements")).fetchall():
        name, statement = rows[0]
        say(f"building {name}")
        started = time.monotonic()
        conn.execute(statement)
        seconds[name] = round(time.monotonic() - started, 1)
    return seconds


def questions_for(conn: psycopg.Connection, memories: list[dict], paraphrases: list[dict]) -> list[dict]:
    """The paraphrases and TEMPLATED template questions of demo memories, each with its query embedding
    from every model (a parameter named for its column)."""
    templated = []
    for i, memory in enumerate(memories):
        question = conn.execute(bench_query("layers_template_question"), memory).fetchone()[0]
        if memory["demo"] and question is not None and len(templated) < TEMPLATED:  # episodes have no template
            templated.append({"question": question, "source": i, "set": "templated"})
    return with_query_vectors(paraphrases + templated)


def with_query_vectors(questions: list[dict]) -> list[dict]:
    """Each question with its query embedding from every model, a parameter named for its column."""
    texts = [q["question"] for q in questions]
    vectors = {column: embeddings.embed(texts, as_query=True, model=model).vectors for column, model in MODELS.items()}
    return [
        dict(q, **{column: embeddings.literal(v[i]) for column, v in vectors.items()}) for i, q in enumerate(questions)
    ]


def arm_legs(sql: str, questions: list[dict]) -> list[str]:
    """The legs a timed statement fuses: lexical always, and each embedding column whose query
    embedding it binds and every question carries."""
    bound = [column for column in embeddings.LEGS if f"%({column})s" in sql]
    return ["lexical"] + [column for column in bound if all(q.get(column) for q in questions)]


def rotated(items: tuple, turn: int) -> tuple:
    """The items in order, starting from the turn-th (modulo their number)."""
    start = turn % len(items)
    return items[start:] + items[:start]


def measure(
    conn: psycopg.Connection,
    built: dict,
    questions: list[dict],
    recalls: tuple[str, ...] = RECALLS,
    rounds: range = range(ROUNDS),
    raw: bool = False,
    title_queries: tuple[str, ...] = ("layers_titles",),
) -> dict:
    """p50 / p95 of each recall per layer size, as the member, and the sources found in the top 10 (in
    round 0). Each recall asks every question in a block of its own, and the blocks take turns, their
    order rotating round by round. A block asks each question twice, timing both: the first ask
    (`first_ask`) after the other recalls' blocks, the second in steady state, as a team's agents
    recalling from the layer would find it (the figures the report's table shows). Taking turns question
    by question instead, the shipped hybrid always ran after today's exact scans of the same layer, which
    evict its pages from shared buffers: 20.1 ms at 100,000 rows where it takes 14.8 ms after a recall of
    its own kind. `raw`: every sample in the summaries too. `title_queries`: the named queries that map a
    recall's row ids to titles (another table's rows, as the anchor's, bring their own). `ranks`: per
    question, where the source or one of its copies first came (None past the 10th), round 0."""
    act_as(conn, claims_for(built["user_id"], EMAIL))
    results = {"as": conn.execute(bench_query("layers_caller")).fetchone()[0]}
    for size, project_id in built["projects"].items():
        by_query = [
            dict(conn.execute(bench_query(name), {"project_id": project_id}).fetchall()) for name in title_queries
        ]
        titles = {row_id: title for rows in by_query for row_id, title in rows.items()}
        originals = {memory_id: built["originals"][size].get(title, set()) for memory_id, title in titles.items()}
        sql = {recall: bench_query(f"layers_{recall}") for recall in recalls}
        first_ask = {recall: Series() for recall in recalls}
        series = {recall: Series() for recall in recalls}
        found = dict.fromkeys(recalls, 0)
        ranks: dict[str, list[int | None]] = {recall: [] for recall in recalls}
        for round_ in rounds:
            for recall in rotated(recalls, round_):
                for timings in (first_ask[recall], series[recall]):
                    for q in questions:
                        args = dict(q, project_id=project_id)
                        ms, rows = timed(lambda text=sql[recall], args=args: conn.execute(text, args).fetchall())
                        timings.add(ms)
                        if round_ == 0 and timings is series[recall]:
                            ranks[recall].append(source_rank(q["source"], rows, originals))
                            found[recall] += ranks[recall][-1] is not None
        per_size = {"rows": len(by_query[0])}  # what the member sees of the layer
        for recall in recalls:
            per_size[recall] = dict(
                series[recall].summary(raw=raw),
                first_ask=first_ask[recall].summary(raw=raw),
                source_in_top_10=found[recall],
                ranks=ranks[recall],
                questions=len(questions),
            )
        results[str(size)] = per_size
    conn.execute("reset role")
    conn.commit()
    return results


def source_rank(source: int, rows: list, originals: dict) -> int | None:
    """Where the source (or one of its copies) first comes in a recall's rows, from 1; None past the 10th."""
    return next((n for n, row in enumerate(rows[:10], start=1) if source in originals.get(row[0], ())), None)


def prepare(
    conn: psycopg.Connection, memories: list[dict], vectors: dict, sizes, seed: int, say, before: bool
) -> tuple[dict, dict]:
    """The layers written (`build`), with today's lexical covering indexes when `before` (the
    `lexical_before` arm reads them), vacuumed, the large layers' HNSW indexes built; returns what
    `build` returns and the bytes split, with how long the writes and each index took."""
    started_writing = time.monotonic()
    built = build(conn, memories, vectors, sizes, seed, say)
    written_in = time.monotonic() - started_writing
    if before:
        conn.execute(bench_query("layers_before_indexes"))
    conn.commit()
    say("vacuum analyze (index-only scans need the visibility map)")
    conn.autocommit = True
    conn.execute("vacuum analyze public.memories")
    conn.execute("vacuum analyze public.memory_postings")
    indexed_in = build_layer_indexes(conn, say)
    conn.autocommit = False
    storage = footprint.measure(conn)
    return built, dict(storage, written_seconds=round(written_in, 1), layer_indexes=indexed_in)


def one_layer_arguments(parser: argparse.ArgumentParser, root: Path) -> None:
    """What every lab on one real-text layer takes: its size, the copies' seed, the ADR corpus, where
    the report goes."""
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--adr-corpus", default=str(root.parent / "shared" / "eval" / "public-adr-corpus.jsonl"))
    parser.add_argument("--out", default=str(root / "bench" / "results"))


def embedded_corpus(root: Path, adr_corpus: Path, say) -> tuple[list[dict], list[dict], dict]:
    """The real memories, the paraphrase questions, and the memories' vectors per column."""
    memories, paraphrases = real_memories(root, adr_corpus)
    say(f"embedding {len(memories)} real memories with {', '.join(MODELS.values())}")
    texts = [embeddings.memory_text(m["title"], m["body"]) for m in memories]
    return memories, paraphrases, {column: passages(texts, model) for column, model in MODELS.items()}


def run(root: Path, adr_corpus: Path, sizes=LAYER_SIZES, seed: int = 42, say: Callable[[str], None] = print) -> dict:
    """Build the layers on a throwaway cluster and measure them; the raw figures for the report."""
    started = time.monotonic()
    memories, paraphrases, vectors = embedded_corpus(root, adr_corpus, say)
    with throwaway_cluster(root, say) as cluster, psycopg.connect(cluster.url()) as conn:
        built, storage = prepare(conn, memories, vectors, sizes, seed, say, before=True)
        embedded = defaultdict(dict)
        for column, model, count in conn.execute(bench_query("layers_embedded")):
            embedded[column][model] = count
        questions = questions_for(conn, memories, paraphrases)
        say(f"measuring {len(questions)} questions x 2 asks x {ROUNDS} blocks per layer and recall")
        layers = measure(conn, built, questions)
    return {
        "memories": len(memories),
        "adr_corpus": adr_corpus.exists(),
        "questions": {s: sum(q["set"] == s for q in questions) for s in ("paraphrased", "templated")},
        "rounds": ROUNDS,
        "measured_as": layers.pop("as"),
        "arms": {recall: arm_legs(bench_query(f"layers_{recall}"), questions) for recall in RECALLS},
        "models": MODELS,
        "embedded": embedded,
        "layers": layers,
        "storage": storage,
        "machine": machine(),
        "seconds": round(time.monotonic() - started, 1),
    }


LEG_NAMES = {"lexical": "lexical", "embedding": "e5", "embedding_minilm": "MiniLM"}


def arm_label(recall: str, arms: dict) -> str:
    """`lexical`, or the hybrid's legs today and now (from the json's `arms`): today's two-leg hybrid
    beside the shipped three-leg one."""
    if recall == "lexical":
        return recall
    before, now = (arms[arm] for arm in (f"{recall}_before", recall))
    names = [" + ".join(LEG_NAMES[leg] for leg in legs) for legs in (before, now)]
    return f"{recall}, {len(before)} legs ({names[0]}) → {len(now)} legs ({names[1]})"


def render(figures: dict) -> str:
    lines = [
        "| rows in the pinned project | recall, today → now | p50 today | p50 now | p95 today | p95 now "
        "| source in top 10, today / now |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for legs in figures["layers"].values():
        for recall in ("lexical", "hybrid"):
            before, now = legs[f"{recall}_before"], legs[recall]
            found = f"{before['source_in_top_10']} / {now['source_in_top_10']} of {now['questions']}"
            lines.append(
                f"| {legs['rows']:,} | {arm_label(recall, figures['arms'])} | {before['p50']:.1f} ms "
                f"| {now['p50']:.1f} ms | {before['p95']:.1f} ms | {now['p95']:.1f} ms | {found} |"
            )
    storage = figures["storage"]
    postings = sum(p["bytes"] for p in storage["parts"] if p["part"].startswith("postings"))
    lines += [
        "",
        f"Inverted index: {storage['postings']:,} postings for {storage['memories']:,} memories "
        f"({storage['postings_per_memory']:.0f} a memory), {postings / 2**20:,.0f} MB "
        f"beside {(storage['total_bytes'] - postings) / 2**20:,.0f} MB of memories and their indexes; the layers were "
        f"written (COPY, postings included) in {storage['written_seconds']:.0f} s.",
    ]
    if built := storage.get("layer_indexes"):
        each = ", ".join(f"{seconds:.0f}" for seconds in built.values())
        lines.append(
            f"Layer HNSW indexes (layers of 20,000 rows or more; today's hybrid reads none): {len(built)} built "
            f"in {sum(built.values()):.0f} s ({each} s each)."
        )
    return "\n".join(lines)


def write(figures: dict, out_dir: Path, command: str) -> tuple[Path, Path]:
    """bench/results/<date>-layers.md and .json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{datetime.date.today().isoformat()}-layers"
    md, raw = stem.with_suffix(".md"), stem.with_suffix(".json")
    raw.write_text(json.dumps(figures, indent=2) + "\n")
    questions = figures["questions"]
    md.write_text(
        f"# Pinned recall against the layer's size, real text ({command})\n\n"
        f"{figures['memories']} real memories (demo corpus{' + public ADR corpus' if figures['adr_corpus'] else ''}), "
        f"varied copies beyond that; {questions['paraphrased']} paraphrased and {questions['templated']} templated "
        f"questions, as a member with RLS applied, in {figures['rounds']} blocks per layer and recall that take "
        f"turns; a block asks every question twice, and the table times the second ask (steady state; the json "
        f"has the first as `first_ask`). Today: the "
        f"lexical leg over the covering indexes the postings replaced, and the two-leg hybrid (it fused with the e5 "
        f"leg, one query embedding). Now: `public.recall_lexical`, and the shipped three-leg `public.recall` with "
        f"both of the questions' real query embeddings ({', '.join(figures['models'].values())}; every row holds "
        f"both vectors). Source in top 10: the source or one of its copies, first round. "
        f"Machine: {figures['machine']['cores']} cores, load "
        f"{figures['machine']['load_average_at_start']} at the start; took {figures['seconds']:.0f} s.\n\n"
        + render(figures)
        + "\n\n## Bytes per memory, by structure (after `vacuum analyze` and the layers' HNSW indexes)\n\n"
        + footprint.render(figures["storage"])
        + "\n"
    )
    return md, raw
