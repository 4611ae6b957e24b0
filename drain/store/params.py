"""How values go into the run's statements and how a sent statement's rows come back.

Shared by every module of statements (claims, outcomes, upkeep, the producer
API): a :class:`Pending` result lets the runner put a batch's completions and the
next claim in one pipeline round trip; durations and id arrays are adapted here
once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
