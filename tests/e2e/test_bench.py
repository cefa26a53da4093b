"""`make bench` at a tiny size: the harness runs end to end and writes every section of the report.

Correctness of the harness only. Speed lives in bench/results/, never in an assertion here.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest

import zm_roi_bench as bench
from tests.conftest import ROOT
from zm_roi import embeddings
from zm_roi_bench import anchor, compare, layers, layers_compare, report
from zm_roi_bench.cluster import read_into_page_cache as cluster_read
from zm_roi_bench.measure import Plan

TINY = Plan(
    recall_calls=6,
    owners=3,
    rounds=2,
    idle_upkeep_calls=3,
    refill_cycles=1,
    rotation_cycles=1,
    round_trips=3,
    queue_rows=20,
    drain_rows=40,
    one_write_cycles=2,
    spread_write_cycles=1,
    model_delay_s=0.05,
)
SECTIONS = (
    "## Machine",
    "## PostgreSQL",
    "## Corpus",
    "## Measurements at 2,000 memories",
    "### Recall cost by layer size",
    "### Upkeep after writes",
    "### Waiting for a 0.05 s model",
    "## Targets (set for 1M memories; measured at 2,000)",
    "## EXPLAIN (ANALYZE, BUFFERS) of recall at 2,000",
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[Path, dict]:
    """One bench run at 2,000 memories on its own throwaway cluster."""
    out = tmp_path_factory.mktemp("bench-results")
    md, raw = bench.run(ROOT, [2000], "tiny", out, plan=TINY, command="pytest", say=lambda _: None)
    return md, json.loads(raw.read_text())


def test_the_report_has_every_section(tiny_run):
    md, _ = tiny_run
    text = md.read_text()
    for heading in SECTIONS:
        assert heading in text, f"missing section {heading!r}"
    assert "worker queue cost per row" in text and "4 worker processes draining 40 judgments" in text


def test_the_corpus_has_the_shape_the_issue_asks_for(tiny_run):
    corpus = tiny_run[1]["sizes"][0]["corpus"]
    assert corpus["memories"] == 2000
    assert (corpus["users"], corpus["teams"], corpus["projects"]) == (1000, 50, 500)
    knowledge = sum(n for kind, n in corpus["by_kind"].items() if kind != "episode")
    assert 0.5 < knowledge / corpus["memories"] < 0.7, "about 60% knowledge"
    assert set(corpus["by_scope"]) == {"personal", "project", "team"}
    assert corpus["body_chars"]["min"] >= 140 and corpus["body_chars"]["max"] <= 600


def test_every_measurement_made_its_calls(tiny_run):
    size = tiny_run[1]["sizes"][0]
    for mode in ("pinned_project", "pinned_team", "pinned_personal", "unpinned"):
        assert size["recall"][mode]["n"] > 0, mode
    runs = size["benchmark"]
    calls = TINY.owners * TINY.rounds
    assert runs["rpc"]["n"] == calls and runs["recalls_alone_sum"]["n"] == calls
    assert runs["statuses"].get("started", 0) + runs["statuses"].get("empty", 0) == TINY.owners + calls
    upkeep = size["upkeep"]
    refill = next(c for c in upkeep["cycles"] if c["kind"] == "refill")
    assert upkeep["owners"] == 1000
    # Upkeep visits every owner with a pool (at 2,000 memories a few users see no knowledge at all).
    assert refill["owners"] == upkeep["pools"]["owners"] > 900
    assert refill["added"] > 0 and refill["failures"] == 0
    assert upkeep["idle_outcome"]["owners"] == 0, "the idle cycle had nothing to do"
    worker = size["worker"]
    assert worker["status"] == "measured" and worker["queue_cost"]["n"] == TINY.queue_rows
    assert sorted(worker["drains"]) == ["1", "2", "4"]
    for count, drained in worker["drains"].items():
        rounds = 1 + len(drained["put_off"])  # a judgment a failed attempt put off is taken by another round
        assert (drained["judged"], drained["left_in_queue"], drained["exit_codes"]) == (
            TINY.drain_rows,
            0,
            [0] * int(count) * rounds,
        ), f"every queued judgment drained, by workers that exited cleanly ({count})"
    assert 0 < worker["peak_rss_mb"] < 2000


def test_upkeep_after_writes_visits_the_written_projects_members(tiny_run):
    writes = tiny_run[1]["sizes"][0]["upkeep_writes"]
    assert writes["status"] == "measured" and writes["idle_owners_visited"] == 0
    assert (
        writes["one_write"]["n"] == TINY.one_write_cycles
        and writes["spread_writes"]["n"] == writes["spread_invalidations"]["n"] == TINY.spread_write_cycles
    )
    for cycle in writes["cycles"]:
        assert cycle["failures"] == 0 and cycle["busy"] == 0
        assert cycle["owners"] == cycle["expected"] > 0, cycle
    spread = next(c for c in writes["cycles"] if c["kind"] == "spread_writes")
    assert spread["owners"] > max(c["owners"] for c in writes["cycles"] if c["kind"] == "one_write")


def test_a_target_set_for_another_number_of_users_is_not_comparable(tiny_run):
    results = copy.deepcopy(tiny_run[1]["sizes"][0])
    statuses = {v["key"]: v["status"] for v in report.assess(results)}
    assert statuses["recall_pinned_project"] in ("met", "missed")
    assert statuses["upkeep_spread_invalidations"] == "not comparable (1,000 users; set for 10,000)"
    results["corpus"]["users"] = 10_000
    statuses = {v["key"]: v["status"] for v in report.assess(results)}
    assert statuses["recall_pinned_project"] == "not comparable (10,000 users; set for 1,000)"
    assert statuses["upkeep_spread_invalidations"] in ("met", "missed")


def test_the_slow_model_latency_is_measured_with_one_worker(tiny_run):
    latency = tiny_run[1]["sizes"][0]["model_latency"]
    assert latency["status"] == "measured" and latency["first_call"] == "generating"
    assert latency["run_probes"] == 20 and latency["model_calls"] == 40
    assert latency["exit_code"] == 0 and 0 < latency["peak_rss_mb"] < 2000


def test_the_explain_is_the_plan_recall_runs_inside(tiny_run):
    explain = tiny_run[1]["sizes"][0]["explain"]
    assert set(explain) == {"pinned_project", "unpinned"}
    for plan in explain.values():
        assert "on memories" in plan and "Buffers:" in plan


def test_several_sizes_render_a_cost_curve(tiny_run):
    results = copy.deepcopy(tiny_run[1])
    bigger = copy.deepcopy(results["sizes"][0])
    bigger["size"] = 4000
    results["sizes"].append(bigger)
    text = report.render(results)
    assert "## Cost curve (p50 ms)" in text and "| measurement | 2,000 | 4,000 |" in text


def test_the_layer_curve_measures_each_layer_as_its_member(tmp_path):
    """`make bench SIZE=layers` at tiny sizes, demo corpus only: each layer holds its size in real-text
    rows the member sees, every row with both offline models' vectors; both recalls and today's beside
    them are timed for every question, the hybrid being the shipped three legs (both query embeddings)
    beside today's two; and the templated questions find their source in the smallest layer (the
    timings are of recalls that work), the lexical recall as often as today's does (below the postings'
    cut it ranks exactly as today's)."""
    figures = layers.run(ROOT, tmp_path / "no-adr-corpus.jsonl", sizes=(200, 400), say=lambda _: None)
    assert figures["questions"] == {"paraphrased": 0, "templated": layers.TEMPLATED}
    assert figures["measured_as"].startswith("authenticated ") and "no identity" not in figures["measured_as"]
    assert [legs["rows"] for legs in figures["layers"].values()] == [200, 400]
    assert figures["arms"] == {
        "lexical_before": ["lexical"],
        "lexical": ["lexical"],
        "hybrid_before": ["lexical", "embedding"],
        "hybrid": ["lexical", "embedding", "embedding_minilm"],
    }, "today's hybrid binds the e5 query embedding alone, the shipped one both"
    assert figures["models"] == {"embedding": embeddings.OFFLINE_MODEL, "embedding_minilm": embeddings.MINILM_MODEL}
    # Every copied row holds both vectors, each with its model (a layer's first row comes through the
    # importer, embedded only as the environment says: not at all in the tests).
    copied = sum(legs["rows"] - 1 for legs in figures["layers"].values())
    for column, model in figures["models"].items():
        assert list(figures["embedded"][column]) == [model] and figures["embedded"][column][model] >= copied
    for legs in figures["layers"].values():
        for recall in layers.RECALLS:
            assert legs[recall]["n"] == layers.ROUNDS * layers.TEMPLATED
            assert legs[recall]["first_ask"]["n"] == layers.ROUNDS * layers.TEMPLATED, "each block asks twice"
    smallest = figures["layers"]["200"]
    assert smallest["lexical"]["source_in_top_10"] >= 0.9 * layers.TEMPLATED
    assert smallest["lexical"]["source_in_top_10"] == smallest["lexical_before"]["source_in_top_10"]
    assert smallest["hybrid"]["source_in_top_10"] >= 0.9 * layers.TEMPLATED
    assert figures["storage"]["postings"] > figures["storage"]["memories"]
    # Bytes per memory split by structure: the heap, every index on the memories by name, the postings'
    # heap and indexes, adding up to the all-in rate.
    parts = {(p["part"], p["relation"]) for p in figures["storage"]["parts"]}
    assert {("memories heap", "public.memories"), ("postings heap", "public.memory_postings")} <= parts
    assert ("memories index", "memories_project_embedding_idx") in parts
    assert ("postings index", "memory_postings_impact_idx") in parts
    assert sum(p["bytes"] for p in figures["storage"]["parts"]) == figures["storage"]["total_bytes"]
    md, raw = layers.write(figures, tmp_path, "pytest")
    text = md.read_text()
    assert "| **all in** |" in text and "8 GB: " in text
    assert "| 400 | lexical |" in text and json.loads(raw.read_text())["layers"]["400"]["rows"] == 400
    assert "| 400 | hybrid, 2 legs (lexical + e5) → 3 legs (lexical + e5 + MiniLM) |" in text


def test_base_runs_side_by_side_each_database_through_its_own_verbs(tmp_path, monkeypatch):
    """`make bench BASE=46284ba` at a tiny size: the base database (three queues, roi.claim_judgment) is
    built from that commit's migrations and drained by that commit's worker, the head by this one's, and
    every figure of the report is compared."""
    base = "46284ba"
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{base}^{{commit}}"]).returncode != 0:
        pytest.skip(f"commit {base} is not in this clone (shallow?)")
    read = []
    monkeypatch.setattr(
        compare, "read_into_page_cache", lambda *folders: read.append(folders) or cluster_read(*folders)
    )
    md, raw = compare.run(
        ROOT, 2000, "tiny-vs-base", base, tmp_path, seed=42, plan=TINY, command="pytest", say=lambda _: None
    )
    [folders] = read  # both clusters' files, in one reading, before the rounds
    assert len(folders) == 2 and all(folder.name == "base" and folder.parent.name == "pgdata" for folder in folders)
    results = json.loads(raw.read_text())
    # One corpus in both; only the sizes on disk differ: the base still has the GIN index, and the head
    # keeps the vectors in the row (docs/decisions/0019-vectors-stay-in-the-row.md), so its heap is larger.
    on_disk = {key: results["base"]["corpus"][key] for key in ("indexes_size", "table_size")}
    assert results["base"]["commit"].startswith(base)
    assert results["base"]["corpus"] == results["head"]["corpus"] | on_disk, "one corpus in both"
    for side in ("base", "head"):
        figures = results[side]["figures"]
        assert figures["queue_cost"]["n"] == compare.round_plan(TINY).queue_rows * compare.ROUNDS, side
        assert figures["benchmark"]["rpc"]["n"] == TINY.owners * compare.ROUNDS, side
        for count, drained in figures["drains"].items():
            assert drained["n"] == len(drained["samples"]) == compare.DRAIN_REPEATS, (side, count)
            every_exit = [0] * int(count) * (compare.DRAIN_REPEATS + len(drained["put_off"]))
            assert drained["judged"] > 0 and drained["exit_codes"] == every_exit, (side, count)
        before, after = results[side]["conditions"]["before"], results[side]["conditions"]["after"]
        assert 0 < after["page_cache"]["cached_bytes"] <= after["page_cache"]["bytes"], side
        assert before["page_cache"]["cached_bytes"] >= 0.95 * before["page_cache"]["bytes"], side
        assert after["blks_hit"] > before["blks_hit"], side
        assert compare.plan_shape(results[side]["recall_plans"]["pinned_project"]), side
    assert all(d["left_in_queue"] == 0 for d in results["head"]["figures"]["drains"].values())
    assert [row["verdict"] for row in results["comparison"] if row["ratio"] is None] == []
    assert "| page cache held of the database's files: before / after the rounds |" in md.read_text()
    assert "| figure | n per side | base ms | head ms | head / base | verdict |" in md.read_text()
    assert results["built_first"] == "base" and "own migrations, the base's first, alive" in md.read_text()


def test_the_layer_curve_runs_side_by_side_with_another_commit(tmp_path):
    """`make bench SIZE=layers BASE=…` at tiny sizes: both databases hold the same rows (each from its own
    commit's migrations), every question is timed on both in every round, and each layer size and recall
    is compared at the layer bench's bar."""
    results = layers_compare.run(
        ROOT, tmp_path / "no-adr-corpus.jsonl", "HEAD", sizes=(200, 400), rounds=2, say=lambda _: None
    )
    assert (
        results["base"]["commit"]
        == subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    for side in ("base", "head"):
        assert [legs["rows"] for legs in results[side]["layers"].values()] == [200, 400], side
        assert results[side]["storage"]["memories"] == 600, side
        for recall in layers_compare.RECALLS:
            assert [legs[recall]["n"] for legs in results[side]["layers"].values()] == [2 * layers.TEMPLATED] * 2
            assert results[side]["layers"]["200"][recall]["source_in_top_10"] >= 0.9 * layers.TEMPLATED, side
    assert [(row["size"], row["recall"]) for row in results["comparison"]] == [
        (size, recall) for size in ("200", "400") for recall in layers_compare.RECALLS
    ]
    assert all(row["ratio"] is not None for row in results["comparison"])
    md, raw = layers_compare.write(results, tmp_path)
    assert "| 400 | hybrid |" in md.read_text() and json.loads(raw.read_text())["rounds"] == 2


def test_the_anchor_runs_beside_recall_on_the_same_rows_under_the_same_policy(tmp_path):
    """`make bench SIZE=anchor` at a tiny size, demo corpus only: Supabase's hybrid search holds the same
    rows as the layer, its policy shows them to the member and none to a stranger, both arms are timed
    and their buffers read for every question, both find the templated questions' sources (the figures
    are of recalls that work), and the report puts the two side by side with each one's bytes."""
    results = anchor.run(ROOT, tmp_path / "no-adr-corpus.jsonl", 300, say=lambda _: None)
    assert results["rows_seen_by_the_member"] == 300
    assert results["anchor_rows_seen"] == {"member": 300, "stranger": 0}, "the anchor's policy is the memories'"
    assert results["default_text_search_config"] == "pg_catalog.english", "the page relies on Supabase's default"
    for arm in anchor.ARMS:
        figures = results["arms"][arm]
        assert figures["timing"]["n"] == layers.ROUNDS * layers.TEMPLATED, arm
        assert figures["buffers"]["buffers_p50"] > 0, arm
        assert figures["quality"]["templated"]["hit10"] >= 0.9 * layers.TEMPLATED, arm
        assert figures["bytes"]["memories"] == 300, f"{arm}: the same rows"
    parts = {p["relation"] for p in results["arms"]["anchor"]["bytes"]["parts"]}
    assert {"anchor.documents", "anchor.documents_fts_idx", "anchor.documents_embedding_idx"} <= parts
    md, raw = report.write(results, tmp_path, render_as=anchor.render)
    assert md.name.endswith("-anchor-300.md") and json.loads(raw.read_text())["size"] == 300
    text = md.read_text()
    assert "| bytes a memory, all in |" in text and "| MRR@10, templated |" in text
    assert "## Bytes a memory: Supabase's hybrid search" in text
    assert "hybrid_search read" in text and results["anchor_indexes_read"]["plans"], "its nested plan is kept"
