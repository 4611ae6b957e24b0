"""Scenario 6: a signal or the end of the budget in the middle of a batch.

Unstarted jobs go back at once with their attempt given back; in-flight jobs
finish within the grace period, or are left with their lease cut to now so the
next run reaps them at once; the exit code says work is left (3).
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import psycopg
import pytest

from drain.core.table import JobTable
from drain.store import upkeep
from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs, ledger_count, wait_until
from tests.support import add_jobs, drain_cli, statuses

pytestmark = pytest.mark.faults

EXIT_WORK_LEFT = 3


def _rows(conn: psycopg.Connection[Any]) -> dict[int, tuple[str, int, bool | None]]:
    """status, tries spent, and whether the lease is over, by job id.

    The jobs start with 5 tries; a release gives its attempt back as one more
    try (max_attempts + 1) and never lowers the attempt number, so the tries
    spent are what a release must leave untouched, not the attempt number.
    """
    rows = conn.execute(
        "SELECT id, status, attempts - (max_attempts - 5), locked_until <= now() FROM jobs"
    ).fetchall()
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


def test_sigterm_releases_unstarted_jobs_at_once_and_finishes_in_flight_ones(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ids = ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 2.0}] * 10)
    run = runs.start("--concurrency", "2", "--batch-size", "10", "--grace-seconds", "20", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 2, what="two handlers to start")
    run.send(signal.SIGTERM)

    wait_until(lambda: statuses(ledger_conn).get("queued") == 8, timeout=10, what="release")
    in_flight = [job_id for job_id, row in _rows(ledger_conn).items() if row[0] == "running"]
    assert len(in_flight) == 2, "the release waited for the in-flight jobs"
    code = run.wait()

    assert code == EXIT_WORK_LEFT, run.stderr
    summary = run.summary()
    assert (summary["released"], summary["done"], summary["exit_reason"]) == (8, 2, "signal")
    rows = _rows(ledger_conn)
    assert all(rows[job_id][0] == "done" for job_id in in_flight)
    released = [row for job_id, row in rows.items() if job_id not in in_flight]
    assert released == [("queued", 0, None)] * 8, "a released job kept its attempt or lease"
    ledger_audit.audit(ledger_conn, ready_queued_ok=True).assert_ok()

    _, audit = runs.finish("--concurrency", "8", dsn=dsn, ledger_conn=ledger_conn, done=10)
    assert all(len(audit.executions[job_id]) == 1 for job_id in ids)
    figures("6", variant="SIGTERM, grace enough", exit_code=code, released=8, finished=2)


def test_sigterm_with_handlers_past_the_grace_cuts_their_leases(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ids = ledger_audit.add_payload_jobs(ledger_conn, [{"wait_for_attempt": 2}] * 3)
    run = runs.start("--concurrency", "3", "--grace-seconds", "1", "--lease", "5m", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 3, what="three handlers to start")
    signalled = time.monotonic()
    run.send(signal.SIGTERM)
    code = run.wait(timeout=30)
    took = time.monotonic() - signalled

    assert code == EXIT_WORK_LEFT, run.stderr
    assert took < 15, f"the run took {took:.1f}s to leave with a 1s grace"
    summary = run.summary()
    assert summary["abandoned"] == 3 and summary["done"] == 0, summary
    assert "leases were cut short" in run.stderr
    rows = _rows(ledger_conn)
    assert sorted(rows.values()) == [("running", 1, True)] * 3, "leases were not cut to now"

    follow_up, audit = runs.finish(
        "--concurrency", "3", "--lease", "5m", dsn=dsn, ledger_conn=ledger_conn, done=3
    )
    assert follow_up.summary()["reaped"] == 3, "the next run did not reap the cut leases at once"
    for job_id in ids:
        first, second = audit.executions[job_id]
        assert first.returned_at is None and second.returned_at is not None
    figures("6", variant="SIGTERM, grace too short", exit_code=code, abandoned=3)


def test_second_signal_stops_at_once_and_still_cuts_leases(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"wait_for_attempt": 2}] * 2 + [{"n": 1}] * 5)
    run = runs.start("--concurrency", "2", "--grace-seconds", "120", "--lease", "5m", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 2, what="two handlers to start")
    run.send(signal.SIGINT)
    wait_until(lambda: statuses(ledger_conn).get("queued") == 5, timeout=10, what="release")
    signalled = time.monotonic()
    run.send(signal.SIGINT)
    code = run.wait(timeout=60)
    took = time.monotonic() - signalled

    assert code == EXIT_WORK_LEFT, run.stderr
    assert took < 15, f"the second signal took {took:.1f}s to stop a run with 120s of grace"
    assert "Traceback" not in run.stderr
    summary = run.summary()
    assert (summary["released"], summary["abandoned"]) == (5, 2), summary
    in_flight = [row for row in _rows(ledger_conn).values() if row[0] == "running"]
    assert in_flight == [("running", 1, True)] * 2
    runs.finish("--concurrency", "2", dsn=dsn, ledger_conn=ledger_conn, done=7)
    figures("6", variant="second SIGINT", exit_code=code, released=5, abandoned=2)


def test_budget_ending_mid_batch_releases_the_rest_and_exits_with_work_left(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """The first claim (before any job is timed) brings more than the budget can finish."""
    ids = ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 1.0}] * 24)
    run = runs.start("--concurrency", "2", "--max-seconds", "4", dsn=dsn)
    code = run.wait(timeout=60)

    assert code == EXIT_WORK_LEFT, run.stderr
    summary = run.summary()
    assert summary["exit_reason"] == "budget", summary
    assert summary["released"] >= 1 and summary["done"] >= 1, summary
    assert summary["done"] + summary["released"] == summary["claimed"], summary
    rows = _rows(ledger_conn)
    assert sum(1 for row in rows.values() if row[0] == "done") == summary["done"]
    queued = [row for row in rows.values() if row[0] != "done"]
    assert queued == [("queued", 0, None)] * (24 - summary["done"]), "an attempt was kept"
    ledger_audit.audit(ledger_conn, ready_queued_ok=True).assert_ok()

    _, audit = runs.finish("--concurrency", "24", dsn=dsn, ledger_conn=ledger_conn, done=24)
    assert all(len(audit.executions[job_id]) == 1 for job_id in ids)
    figures("6", variant="budget", exit_code=code, released=summary["released"])


def test_budget_ending_among_fast_jobs_gives_back_the_claim_taken_ahead(
    dsn: str, ledger_conn: psycopg.Connection[Any], figures: Figures
) -> None:
    """No-op jobs run faster than a claim comes back, so a claim's reply waits
    undecoded while the next claim goes out; the budget ends among them. Every
    job claimed is done or given back: none is left running under a lease."""
    add_jobs(ledger_conn, 200_000)
    result = drain_cli(
        "run", "--handler", "run_app:nothing", "--max-seconds", "1.5", "--json", dsn=dsn
    )

    assert result.returncode == EXIT_WORK_LEFT, result.stderr
    summary = json.loads(result.stdout)
    assert summary["exit_reason"] == "budget", summary
    counts = statuses(ledger_conn)
    assert "running" not in counts, (counts, summary)
    assert counts["done"] == summary["done"] > 1_000, (counts, summary)
    assert summary["claimed"] == summary["done"] + summary["released"], summary
    assert counts["queued"] == 200_000 - summary["done"]
    figures("6", variant="budget, fast jobs claimed ahead", released=summary["released"])


def test_budget_ending_with_a_handler_past_the_grace_cuts_its_lease(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    [stuck] = ledger_audit.add_payload_jobs(ledger_conn, [{"wait_for_attempt": 2}])
    rest = ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(5)])
    run = runs.run(
        "--max-seconds", "3", "--grace-seconds", "1", "--lease", "5m", "--batch-size", "1", dsn=dsn
    )

    assert run.process.returncode == EXIT_WORK_LEFT, run.stderr
    summary = run.summary()
    assert (summary["exit_reason"], summary["abandoned"]) == ("budget", 1), summary
    assert _rows(ledger_conn)[stuck] == ("running", 1, True), "the lease was not cut to now"
    assert all(_rows(ledger_conn)[job_id] == ("queued", 0, None) for job_id in rest)

    follow_up, _ = runs.finish("--lease", "5m", dsn=dsn, ledger_conn=ledger_conn, done=6)
    assert follow_up.summary()["reaped"] == 1
    figures("6", variant="budget, grace too short", exit_code=EXIT_WORK_LEFT, abandoned=1)


def test_in_flight_jobs_keep_their_lease_through_the_grace_period(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    """The lease keeper goes on while the run waits for in-flight jobs after a signal:
    a grace period four leases long never lets a rival reap them."""
    ids = ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 4.0}] * 2)
    run = runs.start("--concurrency", "2", "--lease", "1s", "--grace-seconds", "20", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 2, what="both handlers to start")
    run.send(signal.SIGTERM)
    rival_reaped = 0
    while run.poll() is None:
        rival_reaped += upkeep.reap(ledger_conn, JobTable()).requeued
        time.sleep(0.1)

    assert run.process.returncode == EXIT_WORK_LEFT, run.stderr
    summary = run.summary()
    assert (summary["done"], summary["lost"], summary["abandoned"]) == (2, 0, 0), summary
    assert rival_reaped == 0, "a job lost its lease while the run waited for it to finish"
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert all(len(audit.executions[job_id]) == 1 for job_id in ids)
