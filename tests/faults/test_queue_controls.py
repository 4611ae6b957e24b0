"""Queue controls across runs: a cap on a queue's running jobs, and strict queue order.

A cap is a promise about every run at once, so it is checked the only way that
means anything: several real runs racing on one table, and a ledger of what the
handlers actually ran, swept for the most executions in flight at any moment.
"""

from __future__ import annotations

import signal
from typing import Any

import psycopg
import pytest

from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs, ledger_count, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

CAP = 7
RUNS = 5


def most_at_once(conn: psycopg.Connection[Any]) -> int:
    """The most executions in flight at one moment, by the ledger's own clock."""
    rows = conn.execute(
        """
        SELECT max(in_flight) FROM (
            SELECT sum(step) OVER (ORDER BY at, step) AS in_flight
            FROM (SELECT started_at AS at, 1 AS step FROM fault_ledger
                  UNION ALL
                  SELECT returned_at, -1 FROM fault_ledger WHERE returned_at IS NOT NULL) AS e
        ) AS sweep
        """
    ).fetchone()
    assert rows is not None
    return int(rows[0] or 0)


def test_a_queue_cap_holds_across_racing_runs(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    jobs = 140
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 0.1}] * jobs)
    racing = [
        runs.start(
            "--queue-cap",
            f"default={CAP}",
            "--concurrency",
            "4",
            "--max-seconds",
            "90",
            dsn=dsn,
        )
        for _ in range(RUNS)
    ]
    codes = [run.wait(150) for run in racing]
    # a run that found every place held and left, jobs still ready, ends capped (3)
    assert set(codes) <= {0, 3}, [run.stderr for run in racing]
    assert all(run.summary()["exit_reason"] == "capped" for run in racing if run.poll() == 3)
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": jobs}
    peak = most_at_once(ledger_conn)
    assert peak <= CAP, f"{peak} jobs of a queue capped at {CAP} ran at once"
    # 5 runs of 4 workers would run 20 at once without the cap; the cap is a
    # ceiling, not a queue of one: more than one run must have worked at once.
    assert peak > 4, f"only {peak} at once: the runs took turns instead of sharing the cap"
    working = [run for run in racing if run.summary()["done"] > 0]
    assert len(working) >= 2


def test_a_run_finding_the_cap_taken_leaves_the_queue_to_the_runs_holding_it(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    """A run holding no job of a full queue exits at once instead of asking again."""
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 3}] * 2 + [{"sleep": 0}] * 3)
    holder = runs.start("--queue-cap", "default=2", "--concurrency", "2", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) >= 2, what="the holder to fill the cap")
    latecomer = runs.run("--queue-cap", "default=2", dsn=dsn, timeout=60)
    # work is left, for a later run: exit 3, capped, never 0 "drained"
    assert latecomer.process.returncode == 3, latecomer.stderr
    summary = latecomer.summary()
    assert (summary["claimed"], summary["exit_reason"]) == (0, "capped"), summary
    assert "drained" not in latecomer.stderr
    assert "queue 'default' is at its cap (2 running across runs)" in latecomer.stderr
    assert latecomer.seconds < 3, "the latecomer waited for a place instead of leaving"
    assert holder.wait(60) == 0, holder.stderr
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": 5}


def test_strict_order_drains_each_queue_before_the_next(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    for name in ("first", "second", "third"):
        ledger_conn.execute(
            "INSERT INTO jobs (queue, payload) SELECT %s, '{}' FROM generate_series(1, 30)",
            (name,),
        )
    run = runs.run(
        "--queue", "first,second,third", "--queue-order", "strict", "--batch-size", "7", dsn=dsn
    )
    assert run.process.returncode == 0, run.stderr
    order = [
        row[0]
        for row in ledger_conn.execute(
            "SELECT j.queue FROM fault_ledger AS l JOIN jobs AS j ON j.id = l.job_id "
            "ORDER BY l.started_at, l.job_id"
        )
    ]
    assert order == ["first"] * 30 + ["second"] * 30 + ["third"] * 30

    # the default takes the queues in turn: the second queue starts before the first ends
    ledger_conn.execute("TRUNCATE fault_ledger")
    for name in ("first", "second"):
        ledger_conn.execute(
            "INSERT INTO jobs (queue, payload) SELECT %s, '{}' FROM generate_series(1, 30)",
            (name,),
        )
    rotating = runs.run("--queue", "first,second", "--batch-size", "7", dsn=dsn)
    assert rotating.process.returncode == 0, rotating.stderr
    queues = [
        row[0]
        for row in ledger_conn.execute(
            "SELECT j.queue FROM fault_ledger AS l JOIN jobs AS j ON j.id = l.job_id "
            "ORDER BY l.started_at, l.job_id"
        )
    ]
    assert queues.index("second") < len(queues) - 1 - queues[::-1].index("first")


def test_a_job_cancelled_inside_a_frozen_run_is_never_run_again(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    """A run frozen (SIGSTOP) while it works on a job; the job is cancelled; its lease
    runs out. The next run reaps it as failed instead of queueing it again, and the
    thawed run's late outcome changes nothing: the job ran once, and no more."""
    lease = 3.0
    (job_id,) = ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 1.0}], max_attempts=5)
    frozen = runs.start("--lease", f"{lease}s", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 1, what="the job to start")
    frozen.send(signal.SIGSTOP)
    cancel = runs.run("cancel", str(job_id), "--json", dsn=dsn, command=())
    assert cancel.process.returncode == 0, cancel.stderr
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
    assert rival.summary()["reaped"] == 1 and rival.summary()["claimed"] == 0
    frozen.send(signal.SIGCONT)
    assert frozen.wait(60) == 1 and frozen.summary()["exit_reason"] == "lost", frozen.stderr
    row = ledger_conn.execute(
        "SELECT status, attempts, last_error FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row == ("failed", 1, "cancelled")
    assert ledger_count(ledger_conn) == 1  # executed once, never again
    assert ledger_conn.execute("SELECT count(*) FROM fault_repeats").fetchone() == (0,)
