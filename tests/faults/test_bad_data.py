"""Scenarios 11 and 13: poisoned rows and exhausted rows at the head of the queue.

Bad rows fail alone, without being handed to a handler and without harming the
jobs claimed beside them; the rest of the queue drains.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import psycopg
import pytest

from tests.faults import ledger
from tests.faults.conftest import Figures
from tests.faults.processes import Runs
from tests.support import add_jobs

pytestmark = pytest.mark.faults

MAX_PAYLOAD = 32_768  # the deep row (about 16 KB stored) fits; the oversized one does not


def _poison(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """One row of each poison, all older than every healthy job."""
    deep = "[" * 5000 + "]" * 5000
    large = json.dumps({"blob": secrets.token_hex(50_000)})
    rows = {
        "deep jsonb": add_jobs(conn, 1, payload_json=deep, run_in=-3600),
        "run_at -infinity": add_jobs(conn, 1, run_at="-infinity"),
        "created_at infinity": add_jobs(conn, 1, run_in=-3600),
        "oversized payload": add_jobs(conn, 1, payload_json=large, run_in=-3600),
    }
    conn.execute(
        "UPDATE jobs SET created_at = 'infinity' WHERE id = %s", (rows["created_at infinity"][0],)
    )
    return {name: ids[0] for name, ids in rows.items()}


def _outcome(conn: psycopg.Connection[Any], job_id: int) -> tuple[str, int, str | None]:
    """status, attempts, last_error (a poisoned row's times cannot be read into Python)."""
    row = conn.execute(
        "SELECT status, attempts, last_error FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def test_poisoned_rows_at_the_head_of_a_batch_fail_alone(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    poison = _poison(ledger_conn)
    healthy = ledger.add_payload_jobs(ledger_conn, [{"n": n} for n in range(16)])
    run = runs.run("--batch-size", "10", "--max-payload", str(MAX_PAYLOAD), dsn=dsn)

    assert run.process.returncode == 0, run.stderr
    summary = run.summary()
    assert (summary["done"], summary["failed"]) == (16, 4), summary
    reasons = {
        "deep jsonb": "nested too deeply",
        "run_at -infinity": "not a finite timestamp",
        "created_at infinity": "not a finite timestamp",
        "oversized payload": "too large",
    }
    for name, job_id in poison.items():
        status, attempts, last_error = _outcome(ledger_conn, job_id)
        assert (status, attempts) == ("failed", 1), name
        assert last_error is not None and reasons[name] in last_error, (name, last_error)
    audit = ledger.audit(ledger_conn)
    audit.assert_ok()
    assert set(audit.executions) == set(healthy), "a poisoned row reached a handler"
    assert all(len(audit.executions[job_id]) == 1 for job_id in healthy)
    assert all(_outcome(ledger_conn, job_id)[:2] == ("done", 1) for job_id in healthy)
    figures("11", poisoned=len(poison), failed=summary["failed"], batch_mates_done=16)


def test_exhausted_rows_at_the_head_do_not_stall_the_queue(
    dsn: str,
    ledger_conn: psycopg.Connection[Any],
    runs: Runs,
    soak: bool,
    figures: Figures,
) -> None:
    exhausted_count = 5_000 if soak else 1_000
    exhausted = add_jobs(
        ledger_conn,
        exhausted_count,
        attempts=5,
        max_attempts=5,
        run_in=-3600,
        last_error="boom",
    )
    below_one = add_jobs(ledger_conn, 3, attempts=1, max_attempts=0, run_in=-3600)
    counts_as_one = ledger.add_payload_jobs(ledger_conn, [{"n": 0}] * 3, max_attempts=0)
    healthy = ledger.add_payload_jobs(ledger_conn, [{"n": n} for n in range(100)])
    run = runs.run("--batch-size", "100", "--concurrency", "4", dsn=dsn)

    assert run.process.returncode == 0, run.stderr
    summary = run.summary()
    assert summary["failed"] == exhausted_count + 3, summary
    assert summary["done"] == 103, summary
    rows = ledger_conn.execute(
        "SELECT status, attempts, last_error, count(*) FROM jobs WHERE id = ANY(%s) "
        "GROUP BY 1, 2, 3",
        (exhausted,),
    ).fetchall()
    assert rows == [("failed", 5, "boom", exhausted_count)], "exhausted rows were run or mangled"
    for job_id in below_one:
        assert _outcome(ledger_conn, job_id) == (
            "failed",
            1,
            "attempts exhausted before this claim",
        )
    audit = ledger.audit(ledger_conn)
    audit.assert_ok()
    assert set(audit.executions) == set(healthy) | set(counts_as_one)
    assert all(len(runs_of) == 1 for runs_of in audit.executions.values())
    figures("13", exhausted=exhausted_count + 3, failed=summary["failed"], done=summary["done"])
