"""Fencing token: the attempt number, which nothing lowers, fences every late outcome.

A job with ``max_attempts 1`` is claimed by run A under a short lease; A is frozen
(SIGSTOP: a paused VM, a debugger, a laptop lid) while its handler works. Run B
reaps the job (failed, ``lease expired``), ``drain retry --all`` puts it back, and
run C claims it. A resumes and sends its outcome, fenced by the attempt number it
was given, while C is still at work.

When retry reset ``attempts`` to 0, C was handed attempt 1 again: A's fence
matched C's row, A's completion marked C's job done under C's feet (and a
``PermanentError`` in A threw C's success away). Now retry keeps the counter and
raises ``max_attempts`` instead, so C holds attempt 2 and A's late outcome meets
no row: A counts it lost, and the job ends with C's outcome.

A, once resumed, holds no job it has not started (its batch is the one job), so
a run that refuses to start jobs whose lease may have run out while it waited
changes nothing here: the assertions hold with or without that check.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import psycopg
import pytest

from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs, wait_until
from tests.support import job

pytestmark = pytest.mark.faults

A_LEASE = "2s"
# A's handler only needs to be at work when the SIGSTOP lands; its sleep runs out
# while A is frozen, so A sends its outcome as soon as it resumes.
A_SLEEP = 3.0
# C must still be at work when A's late outcome reaches the table, with room to
# spare on a noisy machine: A needs well under a second once it resumes.
C_SLEEP = 5.0

A_PAYLOADS: dict[str, dict[str, Any]] = {
    "A completes": {"sleep": A_SLEEP},
    "A raises PermanentError": {"sleep": A_SLEEP, "fault": "permanent"},
}


def _executions_started(conn: psycopg.Connection[Any]) -> int:
    """Executions the handlers began, including a second one of the same attempt."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM fault_ledger) + (SELECT count(*) FROM fault_repeats)"
    ).fetchone()
    assert row is not None
    return int(row[0])


def _overlapping_under_one_attempt(conn: psycopg.Connection[Any]) -> int:
    """Executions that began while another execution of the same attempt was at work.

    Two executions under one attempt number share one fence: whichever outcome
    lands is recorded as the job's, whoever it came from. The ledger keeps the
    first execution of an attempt; a second one lands in ``fault_repeats``.
    """
    row = conn.execute(
        "SELECT count(*) FROM fault_repeats AS r JOIN fault_ledger AS l "
        "ON l.job_id = r.job_id AND l.attempt = r.attempt "
        "WHERE r.started_at < coalesce(l.returned_at, 'infinity')"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_frozen_run_resuming_after_a_retry_never_records_over_the_new_attempt(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """Both variants at once, one job each: A's handlers run side by side."""
    variants = sorted(A_PAYLOADS)
    ids = ledger_audit.add_payload_jobs(
        ledger_conn, [A_PAYLOADS[v] for v in variants], max_attempts=1
    )
    a = runs.start("--lease", A_LEASE, "--concurrency", "2", dsn=dsn)
    wait_until(lambda: _executions_started(ledger_conn) == 2, what="A's handlers to start")
    a.send(signal.SIGSTOP)
    try:
        wait_until(
            lambda: all(job(ledger_conn, i)["lease_left"].total_seconds() < 0 for i in ids),
            timeout=30,
            what="A's leases to run out while A is frozen",
        )
        b = runs.run("--lease", A_LEASE, dsn=dsn)
        assert b.process.returncode == 0, b.stderr
        assert b.summary()["reaped"] == 2, b.summary()
        for job_id in ids:
            reaped = job(ledger_conn, job_id)
            assert (reaped["status"], reaped["last_error"]) == ("failed", "lease expired")

        # C's own attempts do nothing but work a while, then return.
        ledger_conn.execute(
            "UPDATE jobs SET payload = %s::jsonb", (json.dumps({"sleep": C_SLEEP}),)
        )
        retry = runs.run("--all", dsn=dsn, command=("retry", "--json"))
        assert retry.process.returncode == 0, retry.stderr
        assert retry.summary()["ids"] == ids

        c = runs.start("--lease", "60s", "--concurrency", "2", dsn=dsn)
        wait_until(lambda: _executions_started(ledger_conn) == 4, what="C's handlers to start")
    finally:
        a.send(signal.SIGCONT)
    a.wait(timeout=60)
    # The scenario needs A's outcomes to reach the table while C still works.
    assert c.poll() is None, "C finished before A resumed: the machine was too slow"
    c.wait(timeout=60)

    late = a.summary()
    assert (late["lost"], late["done"], late["failed"], late["retried"]) == (2, 0, 0, 0), late
    assert a.process.returncode == 1 and late["exit_reason"] == "lost", a.stderr
    assert c.process.returncode == 0, c.stderr
    current = c.summary()
    assert (current["done"], current["lost"]) == (2, 0), current

    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert not audit.repeats, f"an attempt number was handed out twice: {audit.repeats}"
    overlapping = _overlapping_under_one_attempt(ledger_conn)
    assert overlapping == 0
    for variant, job_id in zip(variants, ids, strict=True):
        row = job(ledger_conn, job_id)
        # Retry gave the job as many tries as it had (one) on top of the one A used.
        assert (row["status"], row["attempts"], row["max_attempts"]) == ("done", 2, 2), row
        runs_of_job = audit.executions[job_id]
        assert [(e.attempt, e.pid) for e in runs_of_job] == [(1, a.pid), (2, c.pid)]
        # The outcome recorded is C's: its attempt is the row's, and it returned.
        assert runs_of_job[1].returned_at is not None
        figures(
            "fencing token",
            variant=variant,
            overlapping_under_one_attempt=overlapping,
            late_outcomes_recorded=0,  # the row is done under C's attempt (asserted above)
            counted_lost_by_a=f"{late['lost']} of 2",
            done_by=f"attempt {row['attempts']} (run C)",
        )
