"""The hands-on maintenance steps: putting failed jobs back, and archiving on its own.

A failed job has used its attempts, or its handler said it can never succeed;
once the cause is fixed, an operator puts it back (``drain retry``). It returns
to ``queued`` with as many tries as it had (``max_attempts`` raised by that
many; ``attempts``, the fencing token, never goes down), ``run_at = now()`` on
the database clock and ``last_error`` cleared (see ``sql/retry.sql`` for why). Retrying goes in batches, one short transaction each, like archiving,
so a large retry never holds thousands of row locks for long.

``drain archive`` is the archive step of a run, alone: same statement, same
batches, after the same check that the table is one drain may write to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import psycopg

from drain import queue, schema
from drain.errors import SchemaError
from drain.table import JobTable

DEFAULT_BATCH = 10_000
PREVIEW_SAMPLE = 10


@dataclass(frozen=True)
class Filters:
    """Which failed jobs to retry; filters given together must all match."""

    queues: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()
    error_contains: str | None = None

    @property
    def empty(self) -> bool:
        return not self.queues and not self.ids and self.error_contains is None

    def params(self) -> dict[str, Any]:
        return {
            "queues": list(self.queues) or None,
            "ids": list(self.ids) or None,
            "error_contains": self.error_contains,
        }


@dataclass(frozen=True)
class Preview:
    """What a retry would do: how many jobs, the first ids, and how many per queue."""

    jobs: int
    sample: list[int]
    per_queue: dict[str, int]


def preview(conn: psycopg.Connection[Any], table: JobTable, filters: Filters) -> Preview:
    """Count the failed jobs a retry with ``filters`` would put back; change nothing."""
    _require_table(conn, table)
    params = filters.params()
    params["sample"] = PREVIEW_SAMPLE
    row = conn.execute(table.statement("retry_preview"), params).fetchone()
    assert row is not None
    per_queue = json.loads(row[2]) if isinstance(row[2], str) else row[2]
    return Preview(jobs=int(row[0]), sample=list(row[1]), per_queue=dict(per_queue))


def retry(
    conn: psycopg.Connection[Any],
    table: JobTable,
    filters: Filters,
    batch: int = DEFAULT_BATCH,
) -> list[int]:
    """Put the matching failed jobs back to queued, batch by batch; return their ids."""
    schema.inspect(conn, table).check_runnable()
    params = filters.params()
    params["limit"] = batch
    retried: list[int] = []
    while True:
        rows = conn.execute(table.statement("retry"), params).fetchall()
        retried.extend(row[0] for row in rows)
        if len(rows) < batch:
            return sorted(retried)


def archive(
    conn: psycopg.Connection[Any],
    table: JobTable,
    older_than: float,
    batch: int,
    mode: queue.ArchiveMode,
) -> queue.ArchiveOutcome:
    """Archive (or delete) done jobs older than ``older_than`` seconds, as a run would."""
    inspection = schema.inspect(conn, table)
    inspection.check_runnable()
    assert inspection.table_oid is not None
    if mode == "move" and not inspection.archive_exists:
        raise SchemaError(
            f"no archive table {table.schema}.{table.archive_name}: create it with "
            "`drain init`, or use --archive-mode delete"
        )
    return queue.archive(conn, table, inspection.table_oid, older_than, batch, mode)


def _require_table(conn: psycopg.Connection[Any], table: JobTable) -> None:
    if not schema.inspect(conn, table).jobs_exists:
        raise SchemaError(
            f"queue table {table.qualified} does not exist; create it with `drain init`"
        )
