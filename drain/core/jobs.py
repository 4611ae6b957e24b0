"""What a handler is given, and what it may raise to steer the outcome."""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, ClassVar, NamedTuple, Protocol


class Owned(Protocol):
    """Anything that names one attempt of one job: the ownership fence is (id, attempt)."""

    @property
    def id(self) -> int: ...

    @property
    def attempt(self) -> int: ...


class Job(NamedTuple):
    """One claimed attempt of a job, as a handler sees it.

    ``attempt`` counts from 1 and is the value the claim wrote; together with ``id``
    it is the fence every later statement about this job checks, which is why a
    job is immutable. A named tuple rather than a frozen dataclass: one is built
    per claimed job, in under 0.5 microseconds where the dataclass took 2.1.
    """

    id: int
    queue: str
    payload: Any
    attempt: int
    max_attempts: int
    created_at: datetime
    run_at: datetime

    @property
    def cancel_requested(self) -> bool:
        """True once ``drain cancel`` asked for this job while it ran.

        The lease keeper learns it with its next renewal, within a third of the
        lease, without LISTEN. A handler that checks it can stop early: whatever
        it returns is still recorded, and the job gets no further attempt. An
        ``--exec`` program is stopped instead (SIGTERM, SIGKILL 2 s later) and its
        job recorded failed with ``last_error`` 'cancelled', unless it exits 0 first.
        """
        return (self.id, self.attempt) in _CANCEL_REQUESTED

    @property
    def lease_lost(self) -> bool:
        """True once this attempt is no longer the run's: its lease was found taken,
        or cut as the run left with the handler still at work.

        Another run may hold the job by then, and whatever the handler does from
        now on is never recorded (the attempt fence rejects it). drain can stop an
        ``--exec`` program, but not Python code running in its own process: a
        long handler should check this between steps and return early.
        """
        return (self.id, self.attempt) in _LEASE_LOST


# The attempts a cancel was asked for while they ran, and those the run lost, as
# (id, attempt); the runner adds to them, handlers read them through
# Job.cancel_requested and Job.lease_lost. A set's add and membership test are
# atomic under the interpreter lock.
_CANCEL_REQUESTED: set[tuple[int, int]] = set()
_LEASE_LOST: set[tuple[int, int]] = set()


def note_cancel_requested(attempts: Iterable[Owned]) -> None:
    """Record that these attempts were cancelled while they ran (the lease keeper's call)."""
    _CANCEL_REQUESTED.update((attempt.id, attempt.attempt) for attempt in attempts)


def note_lease_lost(attempts: Iterable[Owned]) -> None:
    """Record that these attempts are no longer the run's (the board's call)."""
    _LEASE_LOST.update((attempt.id, attempt.attempt) for attempt in attempts)


class ClaimedRow(NamedTuple):
    """A row exactly as the claim returned it, before its payload is decoded.

    Decoding happens per job (see :func:`drain.store.claims.decode`), so one poisoned row
    fails alone instead of breaking the fetch of its whole batch. Any column but
    ``id`` may be NULL: a table made by hand may lack the article's NOT NULL, and
    the claim returns NULL for what it cannot hand over (a payload too large, a
    timestamp that is not finite). A named tuple rather than a frozen dataclass:
    one is built per claimed row, in 0.35 microseconds where the dataclass took
    2.6 (2 ms saved per claim of 1,000).
    """

    id: int
    attempt: int | None
    max_attempts: int | None
    exhausted: bool | None
    payload_text: str | None
    payload_size: int | None
    created_at: datetime | None
    run_at: datetime | None
    suspect: bool | None = False


class PermanentError(Exception):
    """Raise from a handler to fail the job for good, without further retries."""


class RetryLater(Exception):
    """Raise from a handler to run the job again later without counting an error.

    Give either ``delay`` (seconds, on the database clock) or ``at`` (an aware
    datetime). The job keeps its retries: a snooze does not use one up.

    A snooze never comes back sooner than ``FLOOR_SECONDS`` after it was
    recorded (a delay of 0, a negative one or an ``at`` in the past included), so
    one job cannot be claimed and snoozed thousands of times in one run: a run
    snoozes one job at most once a second. A delay longer than ``MAX_SECONDS``
    counts as that long. A delay that is not a finite number fails the attempt
    (see :meth:`when`): it is a bug in the handler, not a request to honour.
    """

    FLOOR_SECONDS: ClassVar[float] = 1.0
    MAX_SECONDS: ClassVar[float] = 100 * 365.25 * 86400.0  # 100 years

    def __init__(
        self, delay: float | timedelta | None = None, *, at: datetime | None = None
    ) -> None:
        if (delay is None) == (at is None):
            raise ValueError("RetryLater needs exactly one of delay= or at=")
        if at is not None and at.tzinfo is None:
            raise ValueError("RetryLater(at=...) needs a timezone-aware datetime")
        super().__init__(f"retry later ({at.isoformat() if at else f'in {delay}s'})")
        self.delay = delay
        self.at = at

    def when(self) -> tuple[datetime | None, float]:
        """``(at, delay)`` for the snooze statement, which takes the later of the two.

        ``delay`` is at least ``FLOOR_SECONDS``. Checked here rather than trusted
        from the constructor, since a handler may change the attributes or
        subclass without calling it. Raises :class:`ValueError` with the text the
        failed attempt records.
        """
        at = getattr(self, "at", None)
        delay = getattr(self, "delay", None)
        if at is not None:
            try:
                aware = isinstance(at, datetime) and at.utcoffset() is not None
            except Exception:
                aware = False
            if not aware:
                raise ValueError("RetryLater: at must be a timezone-aware datetime")
            return at, self.FLOOR_SECONDS
        seconds = math.nan
        if isinstance(delay, timedelta):
            seconds = delay.total_seconds()
        elif isinstance(delay, numbers.Real):
            with contextlib.suppress(OverflowError):  # an int beyond any float
                seconds = float(delay)
        if not math.isfinite(seconds):
            raise ValueError("RetryLater: delay must be a finite number of seconds")
        return None, min(max(seconds, self.FLOOR_SECONDS), self.MAX_SECONDS)


class Attempt(NamedTuple):
    """The bare ownership fence of one claimed attempt: a job id and its attempt number."""

    id: int
    attempt: int
