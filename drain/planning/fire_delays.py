"""How long a recurring job's fire waits for the drain run that enqueues it. Pure arithmetic.

A recurring job is enqueued by the first ``drain run`` that starts at or after its
fire time (each run fires what came due before its first claim), so on a
scale-to-zero deployment the drain runs' own schedule decides how late a 07:00
digest really goes out. ``drain plan --schedules-from-db`` lays each recurring
schedule's fires over the drain runs' starts in the plan's window and reports,
per schedule, the worst and the median delay from a fire to the start of the run
that picks it up. A run starting exactly at a fire time picks it up (delay 0).

Only runs that start within the window count, as for every other figure of the
plan: a fire after the window's last run start is "not picked up within the
window", and a schedule none of whose fires is picked up says so rather than
guess at a delay.

When two or more fires of one schedule fall between two run starts, they pile up
for the one run, whose catch-up policy decides what is enqueued: ``latest`` only
the most recent, ``all`` each one, ``none`` the most recent if it came due within
the usual gap between runs. That earns one warning per schedule.

Nothing here reads a clock or a database: the window and the schedules are
inputs, and fire times are POSIX seconds from :mod:`drain.planning.cron`, the arithmetic
the runs themselves use.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drain.planning import cron
from drain.planning.plan import Frame, RunSchedule, span_text
from drain.planning.timeline import window_end

_CATCH_UP_EFFECT = {
    "latest": "with catch-up latest only the most recent is enqueued",
    "all": "with catch-up all each one is enqueued",
    "none": "with catch-up none only the most recent, and only if it came due within "
    "the usual gap between runs",
}


@dataclass(frozen=True)
class Recurring:
    """What a plan needs of one recurring schedule (a row of ``drain_schedules``)."""

    name: str
    cron: str
    time_zone: str = "UTC"
    queue: str = ""
    catch_up: str = "latest"


@dataclass(frozen=True)
class FireDelays:
    """One recurring schedule's fires in the window and how long each waited for a run.

    ``worst_seconds`` and ``median_seconds`` cover the fires a run picked up, None
    when none was; ``most_piled`` is the most fires one run picked up at once.
    """

    schedule: Recurring
    fires: int
    picked_up: int
    worst_seconds: float | None
    median_seconds: float | None
    most_piled: int

    @property
    def not_picked_up(self) -> int:
        return self.fires - self.picked_up

    @property
    def warning(self) -> str | None:
        """One line when fires pile up between two runs, saying what the catch-up policy does."""
        if self.most_piled < 2:
            return None
        s = self.schedule
        effect = _CATCH_UP_EFFECT.get(s.catch_up, f"catch-up {s.catch_up} decides what is enqueued")
        return (
            f"recurring job {s.name!r} ({s.cron}, {s.time_zone}) fires more often than drain "
            f"runs start: up to {self.most_piled} of its fires come due for one run; {effect}"
        )

    def text(self) -> str:
        """The delays as the report says them."""
        if self.fires == 0:
            return "does not fire within the window"
        if self.worst_seconds is None or self.median_seconds is None:
            return "not picked up within the window"
        said = (
            f"worst {span_text(self.worst_seconds)}, median {span_text(self.median_seconds)} "
            f"over {self.picked_up} fire{'s' if self.picked_up != 1 else ''}"
        )
        if self.not_picked_up:
            said += f"; {self.not_picked_up} after the last run: not picked up within the window"
        return said

    def as_dict(self) -> dict[str, Any]:
        """The delays for ``--json``."""
        s = self.schedule
        return {
            "name": s.name,
            "cron": s.cron,
            "time_zone": s.time_zone,
            "queue": s.queue,
            "catch_up": s.catch_up,
            "fires": self.fires,
            "picked_up": self.picked_up,
            "not_picked_up": self.not_picked_up,
            "worst_delay_seconds": self.worst_seconds,
            "median_delay_seconds": self.median_seconds,
            "most_fires_per_run": self.most_piled,
            "warning": self.warning,
        }


def run_starts(frame: Frame, schedules: Sequence[RunSchedule]) -> tuple[float, float, list[float]]:
    """The window's bounds and every drain run start in it, merged and sorted.

    Each drain schedule fires in its own zone when it names one, else in the
    plan's, exactly as :func:`drain.planning.plan.plan_in` lays them out.
    """
    default = cron.zone(frame.timezone)
    begin = frame.start.timestamp()
    end = window_end(frame.start, frame.window, default)
    starts: set[float] = set()
    for schedule in schedules:
        where = cron.zone(schedule.timezone) if schedule.timezone else default
        starts.update(cron.fire_times(schedule.expression, where, begin, end)[0])
    return begin, end, sorted(starts)


def delays(starts: Sequence[float], fires: Sequence[float], schedule: Recurring) -> FireDelays:
    """How long each of ``fires`` waits for the first of ``starts`` at or after it (both sorted)."""
    waits: list[float] = []
    per_run: Counter[int] = Counter()
    for fire in fires:
        k = bisect_left(starts, fire)
        if k == len(starts):
            continue
        waits.append(starts[k] - fire)
        per_run[k] += 1
    return FireDelays(
        schedule=schedule,
        fires=len(fires),
        picked_up=len(waits),
        worst_seconds=max(waits) if waits else None,
        median_seconds=float(statistics.median(waits)) if waits else None,
        most_piled=max(per_run.values(), default=0),
    )


def fire_delays(
    frame: Frame, schedules: Sequence[RunSchedule], recurring: Sequence[Recurring]
) -> tuple[FireDelays, ...]:
    """Each recurring schedule's delays under the drain runs ``schedules`` in ``frame``."""
    begin, end, starts = run_starts(frame, schedules)
    found = []
    for entry in recurring:
        try:
            fires, _ = cron.fire_times(entry.cron, cron.zone(entry.time_zone), begin, end)
        except cron.ScheduleError as exc:
            # a row written by hand or by another version: say which one
            raise cron.ScheduleError(f"recurring job {entry.name!r}: {exc}") from None
        found.append(delays(starts, fires, entry))
    return tuple(found)
