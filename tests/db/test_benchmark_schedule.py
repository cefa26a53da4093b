"""The optional schedule: `zm-roi schedule` records the user's wish, and pg_cron's own upkeep job starts
one run per period for them, as them (recall under their identity, never elevated), and none while a
run of theirs is in progress. The suite's clusters pause the job, so this test unpauses it on a cluster
of its own, with the period shortened to a minute (roi.settings.schedule_period_override)."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.conftest import throwaway_cluster
from tests.support import CREATED_USERS, as_user, benchmark, wait_for
from zm_roi import localdb, tokens
from zm_roi.cli import main
from zm_roi.importer import MemoryLine, Target, insert_memories

# pg_cron fires at the start of each minute: two full minutes plus the time a run takes.
WAIT_SECONDS = 150

KNOWLEDGE = [
    {"kind": "decision", "title": "Pin the payments SDK", "body": "We pin the payments SDK at 4.2: 4.3 broke refunds."},
    {
        "kind": "gotcha",
        "title": "Staging cron runs in UTC",
        "body": "The staging scheduler ignores TZ and fires in UTC.",
    },
    {"kind": "convention", "title": "Feature-named migrations", "body": "Migrations are named for their feature."},
]


# A recall that refuses to run as anyone but a signed-in user acting as themselves (role authenticated,
# with their id in the claims): what upkeep's impersonation must give it. Otherwise public.recall.
RECALL_AS_THE_CALLER = """
create function public.recall_as_the_caller(query text, project_id uuid, team_id uuid, match_count integer,
  personal_only boolean)
  returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  if current_user <> 'authenticated' or auth.uid() is null then
    raise exception 'recall ran as % for %, not as a signed-in user', current_user,
      coalesce(auth.uid()::text, 'nobody');
  end if;
  return query select r.memory_id, r.kind, r.scope, r.title, r.body, r.score
               from public.recall(query, project_id, team_id, match_count, personal_only) r;
end
$$;
grant execute on function public.recall_as_the_caller(text, uuid, uuid, integer, boolean) to authenticated;
"""


def add_user(url: str, memories: list[dict]) -> tuple[uuid.UUID, str]:
    """A user with `memories`, removed after the test with everything queued for them (in the session
    cluster an LLM-mode pool left queued would hand another test's worker a question to write)."""
    email = f"schedule-{uuid.uuid4().hex[:10]}@example.test"
    with psycopg.connect(url) as conn, conn.transaction():
        insert_memories(conn, [MemoryLine.model_validate(m) for m in memories], Target(email))
        user_id = conn.execute("select id from auth.users where email = %s", (email,)).fetchone()[0]
    CREATED_USERS.append(user_id)
    return user_id, email


def fetch(url: str, sql: str, params: tuple = ()) -> list[dict]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute(sql, params).fetchall()


def upkeep_cycles_after(url: str, moment: dt.datetime) -> bool:
    """Whether a pg_cron run of upkeep started after `moment` has finished."""
    return bool(
        fetch(
            url,
            """select from cron.job_run_details d join cron.job j using (jobid)
               where j.jobname = 'zm-roi-upkeep' and d.status in ('succeeded', 'failed') and d.start_time > %s""",
            (moment,),
        )
    )


def test_pg_cron_starts_one_scheduled_run_per_period_as_the_owner_and_none_while_one_is_in_progress(monkeypatch):
    with throwaway_cluster() as made:
        url = made.url()
        localdb.set_extractor(url, "deterministic")
        owner, email = add_user(url, KNOWLEDGE)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(RECALL_AS_THE_CALLER)
            conn.execute("select roi.configure_recall('public.recall_as_the_caller')")
        monkeypatch.setenv("ZM_DB_URL", url)
        assert main(["schedule", "--daily", "--user", email]) == 0
        assert fetch(url, "select frequency from roi.benchmark_schedules where owner_id = %s", (owner,)) == [
            {"frequency": "daily"}
        ]

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("update roi.settings set schedule_period_override = interval '1 minute'")
            conn.execute("update cron.job set active = true where jobname = 'zm-roi-upkeep'")

        def scheduled() -> list[dict]:
            return fetch(
                url,
                """select s.run_id, s.period_start, r.owner_id, r.probe_count from roi.scheduled_runs s
                   join roi.runs r on r.id = s.run_id where s.owner_id = %s order by s.period_start""",
                (owner,),
            )

        assert wait_for(scheduled, timeout=WAIT_SECONDS, fail=False), f"pg_cron started no run in {WAIT_SECONDS} s"
        [first] = scheduled()[:1]
        assert first["owner_id"] == owner and first["probe_count"] == 3

        # As the owner: the recall function saw role authenticated and the owner's id (it refuses
        # anything else, so an elevated recall would have started no run), and found their memories.
        surfaced = fetch(
            url, "select unnest(surfaced_ids) as id from roi.recalls where run_id = %s", (first["run_id"],)
        )
        assert len(surfaced) >= 3
        runs = as_user(url, owner, "select run_id, scheduled from public.roi_benchmark_runs")
        assert {(row["run_id"], row["scheduled"]) for row in runs} >= {(first["run_id"], True)}

        # One run per period: more upkeep cycles within a minute start nothing more in that minute.
        while dt.datetime.now(dt.UTC).second > 40:
            time.sleep(1)
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(3):
                conn.execute("select roi.upkeep()")
            bucket = conn.execute("select date_bin(interval '1 minute', now(), '2001-01-01 00:00+00')").fetchone()[0]
        periods = [row["period_start"] for row in scheduled()]
        assert periods.count(bucket) == 1, periods
        assert len(periods) == len(set(periods)), "never two runs in one period"

        # A run in progress (an LLM run waiting for a judge): the schedule never stacks another on it.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("update roi.settings set extractor = 'llm'")
            open_run = conn.execute(
                "insert into roi.runs (owner_id, mode, probe_count) values (%s, 'llm', 3) returning id", (owner,)
            ).fetchone()[0]
            conn.execute(
                "insert into roi.pending_runs (run_id, owner_id, started_at) values (%s, %s, now())", (open_run, owner)
            )
            started = conn.execute("select now()").fetchone()[0]
        runs_before = fetch(url, "select count(*) as n from roi.runs where owner_id = %s", (owner,))[0]["n"]
        assert wait_for(lambda: upkeep_cycles_after(url, started + dt.timedelta(seconds=1)), timeout=WAIT_SECONDS)
        assert fetch(url, "select count(*) as n from roi.runs where owner_id = %s", (owner,))[0]["n"] == runs_before
        assert all(row["period_start"] < started for row in scheduled()), "no scheduled run while one is open"
        assert benchmark(url, owner) == {"status": "in_progress", "run_id": str(open_run)}

        # Off: the wish is gone.
        assert main(["schedule", "--off", "--user", email]) == 0
        assert fetch(url, "select * from roi.benchmark_schedules where owner_id = %s", (owner,)) == []


@pytest.mark.parametrize(
    "memories, args, message",
    [
        ([{"kind": "episode", "title": "Standup", "body": "We talked."}], ["--daily"], "no live decision, gotcha or"),
        (KNOWLEDGE[:1], ["--daily", "--weekly"], "not allowed with argument"),
        (KNOWLEDGE[:1], [], "one of the arguments --daily --weekly --off is required"),
    ],
)
def test_a_schedule_that_cannot_be_kept_is_refused_in_one_line(db_url, monkeypatch, capsys, memories, args, message):
    _, email = add_user(db_url, memories)
    monkeypatch.setenv("ZM_DB_URL", db_url)
    try:
        code = main(["schedule", *args, "--user", email])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_an_unknown_frequency_is_refused_by_the_database(db_url):
    owner, _ = add_user(db_url, KNOWLEDGE[:1])
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown schedule hourly: daily, weekly or off"):
        as_user(db_url, owner, "select public.benchmark_schedule('hourly')")
    assert as_user(db_url, owner, "select public.benchmark_schedule('weekly') as s")[0]["s"]["frequency"] == "weekly"
    assert as_user(db_url, owner, "select frequency from roi.benchmark_schedules") == [{"frequency": "weekly"}]


def test_the_token_path_schedules_as_the_tokens_user_through_the_authenticator(cluster, monkeypatch, capsys):
    owner, _ = add_user(cluster.url(), KNOWLEDGE[:1])
    monkeypatch.setenv("ZM_DB_URL", cluster.url())
    monkeypatch.setenv("ZM_JWT_SECRET", cluster.jwt_secret())
    monkeypatch.setenv("ZM_ACCESS_TOKEN", tokens.mint(cluster.jwt_secret(), owner))
    assert main(["schedule", "--weekly"]) == 0
    assert "schedule: weekly" in capsys.readouterr().out
    assert fetch(cluster.url(), "select frequency from roi.benchmark_schedules where owner_id = %s", (owner,)) == [
        {"frequency": "weekly"}
    ]
    assert main(["schedule", "--off"]) == 0
    assert fetch(cluster.url(), "select * from roi.benchmark_schedules where owner_id = %s", (owner,)) == []


def test_once_the_periods_run_exists_upkeep_starts_no_other_and_reports_no_failure(db_url, deterministic_mode):
    """In one transaction, whose now() stands still, so every upkeep cycle in it sees the same period
    (a minute, due at its start): the first cycle starts the owner's run, and every later one starts
    nothing and counts no failure (a cycle that tried again would be refused by the period's key and
    count it as one). Rolled back: nothing is left behind."""
    owner, _ = add_user(db_url, KNOWLEDGE)
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        try:
            conn.execute("update roi.settings set schedule_period_override = interval '1 minute'")
            conn.execute("insert into roi.benchmark_schedules (owner_id, frequency) values (%s, 'daily')", (owner,))
            first = conn.execute("select roi.upkeep() as u").fetchone()["u"]
            assert (first["scheduled"], first["failures"]) == (1, 0), f"the period's run starts: {first}"
            for cycle in range(3):
                again = conn.execute("select roi.upkeep() as u").fetchone()["u"]
                assert (again["scheduled"], again["failures"]) == (0, 0), (
                    f"cycle {cycle + 2} of the period, whose run exists, reported: {again}"
                )
            counts = conn.execute(
                "select (select count(*) from roi.runs where owner_id = %(o)s) as runs,"
                " (select count(*) from roi.scheduled_runs where owner_id = %(o)s) as scheduled",
                {"o": owner},
            ).fetchone()
            assert counts == {"runs": 1, "scheduled": 1}, f"one run in the period: {counts}"
        finally:
            conn.rollback()
