"""The hands-on maintenance steps: putting failed jobs back, and archiving on its own.

A failed job has used its attempts, or its handler said it can never succeed;
once the cause is fixed, an operator puts it back (``drain retry``). It returns
to ``queued`` with as many tries as it had (``max_attempts`` raised by that
many; ``attempts``, the fencing token, never goes down), ``run_at = now()`` on
the database clock and ``last_error`` cleared (see ``sql/retry.sql`` for why). Retrying goes in batches, one short transaction each, like archiving,
so a large retry never holds thousands of row locks for long.

``drain archive`` is the archive step of a run, alone: same statement, same
batches, after the same check that the table is one drain may write to. With
``--failed-after`` it also moves failed jobs whose last attempt was due longer
ago than that (the table keeps no failure time; see
``sql/archive_failed_move.sql``), in batches of the same size.

``drain purge`` empties the archive of rows archived before a retention, in
batches too: the archive otherwise grows for ever.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg import errors

from drain.core.errors import ReadOnlyServer, SchemaError
from drain.core.settings import ArchiveMode
from drain.core.table import JobTable
from drain.store import schema, upkeep
from drain.store.sqlfiles import statement_for

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
    row = conn.execute(statement_for(table, "retry_preview"), params).fetchone()
    assert row is not None
    per_queue = json.loads(row[2]) if isinstance(row[2], str) else row[2]
    return Preview(jobs=int(row[0]), sample=list(row[1]), per_queue=dict(per_queue))


def retry(
    conn: psycopg.Connection[Any],
    table: JobTable,
    filters: Filters,
    batch: int = DEFAULT_BATCH,
) -> list[int]:
    """Put the matching failed jobs back to queued, batch by batch; return their ids.

    On a table with dedupe keys a failed job whose key is queued or running again
    stays failed (see ``sql/retry_keyed.sql``), and of several failed jobs with
    one key only the newest goes back.
    """
    inspection = schema.inspect(conn, table)
    inspection.check_runnable()
    params = filters.params()
    params["limit"] = batch
    retried: list[int] = []
    if "dedupe_key" not in inspection.columns:
        while True:
            rows = conn.execute(statement_for(table, "retry"), params).fetchall()
            retried.extend(row[0] for row in rows)
            if len(rows) < batch:
                return sorted(retried)
    params["after"] = 0
    while True:
        rows = conn.execute(statement_for(table, "retry_keyed"), params).fetchall()
        retried.extend(job_id for job_id, put_back in rows if put_back)
        if len(rows) < batch:
            return sorted(retried)
        params["after"] = rows[-1][0]


class Batched(NamedTuple):
    """What a batched pass did: rows changed, batches sent, and whether it got to the end."""

    rows: int
    batches: int
    complete: bool


class ArchiveReport(NamedTuple):
    """``drain archive``: the done jobs (as a run archives them), then the failed ones."""

    done: upkeep.ArchiveOutcome
    failed: Batched | None


def archive(
    conn: psycopg.Connection[Any],
    table: JobTable,
    older_than: float,
    batch: int,
    mode: ArchiveMode,
    failed_after: float | None = None,
) -> ArchiveReport:
    """Archive (or delete) done jobs older than ``older_than`` seconds, as a run would,
    then, given ``failed_after``, failed jobs last due longer ago than that."""
    inspection = schema.inspect(conn, table)
    inspection.check_runnable()
    assert inspection.table_oid is not None
    if mode == "move" and not inspection.archive_exists:
        raise SchemaError(
            f"no archive table {table.schema}.{table.archive_name}: create it with "
            "`drain init`, or use --archive-mode delete"
        )
    done = upkeep.archive(conn, table, inspection.table_oid, older_than, batch, mode)
    failed = None
    if failed_after is not None:
        name = "archive_failed_move" if mode == "move" else "archive_failed_delete"
        failed = _keyset_batches(
            conn,
            statement_for(table, name),
            {"failed_after": timedelta(seconds=failed_after)},
            batch,
        )
    return ArchiveReport(done, failed)


class PurgePreview(NamedTuple):
    """What a purge would delete: how many archive rows, archived how long ago."""

    rows: int
    oldest_seconds_ago: float | None
    newest_seconds_ago: float | None


def purge_preview(
    conn: psycopg.Connection[Any], table: JobTable, older_than: float
) -> PurgePreview:
    """Count the archive rows a purge with this retention would delete; change nothing."""
    _require_archive(conn, table)
    row = conn.execute(
        statement_for(table, "purge_count"), {"older_than": timedelta(seconds=older_than)}
    ).fetchone()
    assert row is not None
    return PurgePreview(int(row[0]), row[1], row[2])


def purge(
    conn: psycopg.Connection[Any], table: JobTable, older_than: float, batch: int = DEFAULT_BATCH
) -> Batched:
    """Delete the archive rows archived more than ``older_than`` seconds ago, batch by batch."""
    if _require_archive(conn, table).read_only:
        raise ReadOnlyServer(
            "the server is read-only (a standby, or default_transaction_read_only is on); "
            "nothing was changed"
        )
    return _keyset_batches(
        conn, statement_for(table, "purge"), {"older_than": timedelta(seconds=older_than)}, batch
    )


def _keyset_batches(
    conn: psycopg.Connection[Any], statement: bytes, params: dict[str, Any], batch: int
) -> Batched:
    """Send a keyset-batched statement until a batch comes back short.

    Each batch is one short transaction (the connection is in autocommit) that
    returns how many rows it matched, changed, and the last id it reached; the
    next batch starts after that id. A batch cancelled by ``statement_timeout``
    is sent again at half the size, as the archive step does, so a role with a
    tight timeout still gets through; at one row it gives up, incomplete.
    """
    params = {**params, "after_id": 0, "limit": batch}
    changed = batches = 0
    while True:
        try:
            row = conn.execute(statement, params).fetchone()
        except errors.QueryCanceled:
            if params["limit"] == 1:
                return Batched(changed, batches, complete=False)
            params["limit"] = max(1, params["limit"] // 2)
            continue
        assert row is not None
        matched, done, last_id = int(row[0]), int(row[1]), row[2]
        batches += 1
        changed += done
        if matched < params["limit"] or last_id is None:
            return Batched(changed, batches, complete=True)
        params["after_id"] = int(last_id)


def _require_archive(conn: psycopg.Connection[Any], table: JobTable) -> schema.Inspection:
    inspection = schema.inspect(conn, table)
    if not inspection.archive_exists:
        raise SchemaError(
            f"no archive table {table.schema}.{table.archive_name}: nothing to purge "
            "(`drain init` creates it)"
        )
    return inspection


def _require_table(conn: psycopg.Connection[Any], table: JobTable) -> None:
    if not schema.inspect(conn, table).jobs_exists:
        raise SchemaError(
            f"queue table {table.qualified} does not exist; create it with `drain init`"
        )
