"""`zm-roi gate` end to end, as the user through the local transport (a token minted for `--user`,
verified, the calls made as them under RLS): exit 0 on an unchanged corpus, 1 when a recall function
that drops half the results is configured (a paired regression) and when the interval's upper bound is
below --min-rate, 2 when the judge changed, when nothing could be measured, and for bad input. Also
the tile's growth hint, which appears past roi.settings.rerun_hint_growth and not before."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from tests.support import (
    GENERATION_MODEL,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    add_memories,
    as_user,
    benchmark,
    benchmark_user,
    default_answer,
    extractor,
    knowledge,
    set_settings,
)
from tests.unit.test_gate import sign_test_p, wilson
from zm_roi import cli, dashboard
from zm_roi.mcp_server import build_server
from zm_roi.transport import LocalTransport
from zm_roi.worker import Worker, WorkerConfig

HALF_RECALL = """
create or replace function public.zz_half_recall(query text, project_id uuid, team_id uuid, match_count integer,
                                                 personal_only boolean)
  returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language sql stable security invoker set search_path = ''
as $$
  -- The bundled recall with every other result dropped (ranks 1, 3, 5, ...): half the results.
  select r.memory_id, r.kind, r.scope, r.title, r.body, r.score
  from public.recall(query, project_id, team_id, match_count, personal_only)
    with ordinality as r (memory_id, kind, scope, title, body, score, n)
  where r.n % 2 = 0
  order by r.n
$$"""


@pytest.fixture
def local_env(cluster, monkeypatch):
    """The CLI pointed at the test cluster, as a developer's shell would point it at a local database."""
    for name in ("SUPABASE_URL", "SUPABASE_ANON_KEY", "ZM_ACCESS_TOKEN", "ZM_DB_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ZM_DB_URL", cluster.url())
    monkeypatch.setenv("ZM_JWT_SECRET", cluster.jwt_secret())


@pytest.fixture
def recall_setting(db_url):
    """roi.settings.recall_function put back after the test, and the half recall dropped."""
    with psycopg.connect(db_url) as conn:
        before = conn.execute("select recall_function from roi.settings").fetchone()[0]
    yield
    with psycopg.connect(db_url) as conn:
        conn.execute("update roi.settings set recall_function = %s", (before,))
        conn.execute("drop function if exists public.zz_half_recall(text, uuid, uuid, integer, boolean)")


def gate(capsys, *args: str) -> tuple[int, dict]:
    code = cli.main(["gate", "--json", "--timeout", "60", *args])
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["exit_code"] == code, out.err
    return code, report


def test_an_unchanged_corpus_holds_and_half_a_recall_fails(cluster, db_url, local_env, recall_setting, capsys):
    with (
        extractor(db_url, "deterministic"),
        benchmark_user(cluster, "gate-half@example.test", knowledge(30)) as user,
    ):
        # No run yet to compare with: not a pass.
        code, report = gate(capsys, "--no-regression", "--user", user.email)
        assert (code, report["verdict"]) == (2, "not_measured")
        assert report["reasons"] == ["no previous comparable run to compare with"]

        code, report = gate(capsys, "--no-regression", "--min-rate", "0.5", "--user", user.email)
        assert (code, report["verdict"]) == (0, "held"), report
        assert report["comparison"]["regressed_count"] == 0 and report["comparison"]["paired_count"] >= 15
        assert report["previous"]["run_id"] == report["comparison"]["previous_run_id"]

        with psycopg.connect(db_url) as conn:
            conn.execute(HALF_RECALL)
        assert cli.main(["configure", "--recall-function", "public.zz_half_recall"]) == 0
        capsys.readouterr()
        code = cli.main(["gate", "--no-regression", "--markdown", "--user", user.email])
        table = capsys.readouterr().out
        assert code == 1, table
        assert "**failed** (exit 1)" in table and "a significant regression" in table
        assert "| recall function | `public.recall(" in table and "`public.zz_half_recall(" in table

        # The same half recall again: no regression against the run before (also halved), but its
        # interval is below a floor of 95%.
        code, report = gate(capsys, "--no-regression", "--min-rate", "0.95", "--user", user.email)
        assert code == 1 and report["reasons"][0].endswith("is below --min-rate 95%"), report
        assert report["reasons"][1].startswith("no change against the previous run"), report


def test_a_changed_judge_is_not_comparable(db_url, worker_url, local_env, llm_mode, owners, capsys):
    owner = owners.create(KNOWLEDGE)
    set_settings(db_url, withheld_source_checks=0, order_checks=0)
    config = WorkerConfig(generation_model=GENERATION_MODEL, judge_model=JUDGE_MODEL)
    assert benchmark(db_url, owner)["status"] == "generating"
    Worker(worker_url, config, ScriptedModel(default_answer)).run(once=True)
    assert benchmark(db_url, owner)["status"] == "started"
    Worker(worker_url, config, ScriptedModel(default_answer)).run(once=True)
    (llm_run,) = as_user(db_url, owner, "select run_id, status, judged_count from public.roi_benchmark_runs")
    assert (llm_run["status"], llm_run["judged_count"]) == ("complete", 6)

    # The next run is judged by the strict retrieval check: a different judge.
    with extractor(db_url, "deterministic"):
        code, report = gate(capsys, "--no-regression", "--user", owners.email(owner))
    assert (code, report["verdict"]) == (2, "not_comparable"), report
    assert report["comparison"]["previous_run_id"] == str(llm_run["run_id"])
    assert "the judge changed" in report["reasons"][0] and "deterministic:retrieval-check" in report["reasons"][0]


def test_the_previous_comparable_run_passes_over_one_that_judged_nothing(cluster, db_url, local_env, capsys):
    with (
        extractor(db_url, "deterministic"),
        benchmark_user(cluster, "gate-skip@example.test", knowledge(8)) as user,
    ):
        baseline = benchmark(db_url, user.id)["run_id"]
        # A run closed with every question skipped (as a run left unjudged past its timeout closes).
        with psycopg.connect(db_url) as conn:
            skipped = conn.execute(
                """insert into roi.runs (owner_id, mode, probe_count, started_at)
                   values (%s, 'llm', 8, clock_timestamp()) returning id""",
                (user.id,),
            ).fetchone()[0]
            conn.execute(
                "insert into roi.run_closures (run_id, owner_id, reason) values (%s, %s, 'timeout')", (skipped, user.id)
            )
        code, report = gate(capsys, "--no-regression", "--user", user.email)
        assert code == 0, report
        assert report["comparison"]["previous_run_id"] == str(baseline), "the empty run is passed over"
        listed = as_user(
            db_url,
            user.id,
            "select previous_run_id from public.roi_benchmark_runs where run_id = %s",
            (report["run"]["run_id"],),
        )
        assert listed == [{"previous_run_id": skipped}], "while the run list pairs with the previous closed run"


def test_nothing_to_measure_is_exit_2(cluster, db_url, local_env, capsys):
    with extractor(db_url, "deterministic"), benchmark_user(cluster, "gate-empty@example.test") as user:
        code, report = gate(capsys, "--min-rate", "0.1", "--user", user.email)
    assert (code, report["verdict"]) == (2, "not_measured")
    assert "No live decision, gotcha or convention memory" in report["reasons"][0]


def test_a_run_that_cannot_start_in_time_is_exit_2(cluster, db_url, local_env, llm_mode, capsys):
    # LLM mode and no worker: the pool stays `generating`.
    with benchmark_user(cluster, "gate-slow@example.test", knowledge(3)) as user:
        code = cli.main(["gate", "--min-rate", "0.1", "--timeout", "1", "--user", user.email])
        out = capsys.readouterr()
    assert code == 2
    assert "not measured (exit 2)" in out.out and "no run started within --timeout 1 s" in out.out
    assert "building the question pool: 0 of 3 ready" in out.err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "the gate needs a rule"),
        (["--min-rate", "1.5"], "--min-rate: a rate from 0 to 1, not '1.5'"),
        (["--min-rate", "half"], "--min-rate: a rate from 0 to 1, not 'half'"),
        (["--no-regression", "--alpha", "0"], "--alpha: a significance level between 0 and 1 exclusive"),
        (["--no-regression", "--alpha", "1.0"], "--alpha: a significance level between 0 and 1 exclusive"),
        (["--min-rate", "0.5", "--alpha", "0.1"], "give --no-regression too"),
        (["--min-rate", "0.5", "--timeout", "0"], "--timeout: a number of seconds from 1 to 86400"),
        (["--min-rate", "0.5", "--markdown", "--json"], "not allowed with argument"),
        (["--no-regression", "--user", "nobody@example.test"], "no user nobody@example.test"),
    ],
)
def test_bad_input_is_a_clear_error(local_env, capsys, args, expected):
    try:
        code = cli.main(["gate", *args])
    except SystemExit as exit_:  # argparse refuses before anything runs
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert expected in err, err


def test_the_python_statistics_match_the_database(db_url):
    """The noise simulation (tests/unit/test_gate.py) computes the sign test and the Wilson bound the
    way the views do."""
    cases = [(i, r) for i in range(0, 9) for r in range(0, 9)]
    with psycopg.connect(db_url) as conn:
        for improved, regressed in cases:
            p = conn.execute("select roi.sign_test_p(%s, %s)", (improved, regressed)).fetchone()[0]
            assert (None if p is None else float(p)) == sign_test_p(improved, regressed), (improved, regressed)
        for k in range(0, 21):
            low, high = conn.execute(
                "select roi.wilson_bound(%s, 20, false), roi.wilson_bound(%s, 20, true)", (k, k)
            ).fetchone()
            assert (float(low), float(high)) == (wilson(k, 20, False), wilson(k, 20, True)), k


# ---- the growth hint ------------------------------------------------------------------------------


def growth(db_url, user_id) -> tuple:
    tile = as_user(db_url, user_id, "select * from public.roi_benchmark_tile")[0]
    return tile["memories_gained_since_run"], tile["memories_lost_since_run"], tile["rerun_hint"]


def test_the_rerun_hint_appears_past_the_threshold_and_not_before(cluster, db_url):
    with (
        extractor(db_url, "deterministic"),
        benchmark_user(cluster, "growth@example.test", knowledge(5)) as user,
        benchmark_user(cluster, "growth-other@example.test", knowledge(1)) as other,
    ):
        set_settings(db_url, rerun_hint_growth=3)
        assert growth(db_url, user.id) == (None, None, None), "no run yet: nothing to grow from"
        assert benchmark(db_url, user.id)["status"] == "started"
        assert growth(db_url, user.id) == (0, 0, None)

        add_memories(db_url, user.email, knowledge(2, "new "))
        add_memories(db_url, other.email, knowledge(5, "theirs "))  # not visible to the user (RLS)
        episode = knowledge(1, "episode ")
        episode[0].kind = "episode"  # not knowledge: not counted
        add_memories(db_url, user.email, episode)
        assert growth(db_url, user.id) == (2, 0, None), "below the threshold: no hint"

        add_memories(db_url, user.email, knowledge(1, "third "))
        hint = "3 memories learned since your last run: run the benchmark again"
        assert growth(db_url, user.id) == (3, 0, hint)

        # The MCP tool's structured output carries the counts and the hint; the dashboard shows it.
        transport = LocalTransport(db_url, cluster.jwt_secret(), user.token)
        result = asyncio.run(build_server(lambda: transport).call_tool("benchmark_results", {}))
        shown = result.structured_content
        counts = (shown["memories_gained_since_run"], shown["memories_lost_since_run"])
        assert (*counts, shown["rerun_hint"]) == (3, 0, hint)
        assert f"{hint}." in shown["message"]
        assert f'<p class="badge" id="rerun-hint"><span class="dot" aria-hidden="true"></span>{hint}</p>' in (
            dashboard.render(transport)
        )

        with psycopg.connect(db_url) as conn:
            conn.execute(
                """update public.memories set invalidated_at = now()
                   where id = (select id from public.memories where author_id = %s and title like 'Topic%%' limit 1)""",
                (user.id,),
            )
        assert growth(db_url, user.id) == (
            3,
            1,
            "3 memories learned and 1 invalidated since your last run: run the benchmark again",
        )

        assert benchmark(db_url, user.id)["status"] == "started"
        assert growth(db_url, user.id) == (0, 0, None), "a new run resets the count"
