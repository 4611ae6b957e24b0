"""Queue rates (``--queue-rate QUEUE=N/s|m|h``): the value, its parser, and its arithmetic.

A rate is N starts of a queue's jobs per period, across every run at once. The
runs share one token bucket per queue in the database (:mod:`drain.store.rates`):
it holds at most :attr:`Rate.burst` tokens and refills at N per period; a claim
takes a token per job it leases. Over any stretch of one period a queue then
starts at most N plus the burst, a fifth of N (at least 1): for ``40/s``, no
second holds more than 48 starts, and a backlog of 120 takes 3 s or more.

Pure: no database, no clock. The planner and ``drain status`` use the same
arithmetic to say how long a backlog takes at a rate.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from drain.core.durations import format_duration
from drain.core.errors import UsageError

PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
# The bucket holds this share of N, so a run that finds it full starts a small
# burst at once, not a whole period's worth (which would put 2N in one period).
BURST_SHARE = 0.2
_FORM = re.compile(r"(\d+)\s*/\s*([a-z]+)")
EXAMPLE = "emails=40/s"


class Rate(NamedTuple):
    """At most ``starts`` starts per ``unit`` (s, m or h), shared by every run."""

    starts: int
    unit: str

    @property
    def period(self) -> float:
        """The period in seconds."""
        return PERIODS[self.unit]

    @property
    def per_second(self) -> float:
        return self.starts / self.period

    @property
    def burst(self) -> int:
        """How many tokens the bucket holds at most: a fifth of N, at least 1."""
        return max(1, math.floor(self.starts * BURST_SHARE))

    @property
    def text(self) -> str:
        return f"{self.starts}/{self.unit}"

    def seconds_for(self, jobs: int) -> float:
        """How long ``jobs`` starts take at this rate, at the least (the burst aside)."""
        return jobs / self.per_second


def parse_rate(text: str, name: str = "--queue-rate") -> Rate:
    """``40/s``, ``600/m``, ``1000/h``; a usage error naming ``name`` otherwise."""
    match = _FORM.fullmatch(text.strip().lower())
    if match is None or match.group(2) not in PERIODS:
        raise UsageError(
            f"{name}: {text!r} is not a rate N/s, N/m or N/h (starts per second, minute "
            f"or hour), e.g. {EXAMPLE}"
        )
    starts = int(match.group(1))
    if starts < 1:
        raise UsageError(f"{name}: {text!r} allows no start at all; give N of at least 1")
    return Rate(starts, match.group(2))


def parse_queue_rate(text: str, name: str = "--queue-rate") -> tuple[str, Rate]:
    """``QUEUE=N/s|m|h`` as a queue and its rate; a usage error naming ``name`` otherwise."""
    queue, equals, rate = text.rpartition("=")
    queue = queue.strip()
    if not equals or not queue:
        raise UsageError(f"{name}: {text!r} is not QUEUE=N/s|m|h, e.g. {EXAMPLE}")
    return queue, parse_rate(rate, f"{name} {queue}")


def run_capacity(rate: Rate, run_seconds: float) -> int:
    """The most starts of the queue one run of ``run_seconds`` can make: the burst a
    full bucket gives at once, then N per period."""
    return math.floor(rate.per_second * max(run_seconds, 0.0)) + rate.burst


def plan_line(queue: str, rate: Rate, run_seconds: float, runs_per_day: float) -> str:
    """What a rate means under a schedule, as ``drain plan --queue-rate`` prints it."""
    per_run = run_capacity(rate, run_seconds)
    per_day = math.floor(per_run * runs_per_day)
    backlog = 1000
    return (
        f"{queue}: {rate.text}: a run of {format_duration(run_seconds)} starts at most "
        f"{per_run:,} of its jobs, {per_day:,} a day over {runs_per_day:g} runs; a backlog "
        f"of {backlog:,} takes {format_duration(math.ceil(rate.seconds_for(backlog)))} of runs"
    )


def backlog_line(queue: str, rate: Rate, ready: int) -> str:
    """What a rate means for a backlog, as ``drain status`` prints it:
    ``rq: 40/s, 120 ready = 3 s`` (whole seconds up to a minute, then ``1h30m``)."""
    seconds = rate.seconds_for(ready)
    shown = f"{math.ceil(seconds)} s" if seconds < 60 else format_duration(seconds)
    return f"{queue}: {rate.text}, {ready:,} ready = {shown}"
