"""Scenario 12: handlers that fail every way a Python function can.

``raise``, ``SystemExit`` and ``KeyboardInterrupt`` fail the job and leave the run
going; ``os._exit`` and a SIGKILL take the whole run down, and the job's lease
brings it back. Either way each attempt is used up, the job ends ``failed``
after ``max_attempts``, and no other job is harmed.
"""

from __future__ import annotations

import signal
from typing import Any

import psycopg
import pytest

from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs
from tests.faults.support.settle import settle

pytestmark = pytest.mark.faults

MAX_ATTEMPTS = 2
OS_EXIT_STATUS = 17  # fault_handlers: os._exit(17)


def _by_fault(conn: psycopg.Connection[Any], ids: dict[str, list[int]]) -> dict[str, set[Any]]:
    found = {}
    for fault, job_ids in ids.items():
        rows = conn.execute(
            "SELECT status, attempts, last_error FROM jobs WHERE id = ANY(%s)", (job_ids,)
        ).fetchall()
        found[fault] = set(rows)
    return found


def test_failing_handlers_use_their_attempts_and_end_failed(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    faults = ["raise", "permanent", "exit", "interrupt"]
    ids = {
        fault: ledger_audit.add_payload_jobs(
            ledger_conn, [{"fault": fault}] * 2, max_attempts=MAX_ATTEMPTS
        )
        for fault in faults
    }
    healthy = ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(10)])
    done = settle(runs, ledger_conn, "--concurrency", "2", "--backoff-base", "50ms", dsn=dsn)

    assert [run.process.returncode for run in done] == [0] * len(done), done[-1].stderr
    assert all("Traceback" not in run.stderr for run in done)
    assert _by_fault(ledger_conn, ids) == {
        "raise": {("failed", 2, "RuntimeError: injected failure")},
        "permanent": {("failed", 1, "PermanentError: injected permanent failure")},
        "exit": {("failed", 2, "SystemExit: 3")},
        "interrupt": {("failed", 2, "KeyboardInterrupt")},
    }
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    for fault, job_ids in ids.items():
        expected = [1] if fault == "permanent" else [1, 2]
        for job_id in job_ids:
            assert [e.attempt for e in audit.executions[job_id]] == expected, fault
    for job_id in healthy:
        assert audit.jobs[job_id].status == "done"
        assert len(audit.executions[job_id]) == 1
    figures("12", variant="in-process failures", runs=len(done), exit_codes=[0])


def test_handlers_that_kill_their_run_use_their_attempts_and_end_failed(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    # Each crasher sits more than a claim and its prefetch (5 + 5) away from the other.
    healthy: list[int] = []
    victims: dict[str, int] = {}
    for fault in ("os_exit", "kill"):
        healthy += ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(12)])
        [victims[fault]] = ledger_audit.add_payload_jobs(
            ledger_conn, [{"fault": fault}], max_attempts=MAX_ATTEMPTS
        )
    healthy += ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(12)])
    done = settle(runs, ledger_conn, "--batch-size", "5", "--lease", "1s", dsn=dsn, max_runs=16)

    codes = [run.process.returncode for run in done]
    assert codes.count(OS_EXIT_STATUS) == MAX_ATTEMPTS, codes
    assert codes.count(-signal.SIGKILL) == MAX_ATTEMPTS, codes
    assert set(codes) <= {0, OS_EXIT_STATUS, -signal.SIGKILL}, codes
    for job_id in victims.values():
        row = ledger_conn.execute(
            "SELECT status, last_error FROM jobs WHERE id = %s", (job_id,)
        ).fetchone()
        assert row == ("failed", "lease expired")
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    for job_id in victims.values():
        # Executed max_attempts times; claims that released it unstarted (beside a
        # suspect run alone) gave their attempt back through max_attempts.
        assert len(audit.executions[job_id]) == MAX_ATTEMPTS
    crashed = {e.pid for job_id in victims.values() for e in audit.executions[job_id]}
    for job_id in healthy:
        assert audit.jobs[job_id].status == "done"
        runs_of = audit.executions[job_id]
        assert all(e.pid in crashed for e in runs_of[:-1]), "ran twice without a crash"
    figures(
        "12", variant="handlers killing their run", runs=len(done), exit_codes=sorted(set(codes))
    )


def test_a_job_that_kills_its_run_every_time_does_not_fail_its_batch_mates(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    payloads: list[dict[str, Any]] = [{"n": n} for n in range(12)]
    payloads[3] = {"fault": "os_exit"}
    ids = ledger_audit.add_payload_jobs(ledger_conn, payloads, max_attempts=3)
    settle(runs, ledger_conn, "--batch-size", "5", "--lease", "1s", dsn=dsn, max_runs=16)

    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.jobs[ids[3]].status == "failed"
    harmed = {
        job_id: (audit.jobs[job_id].status, audit.jobs[job_id].last_error)
        for job_id in ids
        if job_id != ids[3] and audit.jobs[job_id].status != "done"
    }
    assert harmed == {}, f"batch-mates of the crashing job ended {harmed}"
