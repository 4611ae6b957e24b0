"""Exactly once under contention: separate processes racing on one table.

The same harness runs drain's claim and the obvious ``WHERE id = (SELECT ...
LIMIT 1)`` statement, so it is shown able to see a double claim when there is one.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import psycopg
import pytest

from drain.core.table import JobTable
from drain.store import claims, fencing
from tests.support import add_jobs, statuses

PROCESSES = 8
JOBS = 10_000
# The naive statement sorts every queued row per claim (it cannot use the ready
# index without a queue filter), so its race runs on a smaller table.
NAIVE_JOBS = 2_000

NAIVE_CLAIM = """
UPDATE jobs
SET status = 'done', attempts = attempts + 1
WHERE id = (
  SELECT id FROM jobs
  WHERE status = 'queued'
  ORDER BY run_at
  LIMIT 1
)
RETURNING id, attempts
"""


def _record(conn: psycopg.Connection[Any], claims: list[tuple[int, int]], pid: int) -> None:
    with (
        conn.cursor() as cursor,
        cursor.copy("COPY claim_log (job_id, attempt, pid) FROM STDIN") as copy,
    ):
        for job_id, attempt in claims:
            copy.write_row((job_id, attempt, pid))


def drain_worker(dsn: str, start: Any) -> None:
    """Claim batches with drain's statement and complete them, logging every claim."""
    table = JobTable()
    with psycopg.connect(dsn, autocommit=True) as conn:
        start.wait()
        while True:
            claimed = claims.send_claim(conn, table, "default", 50).result()
            if not claimed.jobs:
                return
            _record(
                conn,
                [(j.id, j.attempt) for j in claimed.jobs],
                multiprocessing.current_process().pid or 0,
            )
            assert not fencing.send_complete(conn, table, claimed.jobs).result().lost


def naive_worker(dsn: str, start: Any) -> None:
    """The article's naive claim, one statement per claim, as pgbench ran it."""
    claims: list[tuple[int, int]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        start.wait()
        for _ in range(NAIVE_JOBS // PROCESSES):
            row = conn.execute(NAIVE_CLAIM).fetchone()
            if row is not None:
                claims.append((row[0], row[1]))
        _record(conn, claims, multiprocessing.current_process().pid or 0)


def race(dsn: str, worker: Any) -> None:
    context = multiprocessing.get_context("spawn")
    # a barrier, not an event: every worker has started and connected before any
    # claims (spawned processes import for a while; an event set at once let the
    # first one ready drain the whole table on a loaded machine)
    start = context.Barrier(PROCESSES + 1)
    processes = [context.Process(target=worker, args=(dsn, start)) for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    start.wait(timeout=120)
    for process in processes:
        process.join(timeout=300)
    assert [p.exitcode for p in processes] == [0] * PROCESSES


@pytest.fixture
def claim_log(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE claim_log (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)"
    )


@pytest.mark.usefixtures("claim_log")
def test_eight_processes_claim_every_job_exactly_once(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    add_jobs(conn, JOBS)
    race(dsn, drain_worker)

    assert statuses(conn) == {"done": JOBS}
    assert conn.execute("SELECT min(attempts), max(attempts) FROM jobs").fetchone() == (1, 1)
    log = conn.execute(
        "SELECT count(*), count(DISTINCT job_id), count(DISTINCT pid) FROM claim_log"
    ).fetchone()
    assert log is not None
    claims, distinct_jobs, claimers = log
    assert (claims, distinct_jobs) == (JOBS, JOBS)
    assert claimers > 1, "the processes did not actually race"


@pytest.mark.usefixtures("claim_log")
def test_the_obvious_statement_double_claims_under_the_same_race(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    add_jobs(conn, NAIVE_JOBS)
    race(dsn, naive_worker)

    row = conn.execute(
        "SELECT count(*), count(DISTINCT job_id), max(attempt) FROM claim_log"
    ).fetchone()
    assert row is not None
    claims, distinct_jobs, most_claims_of_one_job = row
    assert claims > NAIVE_JOBS // 2
    assert distinct_jobs < claims, "no job was claimed twice"
    assert most_claims_of_one_job > 1
    assert statuses(conn).get("queued", 0) > 0, "double claims leave other jobs untouched"
