"""The run's ownership-checked statements: complete, fail, snooze, extend, release.

Every statement here checks ownership (``status = 'running' AND attempts = <the
claim's attempt>``) and reports the jobs the run no longer owned. None of them
commits or begins anything: the runner's connection is in autocommit, so each
statement is its own short transaction. The ``send_*`` forms queue a statement
and return a :class:`~drain.store.params.Pending` result. A row the table refuses
never fails its batch-mates (:func:`refused_alone`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg

from drain.core.jobs import Owned
from drain.core.redact import storable_error
from drain.core.settings import (
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_CAP,
    DEFAULT_LEASE,
)
from drain.core.table import JobTable
from drain.store.params import Pending, int_array, seconds
from drain.store.sqlfiles import statement_for

log = logging.getLogger("drain")


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


def _fence(jobs: Sequence[Owned]) -> dict[str, str]:
    return {
        "ids": int_array(job.id for job in jobs),
        "attempts": int_array(job.attempt for job in jobs),
    }


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
            outcome = send_fail(conn, table, [Failure(job, error, True)]).result()
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

# -- fenced updates ------------------------------------------------------------------


def send_complete(
    conn: psycopg.Connection[Any], table: JobTable, jobs: Sequence[Owned]
) -> Pending[Fenced]:
    cursor = conn.execute(statement_for(table, "complete"), _fence(jobs))
    return Pending(cursor, _read_fenced(jobs))


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
    params["base"] = seconds(base)
    params["cap"] = seconds(cap)
    cursor = conn.execute(statement_for(table, "fail"), params)

    def read(cur: psycopg.Cursor[Any]) -> FailOutcome:
        rows = cur.fetchall()
        retried = tuple(job_id for job_id, status in rows if status == "queued")
        failed = tuple(job_id for job_id, status in rows if status == "failed")
        seen = {job_id for job_id, _ in rows}
        lost = tuple(f.job.id for f in failures if f.job.id not in seen)
        return FailOutcome(retried, failed, lost)

    return Pending(cursor, read)


def send_snooze(
    conn: psycopg.Connection[Any], table: JobTable, snoozes: Sequence[Snooze]
) -> Pending[Fenced]:
    params: dict[str, Any] = _fence([s.job for s in snoozes])
    params["run_ats"] = [s.at for s in snoozes]
    params["delays"] = [seconds(s.delay or 0.0) for s in snoozes]
    cursor = conn.execute(statement_for(table, "snooze"), params)
    return Pending(cursor, _read_fenced([s.job for s in snoozes]))


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
        params["lease"] = seconds(lease)
        rows = conn.execute(statement_for(table, "extend"), params).fetchall()
        owned = frozenset(row[0] for row in rows)
        lost = tuple(job.id for job in some if job.id not in owned)
        return Fenced(owned, lost, frozenset(row[0] for row in rows if row[1]))

    return refused_alone(conn, table, jobs, send, "lease extension", lost_when_failed=True)


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
