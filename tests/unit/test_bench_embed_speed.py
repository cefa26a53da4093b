"""The embedding bench's arithmetic: a model's float operations a memory and what the goal asks of a core,
against figures computed by hand."""

import pytest

from zm_roi_bench import embed_speed


def test_an_encoder_pass_counts_projections_feed_forward_and_attention():
    # 100 tokens through 12 layers of width 384 and 1,536: per layer 4·100·384² = 58,982,400 (projections)
    # + 2·100·384·1,536 = 117,964,800 (feed-forward) + 2·100²·384 = 7,680,000 (attention) multiply-adds.
    assert embed_speed.encoder_gflop(100, embed_speed.E5_SHAPE) == pytest.approx(2 * 12 * 184_627_200 / 1e9)
    assert embed_speed.encoder_gflop(100, embed_speed.MINILM_SHAPE) == pytest.approx(2 * 6 * 184_627_200 / 1e9)


def test_the_goal_is_stated_as_a_multiple_of_the_rate_measured():
    figures = embed_speed.arithmetic({"e5": [100, 100], "minilm": [100]}, {"e5": 100.0, "minilm": 80.0})
    assert figures["e5"] == {"tokens_per_memory": 100.0, "gflop_per_memory": 4.431, "gflop_per_cpu_s": 44.3}
    assert figures["minilm"] == {"tokens_per_memory": 100.0, "gflop_per_memory": 2.216, "gflop_per_cpu_s": 27.7}
    # Both models: 6.647 GFLOP a memory in 0.18 CPU s; 33 a second on 2 cores: 6.647 · 33 / 2 a core.
    assert figures["goal"] == {
        "memories_per_s": 33,
        "cores": 2,
        "gflop_per_core_s_needed": 109.7,
        "gflop_per_cpu_s_reached": 36.9,
        "times_the_reached_rate": 2.97,
    }
