"""python -m zm_roi_bench.copy_noise — how far each offline model moves a real varied copy, and the bench's
perturbation that moves a copy as far (layers.NOISE).

A layer larger than the real corpus holds varied copies (layers.varied_copy: the original's title
numbered, its body followed by another memory's first sentence), and a copy's vectors are its
original's, perturbed per dimension and normalised again, since embedding 100,000 texts would take hours.
Here a sample of copies is embedded for real with both offline models. Per model it reports the median
cosine between an original and its real copy, and the sign bits that differ around the model's centre
(roi.embedding_centre, read from supabase/schemas/10_memory_core.sql). Then the per-dimension noise that
gives that cosine: a unit vector plus Gaussian noise of σ in d dimensions keeps the cosine 1 / sqrt(1 +
d σ²). Last, the same two figures for the perturbation in force (layers.NOISE), simulated on the same
originals, and for the former one noise of both columns.
"""

from __future__ import annotations

import argparse
import datetime
import math
import random
import re
import statistics
from pathlib import Path

from zm_roi import embeddings
from zm_roi.localdb import project_root
from zm_roi_bench import layers, report
from zm_roi_bench.cluster import machine

SAMPLE = 150
# The one perturbation both columns had before layers.NOISE was set per model (decision 0048).
FORMER_NOISE = 0.02


def noise_for_cosine(cosine: float, dimensions: int = embeddings.DIMENSIONS) -> float:
    """The per-dimension σ whose perturbation keeps a unit vector at `cosine` to itself."""
    return math.sqrt((1 / cosine**2 - 1) / dimensions)


def centres(root: Path) -> dict[str, list[float]]:
    """Each offline model's centre, as roi.embedding_centre holds it."""
    sql = (root / "supabase" / "schemas" / "10_memory_core.sql").read_text()
    found = re.findall(r"when '([^']+)' then '\[([^\]]*)\]'", sql[sql.index("create function roi.embedding_centre") :])
    return {model: [float(x) for x in numbers.split(",")] for model, numbers in found}


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def bits_apart(a: list[float], b: list[float], centre: list[float]) -> int:
    """How many sign bits around `centre` differ between two vectors (roi.embedding_bits' bits)."""
    return sum((x > c) != (y > c) for x, y, c in zip(a, b, centre, strict=True))


def run(root: Path, adr_corpus: Path, sample: int, seed: int, say) -> dict:
    memories, _ = layers.real_memories(root, adr_corpus)
    n = len(memories)
    rows = [n * (1 + k % 3) + k * (n // sample) for k in range(sample)]  # copies 1 to 3 of spread originals
    originals = [embeddings.memory_text(memories[i % n]["title"], memories[i % n]["body"]) for i in rows]
    copies = [embeddings.memory_text(*layers.varied_copy(memories, i)) for i in rows]
    centre_of = centres(root)
    rng = random.Random(seed)  # noqa: S311 - a reproducible simulation, not secrets
    models = []
    for column, model in layers.MODELS.items():
        say(f"embedding {sample} originals and their real copies with {model}")
        a, b = layers.passages(originals, model), layers.passages(copies, model)
        real_cosine = statistics.median(cosine(x, y) for x, y in zip(a, b, strict=True))

        def apart(copies: list[list[float]], a=a, model=model) -> dict:
            return {
                "cosine": round(statistics.median(cosine(x, y) for x, y in zip(a, copies, strict=True)), 4),
                "bits_apart": statistics.median(
                    bits_apart(x, y, centre_of[model]) for x, y in zip(a, copies, strict=True)
                ),
            }

        models.append(
            {
                "column": column,
                "model": model,
                "real_copy": apart(b),
                "noise_matching_real": round(noise_for_cosine(real_cosine), 4),
                "noise_in_force": layers.NOISE[column],
                "perturbed_copy": apart([layers.perturbed(v, rng, layers.NOISE[column]) for v in a]),
                "formerly_perturbed_copy": apart([layers.perturbed(v, rng, FORMER_NOISE) for v in a]),
                "centred_norm": round(statistics.median(math.dist(x, centre_of[model]) for x in a), 3),
            }
        )
    return {
        "date": datetime.date.today().isoformat(),
        "label": "copy-noise",
        "machine": machine(),
        "sample": sample,
        "seed": seed,
        "models": models,
    }


def render(results: dict) -> str:
    lines = [
        f"# How far a varied copy moves each model's vector, real and perturbed ({results['date']})",
        "",
        f"`python -m zm_roi_bench.copy_noise`: {results['sample']} rows past the originals of the real-text "
        "layer (copies 1 to 3 of originals spread over the corpus), each embedded for real with both offline "
        "models beside its original; medians. Bits apart: sign bits around the model's centre "
        "(roi.embedding_centre). The perturbed copy is the original's vector with the noise in force "
        f"(layers.NOISE), seed {results['seed']}.",
        "",
        report.machine_line(results["machine"]),
        "",
        "| column | model | distance of a vector from its centre | real copy: cosine / bits apart "
        "| noise that gives that cosine | noise in force | perturbed copy: cosine / bits apart "
        f"| with the former noise {FORMER_NOISE} |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in results["models"]:
        lines.append(
            f"| `{m['column']}` | {m['model']} | {m['centred_norm']} | {m['real_copy']['cosine']} / "
            f"{m['real_copy']['bits_apart']:g} | {m['noise_matching_real']} | {m['noise_in_force']} | "
            f"{m['perturbed_copy']['cosine']} / {m['perturbed_copy']['bits_apart']:g} | "
            f"{m['formerly_perturbed_copy']['cosine']} / {m['formerly_perturbed_copy']['bits_apart']:g} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.copy_noise", description=__doc__)
    layers.one_layer_arguments(parser, root)
    parser.add_argument("--sample", type=int, default=SAMPLE)
    args = parser.parse_args(argv)
    results = run(root, Path(args.adr_corpus), args.sample, args.seed, lambda text: print(text, flush=True))
    return report.publish(results, Path(args.out), render)


if __name__ == "__main__":
    raise SystemExit(main())
