"""The fast-recall report's arithmetic (make bench SIZE=fast-recall): when both HNSW indexes became valid
after the import's end, by pg_cron's run log, and the goals read off the last poll, on figures given by hand."""

from zm_roi_bench import __main__ as bench_main
from zm_roi_bench import fast_recall

E5, MINILM = "hnsw_ab_embedding", "hnsw_ab_embedding_minilm"


def figures(builds: list[dict], states: dict, import_end: str = "2026-12-05T10:00:00+00:00") -> dict:
    layer = {"hybrid": {"buffers_p50": 2000.0, "ms_p50": 15.04}, "lexical": {"buffers_p50": 900.0, "ms_p50": 9.99}}
    return {
        "import_ended_at": import_end,
        "index_builds": builds,
        "timeline": [{"seconds": 0, "indexes": states, "layers": {str(fast_recall.SIZE): layer}}],
        "bytes": {"per_memory": 8_001},
    }


def build(job: str, start: str, end: str, status: str = "succeeded") -> dict:
    return {"job": job, "start": f"2026-12-05 {start}+00:00", "end": f"2026-12-05 {end}+00:00", "status": status}


def test_fast_recall_is_the_later_builds_first_success_after_the_import():
    runs = [
        build(MINILM, "09:59:00", "10:00:30", status="failed"),
        build(E5, "10:00:00", "10:01:10"),
        build(MINILM, "10:01:11", "10:02:40.5"),
        build(MINILM, "10:03:00", "10:03:01"),  # the queued run that found the index there
    ]
    both = {E5: "valid", MINILM: "valid"}
    assert fast_recall.hnsw_valid_after(figures(runs, both)) == 160.5, "MiniLM's first success ends 160.5 s after"
    early = [build(E5, "09:50:00", "09:55:00"), build(MINILM, "09:55:01", "09:58:00")]
    assert fast_recall.hnsw_valid_after(figures(early, both)) == 0.0, "built before the import ended: 0 s"
    assert fast_recall.hnsw_valid_after(figures(runs, {E5: "valid", MINILM: "invalid"})) is None, "never valid"
    assert fast_recall.hnsw_valid_after(figures(runs[1:2], both)) is None, "a valid index without its build's run"


def test_the_goals_are_met_at_their_bound_and_missed_past_it():
    run = figures([build(E5, "10:00:00", "10:05:00"), build(MINILM, "10:05:00", "10:05:00.5")], {E5: "valid"})
    run["hnsw_valid_after_import_seconds"] = fast_recall.hnsw_valid_after(run)
    verdicts = {row[0]: (row[2], row[3]) for row in fast_recall.goals(run)}
    assert verdicts["both HNSW indexes valid after the import's end"] == ("300 s", "met"), verdicts
    assert verdicts["hybrid recall, shared buffers p50"] == ("2,000", "met"), verdicts
    assert verdicts["hybrid recall p50"] == ("15.0 ms", "missed"), "15.04 ms is past 15, though it rounds to it"
    assert verdicts["lexical recall p50"] == ("10.0 ms", "met"), verdicts
    assert verdicts["bytes a memory, all in"] == ("8,001", "missed"), verdicts
    run["hnsw_valid_after_import_seconds"] = None
    assert fast_recall.goals(run)[0][2:] == ["never", "missed"]


def test_fast_recall_refuses_a_base_commit_with_one_sentence(capsys):
    assert bench_main.main(["--size", "fast-recall", "--base", "HEAD"]) == 2
    assert capsys.readouterr().err.strip() == (
        "zm-roi bench: fast-recall follows one import of this checkout: drop BASE and OWNERS"
    )
