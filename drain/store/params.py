"""How values go into the run's statements and how a sent statement's rows come back.

Shared by every module of statements (claims, outcomes, upkeep, the producer
API): a :class:`Pending` result lets the runner put a batch's completions and the
next claim in one pipeline round trip; durations and id arrays are adapted here
once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import Any, Generic, TypeVar

import psycopg

T = TypeVar("T")


class Pending(Generic[T]):
    """A statement already sent (maybe inside a pipeline) whose rows are read later."""

    def __init__(self, cursor: psycopg.Cursor[Any], read: Callable[[psycopg.Cursor[Any]], T]):
        self.cursor = cursor
        self._read = read

    def result(self) -> T:
        return self._read(self.cursor)


def seconds(value: float | timedelta) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


def int_array(values: Iterable[int]) -> str:
    """Integers as one array literal, which the statement casts (``::bigint[]``).

    psycopg adapts a list element by element in Python, a cost a batch's two
    arrays pay on every fenced statement (measured in BENCHMARKS.md, "What these
    measurements changed": id arrays as one literal). The literal only ever
    holds digits and minus signs: ``int()`` sees to that.
    """
    return "{" + ",".join(map(str, map(int, values))) + "}"


@contextlib.contextmanager
def explicit_transaction(conn: psycopg.Connection[Any], *, wanted: bool) -> Iterator[None]:
    """Send the statements of the block, in a pipeline, as one explicit transaction
    (when ``wanted``: otherwise the block's statements are sent as they are).

    A pipeline's implicit transaction ends only at its sync point, which the
    runner sends once it has decoded the last claim (drain.runner.cycle): until
    then the rows the statements changed would stay locked, and a client frozen
    there (SIGSTOP, a paused container) would hold them, and every other run's
    reaper waiting on them, for as long as it stays frozen. The server runs the
    ``COMMIT`` as soon as it reaches it. A statement that fails aborts the
    pipeline, the ``COMMIT`` with it: :func:`end_aborted_transaction` then.
    A pipeline the client waits on from its last statement to its sync point
    does not want it: the two statements more would be sent for nothing.
    """
    if not wanted:
        yield
        return
    conn.execute("BEGIN")
    yield
    conn.execute("COMMIT")


def end_aborted_transaction(conn: psycopg.Connection[Any]) -> None:
    """Roll back what a failed statement left of an explicit transaction: a sync
    point ends only an implicit one."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.execute("ROLLBACK")
