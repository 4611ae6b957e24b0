"""The token buckets of ``--queue-rate``, one row per queue in ``drain_rates``.

A rated queue's claim is three statements in one transaction, sent in the run's
pipeline: :func:`send_take` refills the queue's bucket (locking its row) and
takes the tokens the claim may use, leaving that room where the claim reads it
(``drain.claim_room``, as a cap's room is left); the claim follows and takes no
more. A claim rolled back rolls its tokens back with it. What the claim did not
lease goes back afterwards (:func:`refund`), so only leased jobs count as
starts. The take also says how long the bucket needs to hold a claim's worth
again: the run sleeps that long, with no transaction open and nothing sent,
instead of asking the database whether a token came back.

One function per statement in ``sql/rate_*.sql``; no policy here.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import psycopg
from psycopg import errors, sql

from drain.core.errors import RateNotEnabled
from drain.core.rates import PERIODS, Rate
from drain.core.table import JobTable
from drain.store import sqlfiles
from drain.store.params import Pending

RATES_TABLE = "drain_rates"


class Taken(NamedTuple):
    """What one take left the claim: ``room`` jobs, and the wait before the next take
    can find a claim's worth of tokens (0 when some are left)."""

    room: int
    wait_seconds: float


class QueueRate(NamedTuple):
    """A queue's rate as the last run that claimed it set it, and its ready jobs now."""

    queue: str
    rate: Rate
    ready: int


def rates_identifier(table: JobTable) -> sql.Identifier:
    return sql.Identifier(table.schema, RATES_TABLE)


@functools.cache
def _statement(table: JobTable, name: str) -> bytes:
    """``sql/<name>.sql`` with the bucket table's name (and the queue table's)."""
    names = {**sqlfiles.identifiers(table), "rates": rates_identifier(table)}
    return sqlfiles.compose(name, **names).as_bytes(None)


def exists(conn: psycopg.Connection[Any], table: JobTable) -> bool:
    name = rates_identifier(table).as_string(None)
    row = conn.execute(_statement(table, "rate_exists"), {"rates": name}).fetchone()
    return bool(row and row[0])


def ensure_table(conn: psycopg.Connection[Any], table: JobTable) -> None:
    """Create ``drain_rates`` where it is missing; a role that may not is told what to do.

    Two runs that both find it missing both create it; the one that loses the race
    finds the other's table (the catalog's unique index tells it so).
    """
    if exists(conn, table):
        return
    try:
        conn.execute(_statement(table, "rate_table"))
    except (errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject):
        # Another run created it at the same moment: IF NOT EXISTS does not see a
        # table whose creation has not committed, and the second insert of its
        # catalog row (the table's, or its row type's: "type already exists")
        # waits for the first, then fails. It is there now.
        return
    except errors.InsufficientPrivilege:
        name = f"{table.schema}.{RATES_TABLE}"
        raise RateNotEnabled(
            f"--queue-rate keeps its buckets in {name}, which is missing and this role may "
            f"not create; run once as the owner of {table.qualified}, or create it with the "
            "SQL in docs (sql/rate_table.sql)"
        ) from None


def send_take(
    conn: psycopg.Connection[Any], table: JobTable, queue: str, rate: Rate, limit: int
) -> Pending[Taken]:
    """Refill the queue's bucket and take the room of the claim that follows (same
    transaction: a pipeline's, before its sync)."""
    bucket = {
        "jobs_table": table.qualified,
        "queue": queue,
        "starts": rate.starts,
        "period": rate.period,
        "burst": float(rate.burst),
    }
    conn.execute(_statement(table, "rate_refill"), bucket)
    take = {"jobs_table": table.qualified, "queue": queue, "limit": limit, "want": limit}
    cursor = conn.execute(_statement(table, "rate_take"), take)
    return Pending(cursor, _read_taken)


def _read_taken(cursor: psycopg.Cursor[Any]) -> Taken:
    row = cursor.fetchone()
    if row is None:  # no bucket (cannot happen after the refill); claim nothing
        return Taken(0, 0.0)
    return Taken(int(row[0]), float(row[2]))


def refund(conn: psycopg.Connection[Any], table: JobTable, queue: str, tokens: int) -> None:
    """Give back tokens a claim took but did not lease (its own short transaction)."""
    if tokens <= 0:
        return
    params = {"jobs_table": table.qualified, "queue": queue, "tokens": tokens}
    conn.execute(_statement(table, "rate_refund"), params)


def queue_rates(conn: psycopg.Connection[Any], table: JobTable) -> list[QueueRate]:
    """Each rated queue of the table with its last rate and its ready jobs (none
    when no run was ever given a rate: the table is not there)."""
    if not exists(conn, table):
        return []
    rows = conn.execute(_statement(table, "rate_status"), {"jobs_table": table.qualified})
    return [
        QueueRate(str(queue), Rate(int(starts), _unit(float(period))), int(ready))
        for queue, starts, period, ready in rows.fetchall()
    ]


def _unit(period: float) -> str:
    return next((unit for unit, seconds in PERIODS.items() if seconds == period), "s")
