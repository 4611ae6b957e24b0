"""``async def`` handlers run as tasks on the run's one event loop, through the real CLI.

A run whose queues all have async handlers holds ``--concurrency`` jobs as tasks,
past the thread cap of sync handlers and without a thread per job; a run may serve
sync and async queues together; whatever a task raises concerns its job alone;
and a task that never returns is cancelled at the stop, its job's lease cut like
that of a sync handler still working. The fault suite runs against async handlers
as well: ``DRAIN_FAULT_HANDLERS=async pytest tests/faults``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import add_jobs, drain_cli, summary_of

APP = ("--app", "async_handlers")
# Threads a run may have besides its jobs': the main thread, the lease keeper, the
# event loop, asyncio's default executor threads for to_thread, and a few more.
FEW_THREADS = 40


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {"ASYNC_TEST_DIR": str(tmp_path)}


def test_async_jobs_run_as_tasks_past_the_thread_cap(
    conn: psycopg.Connection[Any], dsn: str, files: dict[str, str], tmp_path: Path
) -> None:
    """1,500 jobs in flight at once (each waits for all the others), and no thread each."""
    together = 1500
    add_jobs(conn, together, queue="gather", payload={"together": together})
    result = drain_cli(
        "run", *APP, "--queue", "gather", "--concurrency", str(together), "--json",
        dsn=dsn, env=files, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert (summary["done"], summary["retried"]) == (together, 0)
    threads = [int(path.read_text()) for path in tmp_path.glob("threads-*")]
    assert len(threads) == together
    assert max(threads) < FEW_THREADS


def test_sync_handlers_keep_their_thread_cap(dsn: str, files: dict[str, str]) -> None:
    """Past 1,000, a run serving a sync queue is refused in one line; an async one is not
    refused until 10,000."""
    mixed = drain_cli("run", *APP, "--concurrency", "2000", dsn=dsn, env=files)
    assert mixed.returncode == 2, mixed.stderr
    assert mixed.stderr.strip().splitlines() == [
        "drain: error: --concurrency must be at most 1,000 for sync handlers (one thread per "
        "job; queue 'plain' has one); async def handlers run as tasks and allow more"
    ]
    tasks = drain_cli("run", *APP, "--queue", "io", "--concurrency", "10000", dsn=dsn, env=files)
    assert tasks.returncode == 0, tasks.stderr
    past = drain_cli("run", *APP, "--queue", "io", "--concurrency", "10001", dsn=dsn, env=files)
    assert past.returncode == 2
    assert "--concurrency must be at most 10,000" in past.stderr
    assert "Traceback" not in mixed.stderr + past.stderr


def test_one_run_serves_sync_and_async_queues(
    conn: psycopg.Connection[Any], dsn: str, files: dict[str, str], tmp_path: Path
) -> None:
    add_jobs(conn, 60, queue="io")
    add_jobs(conn, 40, queue="plain")
    result = drain_cli(
        "run", *APP, "--queue", "io", "--queue", "plain", "--concurrency", "8", "--json",
        dsn=dsn, env=files,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 100
    io_threads = {path.read_text() for path in tmp_path.glob("io-*")}
    plain_threads = {path.read_text() for path in tmp_path.glob("plain-*")}
    assert io_threads == {"drain-async"}
    assert len(list(tmp_path.glob("io-*"))) == 60
    assert len(list(tmp_path.glob("plain-*"))) == 40
    assert all(name.startswith("drain-worker-") for name in plain_threads)
    status = conn.execute("SELECT status, count(*) FROM jobs GROUP BY 1").fetchall()
    assert status == [("done", 100)]


def test_what_a_task_raises_concerns_its_job_alone(
    conn: psycopg.Connection[Any], dsn: str, files: dict[str, str]
) -> None:
    """SystemExit, KeyboardInterrupt and CancelledError from a task fail its attempt
    (retried), as any error does; PermanentError fails the job, RetryLater snoozes it;
    the loop lives on and the other jobs are done."""
    kinds = ["exit", "interrupt", "cancelled", "error", "permanent", "later"]
    ids = {kind: add_jobs(conn, 1, queue="fail", payload={"raise": kind})[0] for kind in kinds}
    add_jobs(conn, 30, queue="io")
    result = drain_cli(
        "run", *APP, "--queue", "fail", "--queue", "io", "--concurrency", "4", "--json",
        dsn=dsn, env=files,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert (summary["done"], summary["retried"], summary["failed"], summary["snoozed"]) == (
        30,
        4,
        1,
        1,
    )
    rows = dict(
        conn.execute(
            "SELECT id, status || ' ' || attempts || ' ' || coalesce(last_error, '-') FROM jobs"
            " WHERE queue = 'fail'"
        ).fetchall()
    )
    assert rows[ids["exit"]] == "queued 1 SystemExit: 3"
    assert rows[ids["interrupt"]] == "queued 1 KeyboardInterrupt"
    assert rows[ids["cancelled"]] == "queued 1 CancelledError"
    assert rows[ids["error"]] == "queued 1 RuntimeError: task failed: error"
    assert rows[ids["permanent"]] == "failed 1 PermanentError: no good"
    assert rows[ids["later"]].startswith("queued ")


def test_a_task_that_never_returns_is_cancelled_at_the_stop(
    conn: psycopg.Connection[Any], dsn: str, files: dict[str, str], tmp_path: Path
) -> None:
    """Past the budget and the grace, the task is cancelled and its job's lease cut, so
    the next run reaps it; the jobs done meanwhile are recorded."""
    [hung] = add_jobs(conn, 1, queue="hang")
    add_jobs(conn, 20, queue="io")
    result = drain_cli(
        "run", *APP, "--queue", "hang", "--queue", "io", "--concurrency", "4",
        "--max-seconds", "3", "--grace-seconds", "1", "--json", dsn=dsn, env=files,
    )  # fmt: skip
    summary = summary_of(result)
    assert result.returncode == 3, result.stderr
    assert (summary["done"], summary["abandoned"], summary["exit_reason"]) == (20, 1, "budget")
    assert (tmp_path / f"hang-{hung}").exists()
    assert (tmp_path / f"cancelled-{hung}").read_text() == "True"  # told: lease_lost
    row = conn.execute(
        "SELECT status, locked_until <= now() FROM jobs WHERE id = %s", (hung,)
    ).fetchone()
    assert row == ("running", True)


def test_a_sync_function_returning_a_coroutine_is_awaited_on_the_one_loop(
    conn: psycopg.Connection[Any], dsn: str, files: dict[str, str], tmp_path: Path
) -> None:
    """Its worker thread waits; a KeyboardInterrupt the coroutine raises fails its job
    alone and leaves the loop running for the jobs after it."""
    [interrupted] = add_jobs(conn, 1, queue="wrapped", payload={"raise": "interrupt"})
    add_jobs(conn, 10, queue="wrapped")
    result = drain_cli(
        "run", *APP, "--queue", "wrapped", "--concurrency", "1", "--json", dsn=dsn, env=files
    )
    assert result.returncode == 0, result.stderr
    assert (summary_of(result)["done"], summary_of(result)["retried"]) == (10, 1)
    assert {path.read_text() for path in tmp_path.glob("wrapped-*")} == {"drain-async"}
    row = conn.execute("SELECT last_error FROM jobs WHERE id = %s", (interrupted,)).fetchone()
    assert row == ("KeyboardInterrupt",)


def test_a_task_that_blocks_the_loop_is_left_as_a_stuck_thread_is(
    conn: psycopg.Connection[Any], dsn: str, files: dict[str, str], tmp_path: Path
) -> None:
    """A blocking call in an async handler stalls the loop past the budget and the
    grace: the run still leaves, its job's lease cut for the next run to reap, and
    it says so (exit 3, never "drained")."""
    [stuck] = add_jobs(conn, 1, queue="block", payload={"seconds": 30})
    result = drain_cli(
        "run", *APP, "--queue", "block", "--max-seconds", "2", "--grace-seconds", "1",
        "--json", dsn=dsn, env=files,
    )  # fmt: skip
    summary = summary_of(result)
    assert result.returncode == 3, result.stderr
    assert (summary["abandoned"], summary["exit_reason"]) == (1, "budget")
    assert (tmp_path / f"block-{stuck}").exists()
    assert "blocked by a handler that does not yield" in result.stderr
    row = conn.execute(
        "SELECT status, locked_until <= now() FROM jobs WHERE id = %s", (stuck,)
    ).fetchone()
    assert row == ("running", True)
