"""Looking at jobs one by one: the newest jobs of a queue or a status, and one job whole.

``drain status`` counts; this is for the question after it ("which jobs failed,
and why?"). Every statement reaches the rows through an index the queue table
already has, so a listing stays fast on a table with a long history: the ready
index for queued jobs, the running index for running ones, and a backward walk
of the primary key (newest first, stopping after ``limit`` matches) for the rest
(see ``sql/jobs_list.sql``). Nothing here writes.

Everything a job carries that a person will read is redacted the way drain
redacts its own error texts (:func:`drain.core.redact.redact`): a handler's error or
a payload may quote a connection string, password and all.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import psycopg

from drain.core.errors import DrainError, SchemaError
from drain.core.redact import MAX_ERROR_LENGTH, redact
from drain.core.settings.defaults import DEFAULT_JOBS_LIMIT as DEFAULT_LIMIT
from drain.core.settings.defaults import JOB_STATUSES
from drain.core.table import JobTable
from drain.store import schema
from drain.store.sqlfiles import statement_for

MAX_LIMIT = 10_000
# The error of a listing: one line, this long at most (the table cuts it shorter).
SHORT_ERROR = 200


class JobNotFound(DrainError):
    """No job with that id in the queue table (exit 1, as for a schedule that is not there)."""


# The epochs of 0001-01-01 and 10000-01-01 (UTC): the years Python's datetime spans.
FIRST_EPOCH, PAST_LAST_EPOCH = -62_135_596_800, 253_402_300_800


@dataclass(frozen=True)
class Moment:
    """A timestamp as the table holds it: a time, or in a hand-made row +/- infinity
    or a year Python cannot show (PostgreSQL goes from 4713 BC to 294276 AD)."""

    epoch: float

    @property
    def finite(self) -> bool:
        return FIRST_EPOCH <= self.epoch < PAST_LAST_EPOCH

    def iso(self) -> str:
        if not self.finite:
            if math.isinf(self.epoch):
                return "infinity" if self.epoch > 0 else "-infinity"
            return "after the year 9999" if self.epoch > 0 else "before the year 1"
        return datetime.fromtimestamp(self.epoch, UTC).isoformat()

    def text(self) -> str:
        """``2026-12-01 12:40:17`` (UTC), as a table column shows it."""
        if not self.finite:
            return self.iso()
        return datetime.fromtimestamp(self.epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class JobRow:
    """One job as a listing shows it: no payload, the error redacted and cut short."""

    id: int
    queue: str
    status: str
    attempts: int
    max_attempts: int
    run_at: Moment
    created_at: Moment
    locked_until: Moment | None
    last_error: str | None
    # Only on a table with the priority column (higher runs first); None elsewhere.
    priority: int | None = None

    def as_dict(self) -> dict[str, Any]:
        shown = {} if self.priority is None else {"priority": self.priority}
        return shown | {
            "id": self.id,
            "queue": self.queue,
            "status": self.status,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "run_at": self.run_at.iso(),
            "created_at": self.created_at.iso(),
            "locked_until": self.locked_until.iso() if self.locked_until else None,
            "last_error": self.last_error,
        }


@dataclass(frozen=True)
class JobDetail:
    """One job whole: its payload (redacted), every counter and time, its whole error."""

    row: JobRow
    payload: Any
    database_time: Moment

    def as_dict(self) -> dict[str, Any]:
        return {**self.row.as_dict(), "payload": self.payload}


def one_line(text: str | None, length: int | None = None) -> str | None:
    """``text`` redacted, on one line, cut to ``length`` (after redacting, so no
    password is split where the patterns could no longer see it)."""
    if text is None:
        return None
    cleaned = redact(" ".join(text.split()))
    if length is not None and len(cleaned) > length:
        return cleaned[: length - 3] + "..."
    return cleaned


def redacted(value: Any) -> Any:
    """A JSON value with every string in it (keys too) redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redacted(item) for item in value]
    if isinstance(value, dict):
        return {redact(str(key)): redacted(item) for key, item in value.items()}
    return value


def jobs(
    conn: psycopg.Connection[Any],
    table: JobTable,
    *,
    queue: str | None = None,
    status: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[JobRow]:
    """The newest ``limit`` jobs (highest id first) matching ``queue`` and ``status``."""
    if status is not None and status not in JOB_STATUSES:
        raise ValueError(f"status must be one of {', '.join(JOB_STATUSES)}")
    inspection = _require_table(conn, table)
    name, params = listing_statement(queue=queue, status=status, limit=limit)
    # Parameters are bound on the server, and a one-off statement is planned
    # with their values, so the optional filters fold away before planning.
    rows = conn.execute(statement_for(table, name), params, prepare=False).fetchall()
    found = [_row(row, SHORT_ERROR) for row in rows]
    return _with_priorities(conn, table, found) if inspection.has_priority else found


def _with_priorities(
    conn: psycopg.Connection[Any], table: JobTable, found: list[JobRow]
) -> list[JobRow]:
    """The rows with their priorities, read apart (sql/job_priorities.sql)."""
    if not found:
        return found
    ids = [row.id for row in found]
    rows = conn.execute(statement_for(table, "job_priorities"), {"ids": ids}).fetchall()
    by_id = {int(job_id): int(priority) for job_id, priority in rows}
    return [replace(row, priority=by_id.get(row.id)) for row in found]


def listing_statement(
    *, queue: str | None, status: str | None, limit: int
) -> tuple[str, dict[str, Any]]:
    """The statement a listing sends and its parameters (the benchmark explains them).

    Queued and running jobs have statements of their own, with the status
    written out, so their partial indexes match under any plan.
    """
    name = {"queued": "jobs_list_queued", "running": "jobs_list_running"}.get(
        status or "", "jobs_list"
    )
    params = {"status": status, "queue": queue, "limit": limit, "error_length": MAX_ERROR_LENGTH}
    return name, params


def job(conn: psycopg.Connection[Any], table: JobTable, job_id: int) -> JobDetail:
    """The job with this id, whole; :class:`JobNotFound` if there is none."""
    inspection = _require_table(conn, table)
    row = conn.execute(statement_for(table, "job_show"), {"id": job_id}).fetchone()
    if row is None:
        raise JobNotFound(f"no job with id {job_id} in {table.qualified}")
    payload = redacted(json.loads(row[9]))
    shown = [_row(row[:9], None)]
    if inspection.has_priority:
        shown = _with_priorities(conn, table, shown)
    return JobDetail(row=shown[0], payload=payload, database_time=Moment(row[10]))


def _row(row: Any, error_length: int | None) -> JobRow:
    return JobRow(
        id=int(row[0]),
        queue=str(row[1]),
        status=str(row[2]),
        attempts=int(row[3]),
        max_attempts=int(row[4]),
        run_at=Moment(float(row[5])),
        created_at=Moment(float(row[6])),
        locked_until=None if row[7] is None else Moment(float(row[7])),
        last_error=one_line(row[8], error_length) if error_length else _whole(row[8]),
    )


def _whole(text: str | None) -> str | None:
    return None if text is None else redact(text)


def _require_table(conn: psycopg.Connection[Any], table: JobTable) -> schema.Inspection:
    inspection = schema.inspect(conn, table)
    if not inspection.jobs_exists:
        raise SchemaError(
            f"queue table {table.qualified} does not exist; create it with `drain init`"
        )
    return inspection
