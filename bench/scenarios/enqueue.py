"""Enqueue: adding jobs in bulk with ``drain.enqueue_many`` (one COPY, one transaction).

Timed inside this process from the call to the commit, on an open connection,
as an application that enqueues in bulk would do it. For contrast, the same
with ``drain.enqueue`` (one INSERT per job, one transaction). Target: bulk
enqueue at least 50,000 jobs/s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

import drain
from bench.scenarios import Check, Context, Outcome, Row

NAME = "enqueue"
TITLE = "Enqueue: bulk COPY with drain.enqueue_many, against one INSERT per job"


def bulk(conn: psycopg.Connection[Any], count: int) -> None:
    drain.enqueue_many(conn, ({"n": n} for n in range(count)))


def one_by_one(conn: psycopg.Connection[Any], count: int) -> None:
    for n in range(count):
        drain.enqueue(conn, {"n": n})


def timed(dsn: str, count: int, enqueue: Callable[[psycopg.Connection[Any], int], None]) -> float:
    with psycopg.connect(dsn) as conn:
        conn.execute("TRUNCATE jobs")
        conn.commit()
        started = time.perf_counter()
        enqueue(conn, count)
        conn.commit()
        seconds = time.perf_counter() - started
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
        assert row is not None and row[0] == count, f"expected {count} jobs, found {row}"
        return seconds


def run(ctx: Context) -> Outcome:
    dsn = ctx.server.drain_database("enqueue")
    plan = [
        (
            Row("drain.enqueue_many (COPY), one transaction", "copy", ctx.size(100_000, 10_000)),
            bulk,
        ),
        (
            Row(
                "drain.enqueue (one INSERT per job), one transaction",
                "insert",
                ctx.size(10_000, 1_000),
            ),
            one_by_one,
        ),
    ]
    outcome = Outcome(NAME, TITLE)
    outcome.rows += [row for row, _ in plan]
    for number in range(1, ctx.runs + 1):
        for row, enqueue in plan:
            seconds = timed(dsn, row.jobs, enqueue)
            row.seconds.add(seconds)
            ctx.log(f"  run {number}/{ctx.runs} {row.label}: {row.jobs / seconds:,.0f} jobs/s")
    copy = outcome.row("copy")
    assert copy is not None
    outcome.checks.append(Check("bulk enqueue jobs/s", copy.rate.median, 50_000, unit=""))
    return outcome
