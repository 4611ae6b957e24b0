"""Whole-table statements of a run: reap expired leases, measure the backlog, archive.

Each is its own short transaction on the runner's autocommit connection. A row
the table refuses is set apart (failed alone by the reap, left in place by the
archive) so the rest of the table is still handled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg import errors

from drain.core.jobs import Attempt, Owned
from drain.core.settings import (
    ArchiveMode,
)
from drain.core.summary import Backlog
from drain.core.table import JobTable
from drain.store.fencing import fail_alone, is_row_refusal, refusal_reason
from drain.store.params import Pending, int_array, seconds
from drain.store.sqlfiles import statement_for

log = logging.getLogger("drain")


class ReapOutcome(NamedTuple):
    requeued: int
    failed: int


class TableHealth(NamedTuple):
    dead_rows: int
    live_rows: int


class ArchiveOutcome(NamedTuple):
    archived: int
    batches: int
    health: TableHealth | None
    complete: bool
    # done jobs the archive refused (a NULL the archive table does not allow, say): left
    refused: tuple[int, ...] = ()


# -- whole-table statements ------------------------------------------------------------


def reap(conn: psycopg.Connection[Any], table: JobTable) -> ReapOutcome:
    """Put running jobs whose lease ran out back to queued (or failed when exhausted).

    When the table refuses one row (see :func:`is_row_refusal`), the expired
    rows are reaped by ids in halves and the refused one is failed alone.
    """
    try:
        return send_reap(conn, table).result()
    except psycopg.Error as exc:
        if not is_row_refusal(exc):
            raise
    return reap_apart(conn, table)


def send_reap(
    conn: psycopg.Connection[Any], table: JobTable, ids: Sequence[int] | None = None
) -> Pending[ReapOutcome]:
    params = {"ids": None if ids is None else int_array(ids)}
    return Pending(conn.execute(statement_for(table, "reap"), params), _read_reap)


def reap_apart(conn: psycopg.Connection[Any], table: JobTable) -> ReapOutcome:
    """The reap, row set by row set: for a table that refused the reap as one statement."""
    expired = [
        Attempt(row[0], row[1]) for row in conn.execute(statement_for(table, "reap_expired"))
    ]
    return _reap_ids(conn, table, expired)


def _reap_ids(conn: psycopg.Connection[Any], table: JobTable, rows: Sequence[Owned]) -> ReapOutcome:
    try:
        return send_reap(conn, table, [row.id for row in rows]).result()
    except psycopg.Error as exc:
        if not is_row_refusal(exc) or not rows:
            raise
        if len(rows) == 1:
            reason = refusal_reason("reap", exc)
            log.warning("job %d: %s", rows[0].id, reason)
            return ReapOutcome(0, int(fail_alone(conn, table, rows[0], reason)))
    middle = (len(rows) + 1) // 2
    first, second = _reap_ids(conn, table, rows[:middle]), _reap_ids(conn, table, rows[middle:])
    return ReapOutcome(first.requeued + second.requeued, first.failed + second.failed)


def _read_reap(cursor: psycopg.Cursor[Any]) -> ReapOutcome:
    row = cursor.fetchone()
    assert row is not None
    return ReapOutcome(requeued=row[0], failed=row[1])


def backlog(
    conn: psycopg.Connection[Any], table: JobTable, queues: Sequence[str]
) -> dict[str, Backlog]:
    """The ready jobs of ``queues`` and the age of the oldest, by queue (none: left out)."""
    rows = conn.execute(statement_for(table, "backlog"), {"queues": list(queues)}).fetchall()
    return {name: Backlog(int(ready), oldest) for name, ready, oldest in rows}


def table_health(conn: psycopg.Connection[Any], table: JobTable, oid: int) -> TableHealth:
    row = conn.execute(statement_for(table, "table_health"), {"table_oid": oid}).fetchone()
    assert row is not None
    return TableHealth(dead_rows=row[0], live_rows=row[1])


def archive(
    conn: psycopg.Connection[Any],
    table: JobTable,
    oid: int,
    older_than: float | timedelta,
    batch: int = 10_000,
    mode: ArchiveMode = "move",
    keep_going: Callable[[], bool] = lambda: True,
) -> ArchiveOutcome:
    """Move (or delete) done jobs older than the retention, one short transaction per batch.

    A batch cancelled by ``statement_timeout`` is retried at half the size, so a
    role with a tight timeout still makes progress. A batch the table refuses
    for one row's values is archived by ids in halves, and the refused row is
    left where it is (``refused``). ``keep_going`` is asked before every batch
    after the first (the runner passes its budget).
    """
    statement = statement_for(table, "archive_move" if mode == "move" else "archive_delete")
    params: dict[str, Any] = {"older_than": seconds(older_than), "limit": batch, "table_oid": oid}
    params.update(ids=None, skip="{}")
    archived = batches = 0
    health: TableHealth | None = None
    refused: list[int] = []
    while True:
        try:
            row = conn.execute(statement, params).fetchone()
        except errors.QueryCanceled:
            if params["limit"] == 1:
                return ArchiveOutcome(archived, batches, health, False, tuple(refused))
            params["limit"] = max(1, params["limit"] // 2)
            continue
        except psycopg.Error as exc:
            if not is_row_refusal(exc):
                raise
            moved, found = _archive_apart(conn, table, statement, params, exc)
            archived += moved
            refused += found
            params["skip"] = int_array(refused)
            continue
        assert row is not None
        batches += 1
        archived += row[0]
        health = TableHealth(dead_rows=row[1], live_rows=row[2])
        if row[0] < params["limit"]:
            return ArchiveOutcome(archived, batches, health, True, tuple(refused))
        if not keep_going():
            return ArchiveOutcome(archived, batches, health, False, tuple(refused))


def _archive_apart(
    conn: psycopg.Connection[Any],
    table: JobTable,
    statement: bytes,
    params: dict[str, Any],
    cause: psycopg.Error,
) -> tuple[int, list[int]]:
    """A refused archive batch, by ids in halves: how many went, which rows were refused.

    Raises ``cause`` when the batch cannot be found again row by row (nothing
    would change, and the archive would ask for ever).
    """
    candidates = [
        row[0]
        for row in conn.execute(statement_for(table, "archive_candidates"), params).fetchall()
    ]

    def apart(ids: list[int]) -> tuple[int, list[int]]:
        try:
            row = conn.execute(statement, {**params, "ids": int_array(ids)}).fetchone()
        except psycopg.Error as exc:
            if not is_row_refusal(exc):
                raise
            if len(ids) == 1:
                reason = " ".join((exc.diag.message_primary or type(exc).__name__).split())
                log.warning("job %d left unarchived: the archive refused it (%s)", ids[0], reason)
                return 0, ids
            middle = (len(ids) + 1) // 2
            first, second = apart(ids[:middle]), apart(ids[middle:])
            return first[0] + second[0], first[1] + second[1]
        assert row is not None
        return int(row[0]), []

    moved, refused = apart(candidates) if candidates else (0, [])
    if not moved and not refused:
        raise cause
    return moved, refused


def ready_left(conn: psycopg.Connection[Any], table: JobTable, queues: Sequence[str]) -> bool:
    row = conn.execute(statement_for(table, "ready_left"), {"queues": list(queues)}).fetchone()
    return bool(row and row[0])


# -- enqueue -----------------------------------------------------------------------


# One encoder for every payload: json.dumps with arguments builds a new encoder


def vacuum(conn: psycopg.Connection[Any], table: JobTable) -> list[str]:
    """VACUUM (ANALYZE) the table; the server's warnings, empty when it vacuumed.

    PostgreSQL skips a table it may not vacuum (not the owner, say) or cannot lock
    with a warning, not an error: the warnings are the reason it skipped.
    """
    warnings: list[str] = []

    def collect(notice: psycopg.errors.Diagnostic) -> None:
        if notice.severity_nonlocalized == "WARNING" and notice.message_primary:
            warnings.append(notice.message_primary)

    conn.add_notice_handler(collect)
    try:
        conn.execute(statement_for(table, "vacuum"))
    finally:
        conn.remove_notice_handler(collect)
    return warnings
