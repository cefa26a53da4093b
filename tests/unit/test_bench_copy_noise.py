"""The copy-noise lab's arithmetic, by hand and in seeded simulation: the perturbation it derives from a
cosine gives copies that cosine, and its bits are roi.embedding_bits' bits around a centre."""

from __future__ import annotations

import random
import statistics

from zm_roi_bench import copy_noise, layers


def test_the_noise_for_a_cosine_by_hand():
    # 1 / 0.931² = 1.153721; (1.153721 - 1) / 384 = 4.00314e-4; its square root 0.0200078.
    assert abs(copy_noise.noise_for_cosine(0.931) - 0.0200078) < 1e-6
    assert copy_noise.noise_for_cosine(1.0) == 0.0


def test_copies_perturbed_by_that_noise_keep_that_cosine_in_seeded_simulation():
    """(Fails if `perturbed` drops its noise argument for a constant: the e5 copies then sit at 0.931.)"""
    rng = random.Random(7)  # noqa: S311 - a reproducible simulation, not secrets
    for target in (0.9889, 0.9038):
        noise = copy_noise.noise_for_cosine(target)
        cosines = []
        for _ in range(200):
            raw = [rng.gauss(0, 1) for _ in range(384)]
            norm = sum(x * x for x in raw) ** 0.5
            vector = [x / norm for x in raw]
            cosines.append(copy_noise.cosine(vector, layers.perturbed(vector, rng, noise)))
        assert abs(statistics.median(cosines) - target) < 0.002, (target, statistics.median(cosines))


def test_bits_apart_counts_the_sign_bits_that_differ_around_the_centre():
    centre = [0.5, 0.0, -0.5, 0.0]
    # signs around the centre: (+, +, +, -) against (-, +, -, +): three differ.
    assert copy_noise.bits_apart([0.6, 0.1, 0.0, -0.1], [0.4, 0.2, -0.6, 0.3], centre) == 3


def test_a_copy_s_text_is_the_one_the_layer_writes():
    memories = [{"kind": "decision", "title": f"T{i}", "body": f"Body {i}. More of {i}."} for i in range(5)]
    rows = list(layers.layer_rows(memories, {}, 8, seed=1))
    assert [r[2:4] for r in rows[5:]] == [layers.varied_copy(memories, i) for i in range(5, 8)]
    assert layers.varied_copy(memories, 6) == ("T1 (1)", "Body 1. More of 1. Body 3.")
