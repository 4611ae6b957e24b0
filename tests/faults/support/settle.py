"""Running drain again and again until a queue settles, the way a schedule would."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from tests.faults.support.processes import Run, Runs


def _state(conn: psycopg.Connection[Any]) -> tuple[int, int, int]:
    """(runnable now, waiting for a retry or a lease to end, running under a live lease)."""
    row = conn.execute(
        """
        SELECT count(*) FILTER (WHERE (status = 'queued' AND run_at <= now())
                                   OR (status = 'running' AND locked_until < now())),
               count(*) FILTER (WHERE status = 'queued' AND run_at > now()),
               count(*) FILTER (WHERE status = 'running' AND locked_until >= now())
        FROM jobs
        """
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def settle(
    runs: Runs,
    conn: psycopg.Connection[Any],
    *options: str,
    dsn: str,
    max_runs: int = 12,
    timeout: float = 120.0,
) -> list[Run]:
    """Start a run whenever work is runnable, wait for retries and leases, until none is left."""
    done: list[Run] = []
    deadline = time.monotonic() + timeout
    while True:
        runnable, later, alive = _state(conn)
        if not (runnable or later or alive):
            return done
        if time.monotonic() > deadline:
            raise AssertionError(f"queue not settled after {timeout}s: {runnable, later, alive}")
        if not runnable:
            time.sleep(0.05)
            continue
        assert len(done) < max_runs, f"still work after {max_runs} runs"
        done.append(runs.run(*options, dsn=dsn))
