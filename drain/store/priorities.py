"""Job priorities on enqueue: the checked value, the statement it needs, the error it meets.

A priority is optional twice over. The column is an extra a table gets on
purpose (``drain migrate --with priority``); and a job enqueued without one
takes the column's default (0), so code that never names a priority works on
either table. Only a priority actually given needs the column: it picks the
``*_priority`` variant of the enqueue statement, and a table without the
column refuses it with :class:`~drain.core.errors.PriorityNotEnabled`, one
line, before anything is inserted (the caller's transaction must then be
rolled back, as after any failed statement).

Kept apart from :mod:`drain.store.producer` so the enqueue functions there (and in
:mod:`drain.store.aio`) only pass the value through these helpers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors

from drain.core.errors import PriorityNotEnabled
from drain.core.table import PRIORITY_MAX, PRIORITY_MIN, JobTable

COLUMN = "priority"
# The column is a PostgreSQL integer: a priority outside it would fail the
# statement with an out-of-range error instead of a message about the value.
# The column's CHECK (sql/migrations/0003_priority.sql) holds it to a smallint's range.
LOWEST = PRIORITY_MIN
HIGHEST = PRIORITY_MAX


def check(priority: int | None) -> None:
    """Refuse a priority that is not a whole number within the column's range."""
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"a priority is an int, not {type(priority).__name__}")
    if not LOWEST <= priority <= HIGHEST:
        raise ValueError(f"a priority is between {LOWEST:,} and {HIGHEST:,}, not {priority:,}")


def statement(name: str, priority: int | None) -> str:
    """The enqueue statement to send: ``name``, or its priority variant when one is given."""
    return name if priority is None else f"{name}_priority"


def with_priority(params: dict[str, Any], priority: int | None) -> dict[str, Any]:
    """The statement's parameters, with the priority when one is given."""
    if priority is not None:
        params["priority"] = priority
    return params


def missing(exc: psycopg.Error, table: JobTable) -> PriorityNotEnabled | None:
    """The error to raise when ``exc`` says the table has no priority column, else None."""
    primary = exc.diag.message_primary or ""
    if not isinstance(exc, errors.UndefinedColumn) or f'"{COLUMN}"' not in primary:
        return None
    return PriorityNotEnabled(
        f"queue table {table.qualified} has no priority column; add it with "
        "`drain migrate --with priority` (or `drain init --with priority`)"
    )


@contextmanager
def refused_without_column(table: JobTable) -> Iterator[None]:
    """Turn the driver's "column priority does not exist" into one clear error.

    A plain ``with`` block, so the async enqueue functions use it as they are.
    """
    try:
        yield
    except psycopg.Error as exc:
        error = missing(exc, table)
        if error is None:
            raise
        raise error from exc
