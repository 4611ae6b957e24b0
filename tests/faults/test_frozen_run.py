"""A run frozen (SIGSTOP) past its leases, and thawed while another run does its jobs.

The jobs the frozen run was executing when it stopped may overlap with the other
run's executions of them: nothing can stop a handler that is already running,
which is why handlers must be idempotent (README, Guarantees). The jobs it had
claimed but not started must never start once it thaws: their leases ran out
while it was frozen, and another run owns them now.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import psycopg
import pytest

from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs, ledger_count, wait_until
from tests.support import add_jobs, drain_cli, start_cli, statuses

pytestmark = pytest.mark.faults


def test_a_thawed_run_never_starts_the_jobs_it_was_waiting_with(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    lease = 3.0
    jobs = 8
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 1.0} for _ in range(jobs)])
    frozen = runs.start("--lease", f"{lease}s", "--concurrency", "2", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 2, what="two jobs to start")
    frozen.send(signal.SIGSTOP)
    executing = {row[0] for row in ledger_conn.execute("SELECT job_id FROM fault_ledger")}
    wait_until(
        lambda: (
            ledger_conn.execute(
                "SELECT count(*) FROM jobs WHERE status = 'running' AND locked_until >= now()"
            ).fetchone()
            == (0,)
        ),
        timeout=30,
        what="the frozen run's leases to run out",
    )
    rival = runs.start("--lease", f"{lease}s", "--concurrency", "2", dsn=dsn)
    wait_until(
        lambda: (
            ledger_conn.execute("SELECT count(*) FROM fault_ledger WHERE attempt = 2").fetchone()
            == (1,)
        ),
        what="the rival to start a job again",
    )
    frozen.send(signal.SIGCONT)
    # the thawed run lost what it was holding: exit 1, exit reason lost
    assert frozen.wait() == 1 and frozen.summary()["exit_reason"] == "lost", frozen.stderr
    assert rival.wait() == 0, rival.stderr

    executions = ledger_audit.executions(ledger_conn)
    started_after_thaw = sum(
        len(runs_of_job) - 1
        for job_id, runs_of_job in executions.items()
        if job_id not in executing
    )
    overlapping = sum(
        ledger_audit.overlapping_pairs(runs_of_job)
        for job_id, runs_of_job in executions.items()
        if job_id not in executing
    )
    figures(
        "frozen run",
        lease_s=lease,
        jobs=jobs,
        executing_when_frozen=len(executing),
        waiting_jobs_started_after_thaw=started_after_thaw,
        executions_overlapping=overlapping,
    )
    assert overlapping == 0
    assert started_after_thaw == 0
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": jobs}
    # What the frozen run was executing, and what it was holding, was no longer its
    # own to record or start once it thawed (it may claim jobs afresh afterwards).
    assert frozen.summary()["lost"] == jobs


def test_a_python_handler_of_a_thawed_run_learns_its_lease_was_lost(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """Nothing can stop Python code from outside; ``job.lease_lost`` lets a handler
    know that whatever it does now will not be recorded, so it can stop."""
    lease = 3.0
    [job_id] = ledger_audit.add_payload_jobs(ledger_conn, [{"until_lease_lost": 60}])
    frozen = runs.start("--lease", f"{lease}s", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 1, what="the handler to start")
    frozen.send(signal.SIGSTOP)
    wait_until(
        lambda: (
            ledger_conn.execute(
                "SELECT locked_until < now() FROM jobs WHERE id = %s", (job_id,)
            ).fetchone()
            == (True,)
        ),
        timeout=30,
        what="the frozen run's lease to run out",
    )
    rival = runs.run("--lease", f"{lease}s", dsn=dsn)
    assert rival.process.returncode == 0, rival.stderr
    frozen.send(signal.SIGCONT)
    thawed = ledger_conn.execute("SELECT clock_timestamp()").fetchone()
    frozen.wait()  # its exit code is that of a run that lost a job (runner.py decides)

    returned = ledger_conn.execute(
        "SELECT returned_at FROM fault_ledger WHERE job_id = %s AND attempt = 1", (job_id,)
    ).fetchone()
    assert returned is not None and returned[0] is not None, frozen.stderr
    assert thawed is not None
    figures(
        "frozen run",
        variant="a Python handler polls job.lease_lost",
        lease_s=lease,
        returned_after_thaw_s=round((returned[0] - thawed[0]).total_seconds(), 1),
    )
    assert frozen.summary()["lost"] == 1
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": 1}


def test_a_run_frozen_while_it_claims_ahead_holds_no_row_a_rival_waits_on(
    dsn: str, ledger_conn: psycopg.Connection[Any], figures: Figures
) -> None:
    """No-op jobs make a run claim ahead: it decodes one claim while the server
    records outcomes and runs the next. Frozen there, it must hold no transaction
    open: a rival reaps its expired leases and drains the rest within its budget."""
    add_jobs(ledger_conn, 200_000)
    fast = ("--handler", "run_app:nothing", "--lease", "2s", "--json")
    frozen = start_cli("run", *fast, "--max-seconds", "60", dsn=dsn)
    try:
        time.sleep(1.0)
        frozen.send_signal(signal.SIGSTOP)
        time.sleep(2.5)  # its leases run out
        rival = drain_cli("run", *fast, "--max-seconds", "20", dsn=dsn, timeout=60)
    finally:
        frozen.send_signal(signal.SIGCONT)
    frozen.communicate(timeout=60)

    # Not waiting on the frozen run: the rival works through its budget (a rival
    # blocked on a row the frozen run holds never ends: drain_cli times out).
    assert rival.returncode in (0, 3), rival.stderr
    summary = json.loads(rival.stdout)
    assert summary["exit_reason"] in ("drained", "budget"), summary
    assert summary["done"] > 10_000 and summary["seconds"] < 25, summary
    rest = drain_cli("run", *fast, "--max-seconds", "60", dsn=dsn, timeout=90)
    assert rest.returncode == 0, rest.stderr
    assert statuses(ledger_conn) == {"done": 200_000}
    figures(
        "frozen run",
        variant="claiming ahead",
        rival_done=summary["done"],
        rival_seconds=summary["seconds"],
        rival_exit=summary["exit_reason"],
    )
