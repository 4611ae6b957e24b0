"""``drain cancel`` and ``drain.cancel``: queued jobs never run, running ones are told.

Cancelling uses only the article's four statuses (a queued job becomes failed
with last_error 'cancelled'), so these tests also hold on a table made by hand.
A running job learns of its cancel through the lease renewal, without LISTEN:
the handler here waits for ``job.cancel_requested`` and notes when it saw it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import drain
from tests.support import add_jobs, drain_cli, job, start_cli, statuses

LEASE = 3.0


def test_a_cancelled_queued_job_fails_at_once_and_is_never_claimed(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    cancelled = add_jobs(conn, 2)
    kept = add_jobs(conn, 1)
    done = add_jobs(conn, 1, status="done", attempts=1)

    result = drain_cli("cancel", *map(str, [*cancelled, *done, 999_999]), "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["cancelled"] == cancelled
    assert report["cancel_requested"] == []
    assert report["left_alone"] == [*done, 999_999]
    for job_id in cancelled:
        row = job(conn, job_id)
        assert (row["status"], row["last_error"], row["attempts"]) == ("failed", "cancelled", 0)
    assert job(conn, done[0])["status"] == "done"  # done stays done

    run = drain_cli("run", "--handler", "demo_handlers:ok", "--json", dsn=dsn)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["claimed"] == 1  # only the job that was not cancelled
    assert job(conn, kept[0])["status"] == "done"
    assert all(job(conn, job_id)["status"] == "failed" for job_id in cancelled)


def test_cancel_by_queue_and_age_with_a_dry_run_first(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    old = add_jobs(conn, 3, queue="reports", created_ago=2 * 86400)
    new = add_jobs(conn, 2, queue="reports")
    other = add_jobs(conn, 2, queue="emails", created_ago=2 * 86400)

    dry = drain_cli("cancel", "--queue", "reports", "--older-than", "1d", "--dry-run", dsn=dsn)
    assert dry.returncode == 0, dry.stderr
    assert "would cancel 3 queued job(s)" in dry.stderr
    assert statuses(conn) == {"queued": 7}

    real = drain_cli("cancel", "--queue", "reports", "--older-than", "1d", "--json", dsn=dsn)
    assert real.returncode == 0, real.stderr
    assert json.loads(real.stdout)["cancelled"] == old
    assert {job(conn, i)["status"] for i in new + other} == {"queued"}


def test_cancel_in_the_callers_transaction_rolls_back_with_it(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids = add_jobs(conn, 2)
    with psycopg.connect(dsn) as own:
        outcome = drain.cancel(own, ids)
        assert outcome.cancelled == tuple(ids)
        own.rollback()
    assert statuses(conn) == {"queued": 2}
    with psycopg.connect(dsn) as own, own.transaction():
        drain.cancel(own, ids[:1])
    assert job(conn, ids[0])["status"] == "failed"
    assert job(conn, ids[1])["status"] == "queued"


@pytest.fixture
def notes(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute("CREATE TABLE cancel_seen (job_id bigint, attempt int, what text, at timestamptz)")
    return conn


def _noted(conn: psycopg.Connection[Any], what: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT job_id, attempt, at FROM cancel_seen WHERE what = %s ORDER BY at", (what,)
    ).fetchall()


def _wait_for(conn: psycopg.Connection[Any], what: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(_noted(conn, what)) < count:
        assert time.monotonic() < deadline, f"no {what!r} within 30 s"
        time.sleep(0.05)


@pytest.mark.parametrize(("then", "status"), [("return", "done"), ("raise", "failed")])
def test_a_running_job_sees_its_cancel_within_a_third_of_the_lease(
    dsn: str, notes: psycopg.Connection[Any], then: str, status: str
) -> None:
    """The handler is told at the run's next renewal; what it then does is recorded,
    and the job never gets another attempt (a failure would otherwise be retried)."""
    (job_id,) = add_jobs(notes, 1, payload={"then": then}, max_attempts=5)
    run = start_cli(
        "run",
        "--handler",
        "cancel_handlers:until_cancelled",
        "--lease",
        f"{LEASE:g}s",
        "--json",
        dsn=dsn,
        env={"CANCEL_NOTES_DSN": dsn},
    )
    try:
        _wait_for(notes, "started", 1)
        time.sleep(0.3)  # past the claim's own renewal, so the cancel waits for the keeper
        asked = notes.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
        cancel = drain_cli("cancel", str(job_id), "--json", dsn=dsn)
        assert cancel.returncode == 0, cancel.stderr
        assert json.loads(cancel.stdout)["cancel_requested"] == [job_id]
        _wait_for(notes, "cancel seen", 1)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    seen = _noted(notes, "cancel seen")[0][2]
    # A renewal is due at the latest a third of a lease after the last one; one
    # second more for two process starts on a shared machine.
    assert (seen - asked).total_seconds() < LEASE / 3 + 1.0
    row = job(notes, job_id)
    assert row["status"] == status
    assert row["attempts"] == 1 and row["max_attempts"] == 1
    summary = json.loads(out)
    assert summary["claimed"] == 1 and summary["retried"] == 0


def test_a_job_cancelled_while_it_waits_in_the_run_is_never_started(
    dsn: str, notes: psycopg.Connection[Any]
) -> None:
    """Claimed behind a long job (one worker), cancelled before it starts: the run
    gives it back as failed at its next renewal, and its handler never runs."""
    first, waiting = add_jobs(notes, 2, payload={"patience": 4, "then": "return"})
    run = start_cli(
        "run",
        "--handler",
        "cancel_handlers:until_cancelled",
        "--lease",
        f"{LEASE:g}s",
        "--batch-size",
        "2",
        "--json",
        dsn=dsn,
        env={"CANCEL_NOTES_DSN": dsn},
    )
    try:
        _wait_for(notes, "started", 1)
        assert job(notes, waiting)["status"] == "running"  # claimed with the first
        cancel = drain_cli("cancel", str(waiting), "--json", dsn=dsn)
        assert json.loads(cancel.stdout)["cancel_requested"] == [waiting]
        drain_cli("cancel", str(first), dsn=dsn)  # and let the first one return
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert [row[0] for row in _noted(notes, "started")] == [first]
    row = job(notes, waiting)
    assert (row["status"], row["last_error"]) == ("failed", "cancelled")
    assert json.loads(out)["cancelled"] == 1


def test_a_cancelled_exec_program_is_stopped_and_its_job_recorded_cancelled(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """A program can be stopped from outside, unlike a Python handler: at the run's next
    renewal its group gets SIGTERM, and the job ends failed as cancelled, not done.
    It used to run its 8 s to the end and be recorded done."""
    (job_id,) = add_jobs(conn, 1, max_attempts=5)
    beats = tmp_path / "beats"
    command = (
        f"cat >/dev/null; i=0; while [ $i -lt 80 ]; do date +%s.%N >> {beats}; "
        "sleep 0.1; i=$((i + 1)); done"
    )
    run = start_cli("run", "--exec", command, "--lease", f"{LEASE:g}s", "--json", dsn=dsn)
    try:
        deadline = time.monotonic() + 30
        while not beats.exists():
            assert time.monotonic() < deadline, "the program never started"
            time.sleep(0.05)
        time.sleep(0.3)  # past the claim's own renewal, so the cancel waits for the keeper
        asked = time.time()
        cancel = drain_cli("cancel", str(job_id), "--json", dsn=dsn)
        assert json.loads(cancel.stdout)["cancel_requested"] == [job_id], cancel.stderr
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    last_beat = float(beats.read_text().split()[-1])
    assert run.returncode == 0, err
    # A renewal is due at the latest a third of a lease after the last one; one
    # second more for a process start on a shared machine.
    assert last_beat - asked < LEASE / 3 + 1.0, f"the program ran {last_beat - asked:.1f}s on"
    row = job(conn, job_id)
    assert (row["status"], row["last_error"], row["attempts"]) == ("failed", "cancelled", 1)
    summary = json.loads(out)
    assert (summary["cancelled"], summary["done"], summary["lost"]) == (1, 0, 0), summary
