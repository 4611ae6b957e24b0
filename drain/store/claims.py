"""The claim: lease ready jobs to the run, and turn their rows into jobs.

A capped queue's claim starts with :func:`send_cap_room` in the same pipeline;
:func:`send_claim_time_limit` bounds the claim that follows. A row that cannot
become a job is poisoned (:func:`decode`) and failed alone by the runner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from drain.core.jobs import Attempt, ClaimedRow, Job
from drain.core.redact import storable_error
from drain.core.settings import (
    DEFAULT_LEASE,
    DEFAULT_MAX_CLAIM_BYTES,
    DEFAULT_MAX_PAYLOAD,
)
from drain.core.table import JobTable
from drain.store.params import Pending, seconds
from drain.store.sqlfiles import statement_for


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
        "lease": seconds(lease),
        "max_payload": max_payload,
        "max_bytes": max_bytes,
    }
    name = "claim_priority" if by_priority else "claim"
    cursor = conn.execute(statement_for(table, name), params)
    return Pending(cursor, lambda cur: _read_claim(cur, queue))


_SUSPECT = ClaimedRow._fields.index("suspect")


def unread_rows(pending: Pending[Claim]) -> int:
    """How many rows a claim's reply holds, read off the reply without decoding it.

    The reply is in the client's memory once its pipeline is done; its rows are
    turned into jobs only by :meth:`Pending.result`, which the runner may do
    while the server works on the next claim (:mod:`drain.runner.cycle`).
    """
    reply = pending.cursor.pgresult
    return 0 if reply is None else reply.ntuples


def brought_suspect(pending: Pending[Claim]) -> bool:
    """Whether an undecoded claim's reply holds a suspect, whose claim must be
    taken as it comes, before another claim (see :mod:`drain.runner.intake`)."""
    reply = pending.cursor.pgresult
    if reply is None:
        return False
    return any(reply.get_value(row, _SUSPECT) == b"t" for row in range(reply.ntuples))


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
    conn.execute(statement_for(table, "claim_time_limit"), {"limit": seconds(limit)})


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
        raise PoisonedRow("created_at or run_at is NULL, infinite or outside the years 1 to 9999")
    try:
        payload = json.loads(row.payload_text)
    except RecursionError:
        raise PoisonedRow("payload is nested too deeply to decode") from None
    except ValueError as exc:
        raise PoisonedRow(f"payload cannot be decoded: {exc}") from None
    return Job(row.id, queue, payload, row.attempt, row.max_attempts, row.created_at, row.run_at)
