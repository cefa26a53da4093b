"""The pg_cron job `zm-roi-upkeep` really runs on the embedded cluster, and `zm-roi db status` says how
its last run went. The suite's clusters pause the job so tests run upkeep at moments they choose; this
test unpauses it on a cluster of its own and waits for a real scheduled run."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg

from tests.conftest import ROOT, throwaway_cluster
from tests.support import wait_for
from zm_roi import localdb

# pg_cron fires at the start of each minute: one full minute plus the time a run takes.
WAIT_SECONDS = 75


def zm_status(made: localdb.Cluster) -> subprocess.CompletedProcess:
    # A wrong ZM_DB_PORT on purpose: status reads the port the cluster really runs on from postmaster.pid.
    env = {**os.environ, "ZM_DB_HOME": str(made.home), "ZM_DB_PORT": str(localdb.free_port())}
    env.pop("ZM_DB_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "zm_roi.cli", "db", "status"], capture_output=True, text=True, env=env, cwd=ROOT
    )


def test_the_scheduled_upkeep_job_succeeds_and_db_status_reports_it():
    with throwaway_cluster() as made:
        before = zm_status(made)
        assert before.returncode == 0, before.stderr
        assert f"127.0.0.1:{made.port}" in before.stdout
        assert "paused" in before.stdout

        with psycopg.connect(made.url(), autocommit=True) as conn:
            conn.execute("update cron.job set active = true where jobname = 'zm-roi-upkeep'")

            def finished_runs() -> list:
                return conn.execute(
                    """select d.status, d.return_message from cron.job_run_details d
                       join cron.job j using (jobid) where j.jobname = 'zm-roi-upkeep' and d.status in
                       ('succeeded', 'failed') order by d.start_time"""
                ).fetchall()

            wait_for(finished_runs, timeout=WAIT_SECONDS, fail=False)
            runs = finished_runs()
            last_upkeep = conn.execute("select last_run_at from roi.upkeep_state").fetchone()[0]
        assert runs, f"no scheduled run of zm-roi-upkeep finished within {WAIT_SECONDS} s"
        assert runs[0][0] == "succeeded", f"the scheduled upkeep failed: {runs[0]}"
        assert last_upkeep is not None, "the job finished but roi.upkeep() did not run"

        after = zm_status(made)
        assert after.returncode == 0, after.stderr
        assert "upkeep: every minute; last run" in after.stdout and after.stdout.rstrip().endswith("succeeded")
