"""One function per statement in ``sql/``: rows in, jobs and outcomes out.

Every function takes an open psycopg connection and a :class:`~drain.core.table.JobTable`.
None of them commits or begins anything: the runner's connection is in autocommit,
so each statement is its own short transaction, and ``enqueue`` runs inside
whatever transaction the caller has open.

Statements that touch claimed jobs check ownership (``status = 'running' AND
attempts = <the claim's attempt>``) and report the jobs they no longer owned.
Batch forms send one statement per batch. The ``send_*`` forms queue a statement
and return a :class:`Pending` result, so the runner can put a batch's completions
and the next claim in one pipeline round trip.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, NamedTuple, TypeVar

import psycopg
from psycopg import errors

from drain.core.errors import DatabaseError, DedupeNotEnabled
from drain.core.jobs import Attempt, ClaimedRow, Job, Owned
from drain.core.redact import storable_error
from drain.core.settings import DEFAULT_BACKOFF_BASE as DEFAULT_BACKOFF_BASE
from drain.core.settings import DEFAULT_BACKOFF_CAP as DEFAULT_BACKOFF_CAP
from drain.core.settings import DEFAULT_LEASE as DEFAULT_LEASE
from drain.core.settings import DEFAULT_MAX_CLAIM_BYTES as DEFAULT_MAX_CLAIM_BYTES
from drain.core.settings import DEFAULT_MAX_PAYLOAD as DEFAULT_MAX_PAYLOAD
from drain.core.settings import ArchiveMode as ArchiveMode
from drain.core.summary import Backlog
from drain.core.table import JobTable
from drain.store import priorities
from drain.store.sqlfiles import statement_for

T = TypeVar("T")
log = logging.getLogger("drain")

DEFAULT_MAX_ATTEMPTS = 5  # the article's column default
# The run's defaults (lease, backoff, payload and claim limits) live in drain.core.settings,
# the bottom layer; they are imported above under the names they always had here.


class Pending(Generic[T]):
    """A statement already sent (maybe inside a pipeline) whose rows are read later."""

    def __init__(self, cursor: psycopg.Cursor[Any], read: Callable[[psycopg.Cursor[Any]], T]):
        self._cursor = cursor
        self._read = read

    def result(self) -> T:
        return self._read(self._cursor)


# The small records below are named tuples, not dataclasses: they are defined on
# every start of a run, where a frozen dataclass costs about 0.45 ms to define
# and a named tuple 0.06 (see BENCHMARKS.md, "The empty run").


class Fenced(NamedTuple):
    """The outcome of an ownership-checked statement: which jobs were still ours.

    ``cancelled`` (from a lease extension only) holds the owned jobs a cancel was
    asked for while they ran. ``failed`` holds jobs whose row the statement
    refused (see :func:`refused_alone`): they were failed alone instead, and are
    in neither ``owned`` nor, for a release, ``lost``.
    """

    owned: frozenset[int]
    lost: tuple[int, ...]
    cancelled: frozenset[int] = frozenset()
    failed: frozenset[int] = frozenset()


@dataclass
class Claim:
    """One claim's rows: jobs to run, rows too broken to run, rows already exhausted."""

    jobs: list[Job] = field(default_factory=list)
    poisoned: list[tuple[Attempt, str]] = field(default_factory=list)
    exhausted: list[int] = field(default_factory=list)
    # jobs that came back from a run that died: the runner runs each alone
    suspects: set[int] = field(default_factory=set)
    payload_bytes: int = 0  # decoded size of the jobs' payloads, to size later claims
    # the queue's cap across runs was reached: an empty claim then says "no place",
    # not "no job"
    capped: bool = False
    # a rated queue's claim (--queue-rate, drain.store.rates): the room its bucket
    # gave (0: an empty claim says "no token", not "no job"), and how long until
    # the bucket holds a claim's worth again (None: tokens are left)
    rate_room: int | None = None
    rate_wait: float | None = None

    def __len__(self) -> int:
        return len(self.jobs) + len(self.poisoned) + len(self.exhausted)


class Failure(NamedTuple):
    """A failed attempt to record: the error text is already redacted and short."""

    job: Owned
    error: str
    permanent: bool = False


class FailOutcome(NamedTuple):
    retried: tuple[int, ...]
    failed: tuple[int, ...]
    lost: tuple[int, ...]


class Snooze(NamedTuple):
    """A handler's request to run the job again at ``at`` or after ``delay`` seconds."""

    job: Owned
    at: datetime | None = None
    delay: float | None = None


class CancelOutcome(NamedTuple):
    """What a cancel did: queued jobs failed at once, running ones marked."""

    cancelled: tuple[int, ...]  # were queued: now failed, never to be claimed
    requested: tuple[int, ...]  # were running: no further attempt, the handler is told


class ReapOutcome(NamedTuple):
    requeued: int
    failed: int


class TableHealth(NamedTuple):
    dead_rows: int
    live_rows: int


class ArchiveOutcome(NamedTuple):
    archived: int
    batches: int
    smallest_batch: int
    health: TableHealth | None
    complete: bool
    # done jobs the archive refused (a NULL the archive table does not allow, say): left
    refused: tuple[int, ...] = ()


def _seconds(value: float | timedelta) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


def _fence(jobs: Sequence[Owned]) -> dict[str, str]:
    return {
        "ids": _int_array(job.id for job in jobs),
        "attempts": _int_array(job.attempt for job in jobs),
    }


def _int_array(values: Iterable[int]) -> str:
    """Integers as one array literal, which the statement casts (``::bigint[]``).

    psycopg adapts a list element by element in Python: 3.4 ms for the two
    arrays of a batch of 1,000, against 0.3 ms for this literal, which only
    ever holds digits and minus signs (``int()`` sees to that). Measured with
    bench/ on PostgreSQL 15: a tenth of the run loop's time for no-op jobs.
    """
    return "{" + ",".join(map(str, map(int, values))) + "}"


def _read_fenced(sent: Sequence[Owned]) -> Callable[[psycopg.Cursor[Any]], Fenced]:
    def read(cursor: psycopg.Cursor[Any]) -> Fenced:
        owned = frozenset(row[0] for row in cursor.fetchall())
        return Fenced(owned, tuple(job.id for job in sent if job.id not in owned))

    return read


# -- a row the statement refuses ---------------------------------------------------


def is_row_refusal(exc: BaseException) -> bool:
    """True for an error one row's values can cause: SQLSTATE class 22 or 23.

    A data exception (an int past 2147483647, a timestamp past year 294276, a
    text too long for a varchar) or a constraint of the table's own (a CHECK, a
    NOT NULL a hand-made archive has): the same statement without that row may
    pass. Any other error is the statement's or the connection's, not a row's.
    """
    return isinstance(exc, psycopg.Error) and (exc.sqlstate or "")[:2] in ("22", "23")


def refusal_reason(what: str, exc: psycopg.Error) -> str:
    """The ``last_error`` of a job failed alone because the table refused its ``what``.

    The server's primary message only: its detail quotes the failing row, payload
    and all.
    """
    primary = " ".join((exc.diag.message_primary or type(exc).__name__).split())
    return storable_error(
        f"the table refused this job's {what} ({primary}); failed alone, so its "
        "batch-mates are recorded"
    )


def fail_alone(conn: psycopg.Connection[Any], table: JobTable, job: Owned, reason: str) -> bool:
    """Fail one owned job for good, by itself; False when the table refuses even that.

    Tried with ``reason`` as ``last_error``, then with an empty one (a
    ``last_error`` narrower than the reason, say).
    """
    for error in (reason, ""):
        try:
            outcome = fail(conn, table, job, error, permanent=True)
        except psycopg.Error as exc:
            if not is_row_refusal(exc):
                raise
            continue
        return bool(outcome.failed)
    return False


def refused_alone(
    conn: psycopg.Connection[Any],
    table: JobTable,
    jobs: Sequence[Owned],
    send: Callable[[Sequence[Owned]], Fenced],
    what: str,
    *,
    lost_when_failed: bool = False,
) -> Fenced:
    """``send(jobs)``, and when the statement refuses a row, the same without that row.

    No row may make a statement fail for its batch-mates (SPEC section 7). The
    jobs are halved until the refused one is alone; it is failed alone (in
    ``failed``), every other job gets the statement. A job the table will not
    even fail stays as it is, to its lease, and counts as lost. The connection
    is in autocommit: each half is its own statement, and a refused one leaves
    nothing behind. ``lost_when_failed`` also puts a failed job in ``lost`` (a
    lease extension: the job is no longer the caller's to finish).
    """
    try:
        return send(jobs)
    except psycopg.Error as exc:
        if not is_row_refusal(exc) or not jobs:
            raise
        if len(jobs) == 1:
            (job,) = jobs
            reason = refusal_reason(what, exc)
            log.warning("job %d: %s", job.id, reason)
            if not fail_alone(conn, table, job, reason):
                return Fenced(frozenset(), (job.id,))
            lost = (job.id,) if lost_when_failed else ()
            return Fenced(frozenset(), lost, failed=frozenset((job.id,)))
    middle = (len(jobs) + 1) // 2
    first = refused_alone(conn, table, jobs[:middle], send, what, lost_when_failed=lost_when_failed)
    second = refused_alone(
        conn, table, jobs[middle:], send, what, lost_when_failed=lost_when_failed
    )
    return Fenced(
        first.owned | second.owned,
        first.lost + second.lost,
        first.cancelled | second.cancelled,
        first.failed | second.failed,
    )


# -- claim -------------------------------------------------------------------------


def send_claim(
    conn: psycopg.Connection[Any],
    table: JobTable,
    queue: str,
    limit: int,
    lease: float | timedelta = DEFAULT_LEASE,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    max_bytes: int = DEFAULT_MAX_CLAIM_BYTES,
    *,
    by_priority: bool = False,
) -> Pending[Claim]:
    """Send the claim; ``by_priority`` (a table with the priority column) sends
    sql/claim_priority.sql, the highest priority first."""
    params = {
        "queue": queue,
        "limit": limit,
        "lease": _seconds(lease),
        "max_payload": max_payload,
        "max_bytes": max_bytes,
    }
    name = "claim_priority" if by_priority else "claim"
    cursor = conn.execute(statement_for(table, name), params)
    return Pending(cursor, lambda cur: _read_claim(cur, queue))


def send_cap_room(
    conn: psycopg.Connection[Any], table: JobTable, queue: str, cap: int
) -> Pending[int]:
    """Start a capped queue's claim: take the queue's claim lock, then leave the room.

    The claim that follows in the same transaction (a pipeline's, before its sync)
    takes no more than the room: ``cap`` less the queue's jobs running in every
    run. The room comes back, so an empty claim can say the cap was reached.
    """
    conn.execute(statement_for(table, "cap_lock"), {"key": f"drain cap {table.qualified} {queue}"})
    cursor = conn.execute(statement_for(table, "cap_room"), {"queue": queue, "cap": cap})
    return Pending(cursor, _read_room)


def _read_room(cursor: psycopg.Cursor[Any]) -> int:
    row = cursor.fetchone()
    return 0 if row is None else int(row[0])


def send_claim_time_limit(
    conn: psycopg.Connection[Any], table: JobTable, limit: float | timedelta
) -> None:
    """Bound the statements that follow in this transaction (a pipeline's claim) to ``limit``.

    The role's own ``statement_timeout`` stays when it is tighter.
    """
    conn.execute(statement_for(table, "claim_time_limit"), {"limit": _seconds(limit)})


def claim(
    conn: psycopg.Connection[Any],
    table: JobTable,
    queue: str,
    limit: int,
    lease: float | timedelta = DEFAULT_LEASE,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    max_bytes: int = DEFAULT_MAX_CLAIM_BYTES,
    *,
    by_priority: bool = False,
) -> Claim:
    """Lease up to ``limit`` ready jobs of ``queue`` to the caller, committed at once.

    The claim stops early once its payloads add up to ``max_bytes`` decoded.
    With ``by_priority`` the highest priority goes first, then the oldest run_at.
    """
    pending = send_claim(
        conn, table, queue, limit, lease, max_payload, max_bytes, by_priority=by_priority
    )
    return pending.result()


def _read_claim(cursor: psycopg.Cursor[Any], queue: str) -> Claim:
    result = Claim()
    for values in cursor.fetchall():
        row = ClaimedRow(*values)
        if row.exhausted:
            result.exhausted.append(row.id)
            continue
        if row.suspect:
            result.suspects.add(row.id)
        try:
            result.jobs.append(decode(row, queue))
        except PoisonedRow as poison:
            # Without an attempt number no fenced statement can name this
            # attempt: the row keeps its lease, and once the reaper puts it back
            # the claim fails it for its NULL attempts (sql/claim.sql).
            if row.attempt is not None:
                reason = storable_error(str(poison))
                result.poisoned.append((Attempt(row.id, row.attempt), reason))
        else:
            result.payload_bytes += row.payload_size or 0
    return result


class PoisonedRow(Exception):
    """A claimed row that cannot be turned into a job; it fails alone."""


def decode(row: ClaimedRow, queue: str) -> Job:
    """Turn one claimed row into a :class:`Job`, or raise :class:`PoisonedRow`.

    Any NULL is a poisoned row with a reason a user can act on: a table made by
    hand may lack the article's NOT NULL (``drain init`` reports it).
    """
    if row.payload_text is None:
        if row.payload_size is None:
            raise PoisonedRow("payload is NULL")
        raise PoisonedRow(f"payload too large to claim ({row.payload_size} bytes)")
    if row.attempt is None:
        raise PoisonedRow("attempts is NULL")
    if row.max_attempts is None:
        raise PoisonedRow("max_attempts is NULL")
    if row.created_at is None or row.run_at is None:
        raise PoisonedRow("created_at or run_at is NULL or not a finite timestamp")
    try:
        payload = json.loads(row.payload_text)
    except RecursionError:
        raise PoisonedRow("payload is nested too deeply to decode") from None
    except ValueError as exc:
        raise PoisonedRow(f"payload cannot be decoded: {exc}") from None
    return Job(row.id, queue, payload, row.attempt, row.max_attempts, row.created_at, row.run_at)


# -- fenced updates ------------------------------------------------------------------


def send_complete(
    conn: psycopg.Connection[Any], table: JobTable, jobs: Sequence[Owned]
) -> Pending[Fenced]:
    cursor = conn.execute(statement_for(table, "complete"), _fence(jobs))
    return Pending(cursor, _read_fenced(jobs))


def complete(conn: psycopg.Connection[Any], table: JobTable, jobs: Sequence[Owned]) -> Fenced:
    """Mark jobs done where they are still ours; the rest come back in ``lost``."""
    return send_complete(conn, table, jobs).result()


def send_fail(
    conn: psycopg.Connection[Any],
    table: JobTable,
    failures: Sequence[Failure],
    base: float = DEFAULT_BACKOFF_BASE,
    cap: float = DEFAULT_BACKOFF_CAP,
) -> Pending[FailOutcome]:
    params: dict[str, Any] = _fence([f.job for f in failures])
    params["errors"] = [f.error for f in failures]
    params["permanent"] = [f.permanent for f in failures]
    params["base"] = _seconds(base)
    params["cap"] = _seconds(cap)
    cursor = conn.execute(statement_for(table, "fail"), params)

    def read(cur: psycopg.Cursor[Any]) -> FailOutcome:
        rows = cur.fetchall()
        retried = tuple(job_id for job_id, status in rows if status == "queued")
        failed = tuple(job_id for job_id, status in rows if status == "failed")
        seen = {job_id for job_id, _ in rows}
        lost = tuple(f.job.id for f in failures if f.job.id not in seen)
        return FailOutcome(retried, failed, lost)

    return Pending(cursor, read)


def fail(
    conn: psycopg.Connection[Any],
    table: JobTable,
    job: Owned,
    error: str,
    *,
    permanent: bool = False,
    base: float = DEFAULT_BACKOFF_BASE,
    cap: float = DEFAULT_BACKOFF_CAP,
) -> FailOutcome:
    """Record one failed attempt: back to queued with backoff, or failed for good."""
    return send_fail(conn, table, [Failure(job, error, permanent)], base, cap).result()


def fail_many(
    conn: psycopg.Connection[Any],
    table: JobTable,
    failures: Sequence[Failure],
    base: float = DEFAULT_BACKOFF_BASE,
    cap: float = DEFAULT_BACKOFF_CAP,
) -> FailOutcome:
    return send_fail(conn, table, failures, base, cap).result()


def send_snooze(
    conn: psycopg.Connection[Any], table: JobTable, snoozes: Sequence[Snooze]
) -> Pending[Fenced]:
    params: dict[str, Any] = _fence([s.job for s in snoozes])
    params["run_ats"] = [s.at for s in snoozes]
    params["delays"] = [_seconds(s.delay or 0.0) for s in snoozes]
    cursor = conn.execute(statement_for(table, "snooze"), params)
    return Pending(cursor, _read_fenced([s.job for s in snoozes]))


def snooze(conn: psycopg.Connection[Any], table: JobTable, snoozes: Sequence[Snooze]) -> Fenced:
    """Put jobs back to run later without using up a retry."""
    return send_snooze(conn, table, snoozes).result()


def extend(
    conn: psycopg.Connection[Any],
    table: JobTable,
    jobs: Sequence[Owned],
    lease: float | timedelta = DEFAULT_LEASE,
) -> Fenced:
    """Push the lease of working jobs to now() + lease; a lease of 0 cuts it short.

    A job whose row the statement refuses is failed alone and counts as lost:
    its handler's result can no longer be recorded.
    """

    def send(some: Sequence[Owned]) -> Fenced:
        params: dict[str, Any] = _fence(some)
        params["lease"] = _seconds(lease)
        rows = conn.execute(statement_for(table, "extend"), params).fetchall()
        owned = frozenset(row[0] for row in rows)
        lost = tuple(job.id for job in some if job.id not in owned)
        return Fenced(owned, lost, frozenset(row[0] for row in rows if row[1]))

    return refused_alone(conn, table, jobs, send, "lease extension", lost_when_failed=True)


def cancel(
    conn: psycopg.Connection[Any],
    ids: Sequence[int] = (),
    *,
    queue: str | None = None,
    older_than: float | timedelta = 0.0,
    table: JobTable | None = None,
) -> CancelOutcome:
    """Cancel jobs by id, or the jobs of ``queue`` created at least ``older_than`` ago.

    In the caller's transaction (nothing is committed here). A queued job fails
    at once with ``last_error`` 'cancelled'; a running job gets no further
    attempt and its handler sees ``job.cancel_requested`` at the run's next lease
    renewal, while the attempt's own outcome is still recorded. Done and failed
    jobs are left alone (and are in neither list).
    """
    target = table or JobTable()
    if queue is None:
        params: dict[str, Any] = {"ids": list(ids)}
        cursor = conn.execute(statement_for(target, "cancel_ids"), params)
    else:
        params = {"queue": queue, "older_than": _seconds(older_than)}
        cursor = conn.execute(statement_for(target, "cancel_queue"), params)
    rows = cursor.fetchall()
    return CancelOutcome(
        cancelled=tuple(sorted(row[0] for row in rows if row[1] == "failed")),
        requested=tuple(sorted(row[0] for row in rows if row[1] == "running")),
    )


def release(
    conn: psycopg.Connection[Any],
    table: JobTable,
    jobs: Sequence[Owned],
    keep_marked: Collection[int] = (),
) -> Fenced:
    """Give back claimed-but-unstarted jobs, with their attempt, claimable at once.

    Jobs whose ids are in ``keep_marked`` keep the reaper's mark, so whoever
    claims them next still runs them alone. A job whose row the statement
    refuses is failed alone (in ``failed``); the others are released.
    """

    def send(some: Sequence[Owned]) -> Fenced:
        params: dict[str, Any] = _fence(some)
        params["keep_marks"] = [job.id in keep_marked for job in some]
        cursor = conn.execute(statement_for(table, "release"), params)
        return _read_fenced(some)(cursor)

    return refused_alone(conn, table, jobs, send, "release")


def confirm_outcomes(
    conn: psycopg.Connection[Any], table: JobTable, jobs: Sequence[Owned]
) -> dict[int, str]:
    """For attempts a repeated statement found gone: the status each one finished in.

    Only attempts that finished under this fence appear (see
    ``sql/confirm_outcomes.sql``); an attempt missing from the answer was lost.
    """
    rows = conn.execute(statement_for(table, "confirm_outcomes"), _fence(jobs)).fetchall()
    return {job_id: status for job_id, status in rows}


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
    params = {"ids": None if ids is None else _int_array(ids)}
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
    params: dict[str, Any] = {
        "older_than": _seconds(older_than),
        "limit": batch,
        "table_oid": oid,
        "ids": None,
        "skip": "{}",
    }
    archived = batches = 0
    smallest = batch
    health: TableHealth | None = None
    refused: list[int] = []
    while True:
        try:
            row = conn.execute(statement, params).fetchone()
        except errors.QueryCanceled:
            if params["limit"] == 1:
                return ArchiveOutcome(archived, batches, smallest, health, False, tuple(refused))
            params["limit"] = max(1, params["limit"] // 2)
            smallest = min(smallest, params["limit"])
            continue
        except psycopg.Error as exc:
            if not is_row_refusal(exc):
                raise
            moved, found = _archive_apart(conn, table, statement, params, exc)
            archived += moved
            refused += found
            params["skip"] = _int_array(refused)
            continue
        assert row is not None
        batches += 1
        archived += row[0]
        health = TableHealth(dead_rows=row[1], live_rows=row[2])
        if row[0] < params["limit"]:
            return ArchiveOutcome(archived, batches, smallest, health, True, tuple(refused))
        if not keep_going():
            return ArchiveOutcome(archived, batches, smallest, health, False, tuple(refused))


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
            row = conn.execute(statement, {**params, "ids": _int_array(ids)}).fetchone()
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
# per call, which was a fifth of bulk enqueue's time.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def payload_text(payload: Any) -> str:
    """The payload as the JSON text sent; refused (``ValueError``) when jsonb cannot hold it."""
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload is not JSON-serialisable: {exc}") from None
    reason = unstorable(payload, text)
    if reason is not None:
        raise ValueError(f"payload {reason}")
    return text


# A JSON escape that may stand for what jsonb refuses: NUL, or half of a surrogate pair.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(payload: Any, text: str) -> str | None:
    """Why jsonb would refuse ``payload`` (whose JSON is ``text``), or None.

    PostgreSQL's jsonb cannot hold a NUL character (``\\u0000``) nor a lone
    surrogate, and its refusal is a multi-part error that quotes the whole
    payload back. Checked before anything is sent; the value is walked only
    when its text holds such an escape (an emoji's surrogate pair is one, and
    passes).
    """
    if _SUSPECT_ESCAPE.search(text) is None:
        return None
    stack = [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, str):
            if "\x00" in value:
                return (
                    "holds a NUL character (\\u0000), which PostgreSQL's jsonb cannot store; "
                    "remove it, or encode the value (base64, say)"
                )
            if _SURROGATE.search(value):
                return (
                    "holds a lone surrogate (half of a UTF-16 pair), which PostgreSQL's "
                    "jsonb cannot store"
                )
    return None


class Enqueued(int):
    """The id :func:`enqueue` answers with: an ``int``, and whether the job is new.

    It is the job's id, so code that stores, compares or prints what ``enqueue``
    returned keeps working. With a dedupe key, ``duplicate`` is True when a job of
    the same queue with the same key was already queued or running: nothing was
    inserted, and the id is that job's, the one that will do the work. Without a
    key every job is new.
    """

    duplicate: bool

    def __new__(cls, job_id: int, duplicate: bool = False) -> Enqueued:
        value = super().__new__(cls, job_id)
        value.duplicate = duplicate
        return value

    @property
    def id(self) -> int:
        return int(self)

    @property
    def new(self) -> bool:
        """True when this call inserted the job (the opposite of ``duplicate``)."""
        return not self.duplicate


# How many keyed jobs go in one statement of enqueue_many: each batch is two JSON
# arrays held whole in memory on both sides, and 10,000 rows keep that to a few
# megabytes while the round trips stay a small share of the time.
KEYED_BATCH = 10_000

# How often enqueue with a key runs its statement again when it neither inserted
# nor saw the job holding the key (see sql/enqueue_key.sql); each try has a new
# snapshot, and only a holder that keeps being replaced by new ones within
# milliseconds could use them all up.
_KEY_TRIES = 10


def _check_key(key: str | None) -> None:
    if key is None:
        return
    if not isinstance(key, str):
        raise TypeError(f"a dedupe key is a str, not {type(key).__name__}")
    if not key.strip():
        raise ValueError("a dedupe key is empty; give None for a job without one")


def _dedupe_missing(exc: psycopg.Error, table: JobTable) -> DedupeNotEnabled | None:
    """The error to raise when ``exc`` says the table has no dedupe keys, else None.

    Either the column is missing (undefined column ``dedupe_key``) or it exists
    without the unique index ON CONFLICT needs (invalid column reference).
    """
    primary = exc.diag.message_primary or ""
    missing = isinstance(exc, errors.UndefinedColumn) and "dedupe_key" in primary
    if not missing and not isinstance(exc, errors.InvalidColumnReference):
        return None
    return DedupeNotEnabled(
        f"queue table {table.qualified} has no dedupe keys (the dedupe_key column and its "
        "unique index); add them with `drain init --with dedupe`"
    )


def enqueue_params(
    payload: Any,
    *,
    queue: str,
    run_at: datetime | None,
    delay: float | timedelta | None,
    max_attempts: int,
    key: str | None,
    priority: int | None = None,
) -> dict[str, Any]:
    """The checked parameters of sql/enqueue.sql (sql/enqueue_key.sql with ``key``).

    Shared by :func:`enqueue` and :func:`drain.store.aio.enqueue_async`, so both refuse
    the same arguments with the same errors before anything is sent.
    """
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    _check_key(key)
    priorities.check(priority)
    params: dict[str, Any] = {
        "queue": queue,
        "payload": payload_text(payload),
        "run_at": run_at,
        "delay": _seconds(delay or 0.0),
        "max_attempts": max_attempts,
    }
    if key is not None:
        params["key"] = key
    return priorities.with_priority(params, priority)


def keyed_answer(row: tuple[Any, ...] | None) -> Enqueued | None:
    """What one run of sql/enqueue_key.sql answered, or None to run it again."""
    return None if row is None else Enqueued(row[0], bool(row[1]))


def key_unsettled(key: str, queue: str) -> DatabaseError:
    """The error once every try of sql/enqueue_key.sql came back without a row."""
    return DatabaseError(
        f"enqueue with key {key!r} on {queue} neither inserted a job nor found the one "
        f"holding the key after {_KEY_TRIES} tries (jobs with that key keep finishing "
        "and being enqueued again)"
    )


def _require_psycopg(conn: object) -> None:
    """A psycopg2 or asyncpg connection is one clear error naming what to use."""
    if not isinstance(conn, psycopg.Connection):
        from drain.store.driver import sync_connection

        sync_connection(conn)


def enqueue(
    conn: psycopg.Connection[Any],
    payload: Any,
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    key: str | None = None,
    priority: int | None = None,
) -> Enqueued:
    """Insert one job in the caller's current transaction and return its id.

    drain never commits here: the job becomes visible when the caller's own
    transaction commits, together with the data it belongs to (or not at all).

    With ``key``, the job is a duplicate while a job of the same queue with the
    same key is queued or running ("reindex user 42" enqueued after every edit
    runs once per run, not once per edit): nothing is inserted, and the answer is
    that job's id with ``duplicate`` True. Once that job is done or failed the key
    is free again; a transaction that rolls back frees the key it took. The
    duplicate keeps its own payload and run time: the first enqueue wins.

    The table needs ``drain init --with dedupe``; without it a key raises
    :class:`~drain.core.errors.DedupeNotEnabled` (and, as with any failed statement,
    the caller's transaction must be rolled back). Nothing is altered implicitly.

    ``priority`` (higher runs first; None leaves the column's default, 0) needs
    the priority column, or raises :class:`~drain.core.errors.PriorityNotEnabled`.
    """
    _require_psycopg(conn)
    params = enqueue_params(
        payload,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        key=key,
        priority=priority,
    )
    target = table or JobTable()
    if key is None:
        with priorities.refused_without_column(target):
            named = priorities.statement("enqueue", priority)
            row = conn.execute(statement_for(target, named), params).fetchone()
        assert row is not None
        return Enqueued(row[0])
    statement = statement_for(target, priorities.statement("enqueue_key", priority))
    for _ in range(_KEY_TRIES):
        try:
            with priorities.refused_without_column(target):
                answer = keyed_answer(conn.execute(statement, params).fetchone())
        except psycopg.Error as exc:
            missing = _dedupe_missing(exc, target)
            if missing is None:
                raise
            raise missing from exc
        if answer is not None:
            return answer
    raise key_unsettled(key, queue)


def check_many(
    payloads: Iterable[Any],
    run_at: datetime | None,
    delay: float | timedelta | None,
    keys: Iterable[str | None] | None,
) -> dict[str, Any]:
    """Refuse what :func:`enqueue_many` cannot do; the parameters of sql/database_time.sql.

    Shared with :func:`drain.store.aio.enqueue_many_async`: the same checks, in the same
    order, before anything is sent.
    """
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    if keys is not None:
        _check_lengths(payloads, keys)
    return {"run_at": run_at, "delay": _seconds(delay or 0.0)}


def payload_texts(payloads: Iterable[Any]) -> list[str]:
    """Every payload's JSON, before the COPY starts: one that cannot be stored stops the
    call before anything is sent (mid-COPY it would abort the caller's transaction)."""
    return [payload_text(payload) for payload in payloads]


def copy_row(
    queue: str, text: str, when: datetime, max_attempts: int, priority: int | None = None
) -> tuple[Any, ...]:
    """One row of sql/enqueue_copy.sql (``_priority`` with a priority), in its column
    order (``text``: the payload's JSON)."""
    row = (queue, text, when, max_attempts)
    return row if priority is None else (*row, priority)


def enqueue_many(
    conn: psycopg.Connection[Any],
    payloads: Iterable[Any],
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    keys: Iterable[str | None] | None = None,
    priority: int | None = None,
) -> int:
    """Insert many jobs in the caller's transaction; returns how many are new.

    Without ``keys`` every job is new and they go in one ``COPY``. With ``keys``
    (one per payload, in the same order; None for a job without a key) a job
    whose key is held by a queued or running job of the queue, or by an earlier
    job of the same call, is skipped, as :func:`enqueue` would, and the count
    says how many were inserted. COPY cannot skip a conflict, so keyed jobs go
    as ``INSERT ... ON CONFLICT DO NOTHING`` in batches of :data:`KEYED_BATCH`
    (sql/enqueue_keys.sql), sorted by key so that two bulk enqueues of the same
    keys never deadlock (new ids follow the keys' order, not the payloads').
    The whole call is held in memory. A table without dedupe keys raises
    :class:`~drain.core.errors.DedupeNotEnabled`. ``priority`` is every job's (see
    :func:`enqueue`).
    """
    _require_psycopg(conn)
    when_params = check_many(payloads, run_at, delay, keys)
    priorities.check(priority)
    target = table or JobTable()
    texts = None if keys is not None else payload_texts(payloads)
    when = conn.execute(statement_for(target, "database_time"), when_params).fetchone()
    assert when is not None
    if texts is None:
        assert keys is not None
        return _enqueue_keyed(conn, target, payloads, keys, queue, when[0], max_attempts, priority)
    named = priorities.statement("enqueue_copy", priority)
    with (
        priorities.refused_without_column(target),
        conn.cursor() as cursor,
        cursor.copy(statement_for(target, named)) as copy,
    ):
        for text in texts:
            copy.write_row(copy_row(queue, text, when[0], max_attempts, priority))
    return len(texts)


def _check_lengths(payloads: Iterable[Any], keys: Iterable[str | None]) -> None:
    """Refuse keys that do not pair with the payloads before anything is sent."""
    if isinstance(keys, str):
        raise TypeError("keys is one str; give a sequence of keys, one per payload")
    if not (isinstance(payloads, Collection) and isinstance(keys, Collection)):
        return  # a generator's length shows when it runs out (zip's strict check)
    if len(payloads) != len(keys):
        raise ValueError(f"{len(payloads)} payloads but {len(keys)} keys; give one key each")


def keyed_batches(
    payloads: Iterable[Any],
    keys: Iterable[str | None],
    queue: str,
    when: datetime,
    max_attempts: int,
    priority: int | None = None,
) -> Iterator[dict[str, Any]]:
    """The parameters of each sql/enqueue_keys.sql batch, the jobs in key order.

    Key order, not the caller's: a key held by another transaction that has not
    committed makes this one wait for it, and two bulk enqueues of the same keys
    in different orders would each wait for the other (a deadlock, one of them
    cancelled). In one order, the one that waits holds only keys the other has
    already passed. The sort is stable, so of two jobs with one key the first
    given is the one inserted; new ids follow the keys' order. Every payload is
    encoded and every key checked before the first batch is yielded, and each
    batch's text is built only when it is asked for.
    """
    rows = []
    try:
        for payload, key in zip(payloads, keys, strict=True):
            _check_key(key)
            rows.append((key, payload_text(payload)))
    except ValueError as exc:
        if not str(exc).startswith("zip()"):
            raise
        raise ValueError(f"payloads and keys differ in length ({exc}); give one key each") from None
    rows.sort(key=lambda row: (row[0] is not None, row[0] or ""))
    for start in range(0, len(rows), KEYED_BATCH):
        batch = rows[start : start + KEYED_BATCH]
        params = {
            "queue": queue,
            "run_at": when,
            "max_attempts": max_attempts,
            "payloads": "[" + ",".join(text for _, text in batch) + "]",
            "keys": _ENCODER.encode([key for key, _ in batch]),
        }
        yield priorities.with_priority(params, priority)


def _enqueue_keyed(
    conn: psycopg.Connection[Any],
    table: JobTable,
    payloads: Iterable[Any],
    keys: Iterable[str | None],
    queue: str,
    when: datetime,
    max_attempts: int,
    priority: int | None = None,
) -> int:
    """Insert keyed jobs in key order, batch by batch; returns how many were new."""
    statement = statement_for(table, priorities.statement("enqueue_keys", priority))
    new = 0
    for params in keyed_batches(payloads, keys, queue, when, max_attempts, priority):
        try:
            with priorities.refused_without_column(table):
                cursor = conn.execute(statement, params)
        except psycopg.Error as exc:
            missing = _dedupe_missing(exc, table)
            if missing is None:
                raise
            raise missing from exc
        new += max(cursor.rowcount, 0)
    return new
