"""Scenario 1: many runs racing on one table with no faults execute every job exactly once."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs
from tests.support import add_jobs

pytestmark = pytest.mark.faults

JOBS = 10_000
SOAK_JOBS = 50_000
RUNNERS = 8
# A short lease, so the lease keeper extends all the time while completions flow.
LEASE = "3s"


def test_racing_runs_execute_every_job_exactly_once(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, soak: bool, figures: Figures
) -> None:
    jobs = SOAK_JOBS if soak else JOBS
    runners = RUNNERS
    add_jobs(ledger_conn, jobs)

    started = [runs.start("--concurrency", "4", "--lease", LEASE, dsn=dsn) for _ in range(runners)]
    codes = [run.wait(timeout=240) for run in started]
    summaries = [run.summary() for run in started]

    assert codes == [0] * runners, [run.stderr for run in started]
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": jobs}
    counts = sorted(len(runs_of) for runs_of in audit.executions.values())
    assert len(audit.executions) == jobs and counts[-1] == 1, "a job ran more than once"
    assert sum(s["done"] for s in summaries) == jobs
    assert sum(s["lost"] for s in summaries) == 0
    worked = sum(1 for s in summaries if s["done"])
    assert worked > 1, "the runs did not race: one run did all the work"
    figures(
        "1",
        jobs=jobs,
        runners=runners,
        runs_that_worked=worked,
        executed_once=len(audit.executions),
        executed_more_than_once=len(audit.executed_more_than_once),
        exit_codes=codes,
    )
