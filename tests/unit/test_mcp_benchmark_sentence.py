"""The MCP tool's sentence for the user carries the database's hint when a run left a semantic leg out."""

from zm_roi.mcp_server import benchmark_sentence


def test_a_started_run_says_the_hint_to_re_embed():
    hint = "Semantic recall by model-B was left out of this run: ... Run `zm-roi embed` to re-embed them."
    sentence = benchmark_sentence({"status": "started", "probes": 3, "hint": hint})
    assert sentence.startswith("Benchmark started with 3 questions") and sentence.endswith(" " + hint)
    assert "zm-roi embed" not in benchmark_sentence({"status": "started", "probes": 3})
