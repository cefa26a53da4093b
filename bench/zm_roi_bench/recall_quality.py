"""python -m zm_roi_bench.recall_quality — how often recall puts the source memory in its top 10.

Measured on real engineering memories nobody on this team wrote (`../shared/eval`, read at run time,
never copied into the repo) with two question sets, each pinned to the source's project as the
benchmark pins it: paraphrased questions we wrote ourselves (`bench/eval/adr-paraphrases.jsonl`,
a line number of the corpus and our question; no corpus text) and the deterministic templates.
For each set: hit@10, hit@1 and MRR@10 for the lexical recall, each semantic leg alone (e5, MiniLM),
the two-leg configuration as it was (k 50, weights 1 / 1.5), the bundled recall with one embedding
(two legs) and with both (three legs), plus the fusion grid tried on the paraphrases (how the bundled
k and weights were chosen). Embeddings come from the two offline models; no network.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

import psycopg

from zm_roi import embeddings
from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.localdb import project_root
from zm_roi_bench.cluster import throwaway_cluster
from zm_roi_bench.sql import bench_query

EMAIL = "eval@zm-roi.example"
RRF_K = 50  # the two-leg configuration before the third leg
LEGS: dict[int, list] = {}  # raw legs per question set, for --dump
WEIGHTS = (0.5, 1.0, 1.5, 2.0, 3.0)  # semantic weight, lexical fixed at 1.0 (two legs)
# The three-leg grid: k, then the lexical, e5 and MiniLM weights.
GRID_K = (5, 10, 20, 30, 50)
GRID_WEIGHTS = (0.5, 1.0, 1.25, 1.5, 2.0)
GRID: dict[str, dict] = {}  # per question set: (k, weights) -> ranks
BIT_CANDIDATES = [0]  # set by --bit-candidates
MEANS: dict[str, str] = {}  # the corpus's mean vector per column, with --bit-centred
ZERO = embeddings.literal([0.0] * 384)
SHIPPED = (5, (1.0, 1.25, 1.25))  # public.recall's k and weights (lexical, e5, MiniLM)
# Each semantic leg's statement; --bit-candidates swaps in the binary-quantised legs (decision 0021).
SEMANTIC = {"semantic": ("quality_semantic_leg", "embedding"), "minilm": ("quality_minilm_leg", "embedding_minilm")}
# --sweep: candidates a leg ranks exactly after the cut by sign bits (None: every memory, no cut).
SWEEP = (10, 20, 40, 80, 160, None)


def load(conn: psycopg.Connection, corpus: list[dict]) -> dict:
    by_project: dict[str, list[MemoryLine]] = defaultdict(list)
    for row in corpus:
        by_project[row["project"]].append(MemoryLine(kind=row["kind"], title=row["title"], body=row["body"]))
    for project, lines in by_project.items():
        insert_memories(conn, lines, Target(EMAIL, project=project))
    user_id = conn.execute("select id from auth.users where email = %s", (EMAIL,)).fetchone()[0]
    ids = {(p, t, b): i for i, p, t, b in conn.execute(bench_query("quality_memory_ids"), {"user_id": user_id})}
    projects = dict(conn.execute("select name, id from public.projects").fetchall())
    return {"user_id": user_id, "ids": ids, "projects": projects}


def leg_sql(name: str, column: str) -> str:
    """A semantic leg's statement for `column`: the bit leg is written for e5's and read for MiniLM's."""
    text = bench_query(name)
    return text if column == "embedding" or "embedding_minilm" in text else text.replace("embedding", column)


def rank_of(target, ranked: list) -> int | None:
    return ranked.index(target) + 1 if target in ranked[:10] else None


def fuse(lexical: list, semantic: list, weight: float) -> list:
    return fuse_legs((lexical, semantic), (1.0, weight), RRF_K)


def fuse_legs(legs: tuple, weights: tuple, k: int) -> list:
    """Reciprocal rank fusion as public.recall computes it (each leg its best 20)."""
    score: dict = defaultdict(float)
    for leg, weight in zip(legs, weights, strict=True):
        for rank, memory in enumerate(leg[:20], start=1):
            score[memory] += weight / (k + rank)
    return sorted(score, key=lambda m: -score[m])


def metrics(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {
        "n": n,
        "hit10": sum(r is not None for r in ranks),
        "hit1": sum(r == 1 for r in ranks),
        "mrr": round(sum(1 / r for r in ranks if r) / n, 3),
    }


def evaluate(conn: psycopg.Connection, data: dict, questions: list[tuple]) -> dict:
    """questions: (question text, target memory id, project name). Runs as the evaluation user."""
    texts = [q for q, _, _ in questions]
    vectors = embeddings.embed(texts, as_query=True, model=embeddings.OFFLINE_MODEL).vectors
    minilm = embeddings.embed(texts, as_query=True, model=embeddings.MINILM_MODEL).vectors
    ranks: dict[str, list] = defaultdict(list)
    grid: dict[tuple, list] = GRID.setdefault(f"set {len(GRID)}", defaultdict(list))
    legs = LEGS.setdefault(len(LEGS), [])
    act_as(conn, claims_for(data["user_id"], EMAIL))
    for (question, target, project), vector, second in zip(questions, vectors, minilm, strict=True):
        args = {
            "question": question,
            "project_id": data["projects"][project],
            "count": 20,
            "embedding": embeddings.literal(vector),
            "embedding_minilm": embeddings.literal(second),
            "candidates": BIT_CANDIDATES[0],
            "embedding_mean": MEANS.get("embedding", ZERO),
            "embedding_minilm_mean": MEANS.get("embedding_minilm", ZERO),
        }
        lexical_rows = conn.execute(bench_query("quality_lexical_leg"), args).fetchall()
        semantic_rows = conn.execute(leg_sql(*SEMANTIC["semantic"]), args).fetchall()
        minilm_rows = conn.execute(leg_sql(*SEMANTIC["minilm"]), args).fetchall()
        lexical = [r[0] for r in lexical_rows]
        semantic = [r[0] for r in semantic_rows]
        third = [r[0] for r in minilm_rows]
        legs.append(
            {
                "target": str(target),
                "lexical": [(str(i), float(s)) for i, s in lexical_rows],
                "semantic": [(str(i), float(s)) for i, s in semantic_rows],
                "minilm": [(str(i), float(s)) for i, s in minilm_rows],
            }
        )
        hybrid = [r[0] for r in conn.execute(bench_query("quality_hybrid"), args)]
        three = [r[0] for r in conn.execute(bench_query("quality_three_legs"), args)]
        before = [r[0] for r in conn.execute(bench_query("quality_lexical_leg_title_weighted"), args)]
        ranks["lexical, title weighted (before)"].append(rank_of(target, before))
        ranks["lexical"].append(rank_of(target, lexical))
        ranks["semantic (e5)"].append(rank_of(target, semantic))
        ranks["semantic (MiniLM)"].append(rank_of(target, third))
        ranks["hybrid, title weighted (before)"].append(rank_of(target, fuse(before, semantic, 1.5)))
        ranks["two legs as before (k 50, 1 / 1.5)"].append(rank_of(target, fuse(lexical, semantic, 1.5)))
        ranks["public.recall, one embedding (two legs)"].append(rank_of(target, hybrid))
        ranks["public.recall, both embeddings (three legs)"].append(rank_of(target, three))
        ranks["public.recall's fusion (k 5, 1 / 1.25 / 1.25) of these legs"].append(
            rank_of(target, fuse_legs((lexical, semantic, third), SHIPPED[1], SHIPPED[0]))
        )
        for weight in WEIGHTS:
            ranks[f"rrf semantic x{weight}"].append(rank_of(target, fuse(lexical, semantic, weight)))
        for k, weights in itertools.product(GRID_K, itertools.product(GRID_WEIGHTS, repeat=3)):
            grid[(k, weights)].append(rank_of(target, fuse_legs((lexical, semantic, third), weights, k)))
    conn.execute("reset role")
    return {name: metrics(r) for name, r in ranks.items()}


def sweep(conn: psycopg.Connection, questions: list[tuple]) -> dict:
    """Each semantic leg over the whole corpus as one layer, with N candidates by the stored sign bits
    ranked exactly (quality_sweep_leg): hit@10, hit@1, MRR@10 and how many of the exact top 10 it keeps."""
    texts = [q for q, _, _ in questions]
    found: dict = {}
    for column, model in (("embedding", embeddings.OFFLINE_MODEL), ("embedding_minilm", embeddings.MINILM_MODEL)):
        vectors = embeddings.embed(texts, as_query=True, model=model).vectors
        sql = bench_query("quality_sweep_leg").replace("m.embedding", f"m.{column}")
        tops = {
            n: [
                [r[0] for r in conn.execute(sql, {"embedding": embeddings.literal(v), "model": model, "candidates": n})]
                for v in vectors
            ]
            for n in SWEEP
        }
        for n, top in tops.items():
            figure = metrics([rank_of(target, t) for (_, target, _), t in zip(questions, top, strict=True)])
            kept = sum(len(set(t) & set(e)) for t, e in zip(top, tops[None], strict=True))
            figure["kept_of_exact_top_10"] = round(kept / len(top), 2)
            found[f"{column} {n or 'all'}"] = figure
    return found


def render_sweep(name: str, found: dict) -> str:
    lines = [
        f"### {name}: one leg over the whole corpus as one layer, N candidates by sign bits re-ranked exactly",
        "",
        "| leg, N | hit@10 | hit@1 | MRR@10 | of the exact top 10 kept |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {key} | {m['hit10']}/{m['n']} | {m['hit1']} | {m['mrr']:.3f} | {m['kept_of_exact_top_10']} |"
        for key, m in found.items()
    ]
    return "\n".join(lines + [""])


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def _key(row: dict) -> tuple:
    """A corpus memory's identity once imported (titles alone repeat across repositories)."""
    return (row["project"], row["title"], row["body"])


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.recall_quality", description=__doc__)
    parser.add_argument("--corpus", default=str(root.parent / "shared" / "eval" / "public-adr-corpus.jsonl"))
    parser.add_argument("--dump", help="write both legs of every question (ids and scores) as JSON here")
    parser.add_argument("--questions", default=str(root / "bench" / "eval" / "adr-paraphrases.jsonl"))
    parser.add_argument(
        "--bit-candidates",
        type=int,
        default=0,
        help="experiment (decision 0021): each semantic leg's N best by the Hamming distance of the vectors' "
        "sign bits, re-ranked by exact distance; public.recall's own rows stay exact",
    )
    parser.add_argument(
        "--bit-centred",
        action="store_true",
        help="with --bit-candidates: the signs after the corpus mean is subtracted",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also each semantic leg over the whole corpus with N candidates by the stored sign bits (decision 0030)",
    )
    args = parser.parse_args(argv)
    corpus_path = Path(args.corpus)
    if not corpus_path.exists():
        print(f"zm-roi bench: no evaluation corpus at {corpus_path} (pass --corpus)", file=sys.stderr)
        return 2
    corpus = [json.loads(line) for line in corpus_path.read_text(encoding="utf-8").splitlines()]
    paraphrases = [json.loads(line) for line in Path(args.questions).read_text(encoding="utf-8").splitlines()]
    with throwaway_cluster(root, say=_say) as cluster, psycopg.connect(cluster.url()) as conn:
        _say(f"importing and embedding {len(corpus)} memories")
        data = load(conn, corpus)
        conn.commit()
        if args.bit_candidates and args.bit_centred:
            statement, MEANS["embedding"], MEANS["embedding_minilm"] = conn.execute(
                bench_query("quality_bq_columns_centred"), {}
            ).fetchone()
            conn.execute(statement)
            conn.commit()
        elif args.bit_candidates:
            conn.execute(bench_query("routes_bq_columns"))
            conn.commit()
        if args.bit_candidates:
            BIT_CANDIDATES[0] = args.bit_candidates
            SEMANTIC.update(
                semantic=("quality_semantic_leg_bit", "embedding"),
                minilm=("quality_semantic_leg_bit", "embedding_minilm"),
            )
        para = [
            (p["question"], data["ids"][_key(corpus[p["line"] - 1])], corpus[p["line"] - 1]["project"])
            for p in paraphrases
        ]
        templated = [
            (q, i, p) for i, p, q in conn.execute(bench_query("quality_templates"), {"user_id": data["user_id"]})
        ]
        results = {"paraphrased": evaluate(conn, data, para), "templated": evaluate(conn, data, templated)}
        swept = {"paraphrased": sweep(conn, para), "templated": sweep(conn, templated)} if args.sweep else {}
    print(render(results))
    print(render_grid())
    for name, found in swept.items():
        print(render_sweep(name, found))
    if args.dump:
        Path(args.dump).write_text(json.dumps(LEGS))
    return 0


def render(results: dict) -> str:
    lines = []
    for name, table in results.items():
        n = next(iter(table.values()))["n"]
        lines += [
            f"### {name} questions ({n}), pinned to the source's project",
            "",
            "| recall | hit@10 | hit@1 | MRR@10 |",
            "| --- | --- | --- | --- |",
        ]
        for recall, m in table.items():
            lines.append(f"| {recall} | {m['hit10']}/{n} ({m['hit10'] / n:.0%}) | {m['hit1']} | {m['mrr']:.3f} |")
        lines.append("")
    return "\n".join(lines)


def render_grid() -> str:
    """The three-leg grid on the paraphrases: per k the best weights by MRR@10 (ties: hit@1, hit@10),
    the spread over every weight triple, and the templated figures of each best triple."""
    paraphrased, templated = (GRID[name] for name in sorted(GRID))
    lines = [
        "### three-leg fusion grid (paraphrased; weights lexical / e5 / MiniLM)",
        "",
        "| k | best weights | hit@1 | hit@10 | MRR@10 | MRR@10, all weights | templated hit@10 / hit@1 / MRR |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k in GRID_K:
        cells = {w: metrics(r) for (kk, w), r in paraphrased.items() if kk == k}
        best = max(cells, key=lambda w: (cells[w]["mrr"], cells[w]["hit1"], cells[w]["hit10"]))
        m, t = cells[best], metrics(templated[(k, best)])
        mrrs = [c["mrr"] for c in cells.values()]
        lines.append(
            f"| {k} | {' / '.join(str(x) for x in best)} | {m['hit1']} | {m['hit10']} | {m['mrr']:.3f} "
            f"| {min(mrrs):.3f}–{max(mrrs):.3f} | {t['hit10']} / {t['hit1']} / {t['mrr']:.3f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
