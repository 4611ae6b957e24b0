"""The runs of a week of schedules as POSIX seconds: awake spans, sleeps and waits.

Each fire starts a run of ``d`` seconds after which the compute stays awake ``T``
seconds; spans that touch merge. The measures here (:func:`awake`,
:func:`longest_sleep`, :func:`worst_wait`) read a :class:`Timeline` between two
instants, so a plan can cut its window into days. Pure: croniter is reached
through :mod:`drain.planning.cron` only.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from itertools import pairwise
from typing import Protocol
from zoneinfo import ZoneInfo

from drain.planning.cron import fire_times, previous_fire, zone


class Timed(Protocol):
    """What a timeline needs of a schedule: when it fires and how long a run works."""

    @property
    def expression(self) -> str: ...

    @property
    def timezone(self) -> str | None: ...

    @property
    def run_seconds(self) -> float: ...


@dataclass(frozen=True)
class Timeline:
    """Every run of every schedule, merged into awake spans, as POSIX seconds."""

    fires: list[float]
    next_fire: float
    span_starts: list[float]
    span_ends: list[float]
    # Per schedule, in the order given: its fires, then the first one after the window.
    own: tuple[list[float], ...]


def merge_spans(runs: Iterable[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Awake spans from ``(start, awake_until)`` pairs; spans that touch merge (no sleep)."""
    starts: list[float] = []
    ends: list[float] = []
    for start, until in sorted(runs):
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], until)
        else:
            starts.append(start)
            ends.append(until)
    return starts, ends


def timeline(
    schedules: Sequence[Timed], default_zone: ZoneInfo, begin: float, end: float, idle: float
) -> Timeline:
    """Fires from a lookback before ``begin`` on, so a run just before the window counts.

    The last run before the lookback is an awake span too (its fire is not one of
    the window's), so the sleep the window opens in has a known start.
    """
    lookback = begin - max(s.run_seconds for s in schedules) - idle
    runs: list[tuple[float, float]] = []
    fires: list[float] = []
    own: list[list[float]] = []
    for schedule in schedules:
        where = zone(schedule.timezone) if schedule.timezone else default_zone
        these, following = fire_times(schedule.expression, where, lookback, end)
        fires.extend(these)
        before = previous_fire(schedule.expression, where, lookback)
        earlier = [] if before is None else [before]
        runs.extend((fire, fire + schedule.run_seconds + idle) for fire in [*earlier, *these])
        own.append([*these, following])
    starts, ends = merge_spans(runs)
    next_fire = min(fires_of[-1] for fires_of in own)
    return Timeline(sorted(fires), next_fire, starts, ends, tuple(own))


def awake(line: Timeline, a: float, b: float) -> float:
    first = bisect_right(line.span_ends, a)
    last = bisect_left(line.span_starts, b)
    return sum(min(line.span_ends[k], b) - max(line.span_starts[k], a) for k in range(first, last))


def longest_sleep(line: Timeline, a: float, b: float) -> float:
    """The longest sleep that lies in ``[a, b)`` even in part, counted whole.

    A sleep runs from one awake span's end to the next one's start, wherever those
    fall: cut at the edges of a day or of the window, Friday evening's sleep
    until Monday would read as a few hours, the way a job's worst wait would if
    it were cut there. The sleep after the last span ends at the first fire after
    the window; the one before the first span starts at the run before the window
    (see :func:`timeline`), or at ``a`` when the schedule never fired before.
    """
    starts, ends = line.span_starts, line.span_ends
    longest = starts[0] - a if starts and a < starts[0] else 0.0
    woken = [*starts[1:], line.next_fire]
    for k in range(max(bisect_right(starts, a) - 1, 0), bisect_left(ends, b)):
        if woken[k] > a:
            longest = max(longest, woken[k] - ends[k])
    return longest


def worst_wait(line: Timeline, a: float, b: float) -> float:
    """The longest a job enqueued in ``[a, b)`` waits for a run to start.

    A run drains until its claim comes back empty, so the unlucky job is the one
    enqueued just after a run found the queue empty: it waits for the next start.
    """
    times = [*line.fires, line.next_fire]
    k = bisect_right(times, a)
    worst = times[k] - a
    while k < len(times) - 1 and times[k] < b:
        worst = max(worst, times[k + 1] - times[k])
        k += 1
    return worst


def day_bounds(start: datetime, end: float, where: ZoneInfo) -> list[float]:
    """The window cut at each local midnight, so a day may last 23 or 25 hours."""
    bounds = [start.timestamp()]
    day = start.astimezone(where).date() + timedelta(days=1)
    while (midnight := datetime.combine(day, time(), tzinfo=where).timestamp()) < end:
        bounds.append(midnight)
        day += timedelta(days=1)
    bounds.append(end)
    return bounds


def window_end(start: datetime, window: float, where: ZoneInfo) -> float:
    """The end of the window on the wall clock: 7 days from Monday 00:00 is Monday 00:00."""
    return (start.astimezone(where) + timedelta(seconds=window)).timestamp()


def gaps(fires: Sequence[float]) -> list[float]:
    return [later - earlier for earlier, later in pairwise(fires)]
