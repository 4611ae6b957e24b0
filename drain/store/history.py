"""How long a queue's runs really take, read from the run table for ``drain plan --dsn``.

A plan is only as good as its ``d``; every run records its seconds in
``drain_runs``, so a plan for a queue that already runs can use what was measured
rather than a guess. Kept apart from :mod:`drain.planning.plan`, which stays free of any
database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from drain.core.config import ConnectOptions
from drain.core.redact import Redactor
from drain.core.table import JobTable
from drain.store.db import connect, translate
from drain.store.sqlfiles import statement_for


@dataclass(frozen=True)
class RunDurations:
    """The runs of one queue over the last ``days``, summarised for a plan."""

    runs: int
    p95_seconds: float | None
    days: float


def run_durations(options: ConnectOptions, table: JobTable, days: float) -> RunDurations:
    """Read the recorded runs of ``table`` over the last ``days`` (database clock)."""
    conn = connect(options)
    try:
        row = conn.execute(
            statement_for(table, "run_durations"),
            {"jobs_table": table.qualified, "seconds": days * 86400.0},
        ).fetchone()
    except psycopg.Error as exc:
        raise translate(exc, Redactor(options.dsn)) from None
    finally:
        conn.close()
    runs, p95 = row if row is not None else (0, None)
    return RunDurations(int(runs), None if p95 is None else float(p95), days)


def record_run(conn: psycopg.Connection[Any], table: JobTable, counters: Mapping[str, Any]) -> None:
    """Write one run's counters to the run table (``sql/record_run.sql``'s parameters)."""
    conn.execute(statement_for(table, "record_run"), counters)
