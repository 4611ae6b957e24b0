"""Will the compute get to sleep under this schedule? Pure schedule arithmetic.

drain exists so that a scale-to-zero compute can suspend between runs, and a
schedule that fires too often throws that away without a sound. This module
answers the question before a deploy does, with the article's model: a run starts
at each fire time, works ``d`` seconds, and the compute stays awake ``T`` seconds
after the run's last activity. Awake spans that touch or overlap merge, so a gap
between two runs lets the compute sleep only when it is strictly longer than
``d + T``.

Nothing here reads a clock or a database: the start of the window is an input, so
the same inputs always give the same figures. Once croniter has produced a fire
time it is handled as POSIX seconds, because subtracting two aware datetimes of
one zone ignores a daylight-saving change that lies between them.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from itertools import pairwise
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from drain.core.settings import DEFAULT_IDLE_TIMEOUT
from drain.planning import timeline
from drain.planning.cron import ScheduleError, zone

DAY = 86400.0
# A month of compute-hours, the way providers bill it: 365 days * 24 h / 12.
HOURS_PER_MONTH = 730.0
DEFAULT_WINDOW = 7 * DAY
# Longer windows only repeat the same weeks and make an every-minute schedule slow.
MAX_WINDOW = 366 * DAY
LAMBDA_LIMIT_SECONDS = 900.0
GITHUB_ACTIONS_MIN_INTERVAL = 300.0
AURORA_PAUSE_RANGE = (300.0, DAY)


class Trigger(StrEnum):
    """What starts the runs; each has its own limits on a run."""

    LAMBDA = "lambda"
    GITHUB_ACTIONS = "github-actions"
    KUBERNETES = "kubernetes"
    CRON = "cron"
    SYSTEMD = "systemd"


# The name of each trigger's own time limit on a run, and what happens when it passes.
_DEADLINES: dict[Trigger | None, tuple[str, str]] = {
    Trigger.KUBERNETES: ("activeDeadlineSeconds", "Kubernetes kills"),
    Trigger.SYSTEMD: ("TimeoutStartSec", "systemd kills"),
    Trigger.GITHUB_ACTIONS: ("timeout-minutes", "GitHub Actions cancels"),
}


class ProviderName(StrEnum):
    NEON = "neon"
    AURORA = "aurora"
    ARTICLE = "article"


@dataclass(frozen=True)
class Provider:
    """A platform's suspend rule: its idle timeout ``T`` and the rule in one line."""

    name: ProviderName
    idle_timeout: float
    rule: str


PROVIDERS = {
    ProviderName.NEON: Provider(
        ProviderName.NEON,
        300.0,
        "Neon suspends a compute after 5 min without active queries (the default); "
        "an idle-in-transaction session counts as active, an idle one does not.",
    ),
    ProviderName.AURORA: Provider(
        ProviderName.AURORA,
        300.0,
        "Aurora Serverless v2 auto-pauses only when no user connection is open at all, "
        "after 300 s to 1 day (default 300 s); resuming takes up to about 15 s.",
    ),
    ProviderName.ARTICLE: Provider(
        ProviderName.ARTICLE,
        DEFAULT_IDLE_TIMEOUT,
        "The article's platform suspends a compute with nothing to do for about 10 min; "
        "a query or an idle-in-transaction session counts as activity.",
    ),
}


class Frame(NamedTuple):
    """The stretch of time a plan covers and the platform it assumes, whatever the schedules.

    ``start`` is an aware datetime; days are cut at midnight in ``timezone``, and
    ``idle_timeout`` is ``T``, the provider's when one is named.
    """

    start: datetime
    window: float = DEFAULT_WINDOW
    timezone: str = "UTC"
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    compute_units: float = 1.0
    provider: Provider | None = None


@dataclass(frozen=True)
class RunSchedule:
    """One schedule and what is known about the runs it starts.

    ``run_seconds`` is ``d``. The budget, grace, lease, trigger and the trigger's
    own time limit (``deadline_seconds``: a CronJob's activeDeadlineSeconds, a
    service's TimeoutStartSec, a workflow job's timeout-minutes) are optional: they only feed the warnings, which
    are given when the values they compare are known.
    """

    expression: str
    run_seconds: float
    timezone: str | None = None
    max_seconds: float | None = None
    grace_seconds: float | None = None
    lease_seconds: float | None = None
    deadline_seconds: float | None = None
    trigger: Trigger | None = None
    source: str = "argument"

    def as_dict(self, default_zone: str) -> dict[str, Any]:
        """The schedule for ``--json``; ``default_zone`` stands in when it names none."""
        return {
            "expression": self.expression,
            "timezone": self.timezone or default_zone,
            "source": self.source,
            "run_seconds": self.run_seconds,
            "max_seconds": self.max_seconds,
            "grace_seconds": self.grace_seconds,
            "lease_seconds": self.lease_seconds,
            "deadline_seconds": self.deadline_seconds,
            "trigger": self.trigger.value if self.trigger else None,
        }


@dataclass(frozen=True)
class Figures:
    """What one stretch of time (a day, or the whole window) looks like."""

    start: datetime
    end: datetime
    seconds: float
    runs: int
    resumes: int
    awake_seconds: float
    longest_sleep_seconds: float
    worst_wait_seconds: float
    compute_units: float

    @property
    def awake_share(self) -> float:
        return self.awake_seconds / self.seconds if self.seconds else 0.0

    @property
    def compute_hours_per_month(self) -> float:
        """Awake hours a month at this stretch's rate, times the compute size."""
        return self.awake_share * HOURS_PER_MONTH * self.compute_units

    def per_day(self, value: float) -> float:
        """``value`` spread over 24 hours of this stretch, so windows of any length compare."""
        return value * DAY / self.seconds if self.seconds else 0.0

    def as_dict(self, *, per_day: bool = False) -> dict[str, Any]:
        """The figures for ``--json``; ``per_day`` adds the day's average (for a window)."""
        data: dict[str, Any] = {
            "date": self.start.date().isoformat(),
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "seconds": self.seconds,
            "runs": self.runs,
            "resumes": self.resumes,
            "awake_seconds": self.awake_seconds,
            "awake_hours": self.awake_seconds / 3600,
            "awake_share": self.awake_share,
            "compute_hours_per_month": self.compute_hours_per_month,
            "longest_sleep_seconds": self.longest_sleep_seconds,
            "worst_wait_seconds": self.worst_wait_seconds,
        }
        if per_day:
            data["per_day"] = {
                "runs": self.per_day(self.runs),
                "resumes": self.per_day(self.resumes),
                "awake_hours": self.per_day(self.awake_seconds) / 3600,
            }
        return data


@dataclass(frozen=True)
class Plan:
    """The figures of a schedule over a window, the verdict and the warnings."""

    schedules: tuple[RunSchedule, ...]
    timezone: str
    idle_timeout: float
    provider: Provider | None
    days: tuple[Figures, ...]
    window: Figures
    suspends: bool
    verdict: str
    gap_seconds: float
    awake_span_seconds: float
    warnings: tuple[str, ...] = field(default=())

    def as_dict(self, sources: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The plan for ``--json``; ``sources`` (where ``d`` and ``T`` came from) is the caller's."""
        return {
            "timezone": self.timezone,
            "idle_timeout_seconds": self.idle_timeout,
            "compute_units": self.window.compute_units,
            "provider": self.provider.name.value if self.provider else None,
            "provider_rule": self.provider.rule if self.provider else None,
            **(sources or {}),
            "schedules": [s.as_dict(self.timezone) for s in self.schedules],
            "days": [day.as_dict() for day in self.days],
            "window": self.window.as_dict(per_day=True),
            "suspends": self.suspends,
            "verdict": self.verdict,
            "gap_seconds": self.gap_seconds,
            "awake_span_seconds": self.awake_span_seconds,
            "warnings": list(self.warnings),
        }


def span_text(seconds: float) -> str:
    """A duration the way the report says it: ``45 s``, ``11 min``, ``8 h 24 min``, ``2 d``."""
    if seconds < 60:
        whole = seconds >= 10 or seconds == round(seconds)
        return f"{seconds:.0f} s" if whole else f"{seconds:.1f} s"
    if seconds < 7200:
        minutes, secs = divmod(round(seconds), 60)
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    if seconds < 2 * DAY:
        hours, minutes = divmod(round(seconds / 60), 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(round(seconds / 3600), 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _figures(line: timeline.Timeline, a: float, b: float, where: ZoneInfo, units: float) -> Figures:
    return Figures(
        start=datetime.fromtimestamp(a, where),
        end=datetime.fromtimestamp(b, where),
        seconds=b - a,
        runs=bisect_left(line.fires, b) - bisect_left(line.fires, a),
        resumes=bisect_left(line.span_starts, b) - bisect_left(line.span_starts, a),
        awake_seconds=timeline.awake(line, a, b),
        longest_sleep_seconds=timeline.longest_sleep(line, a, b),
        worst_wait_seconds=timeline.worst_wait(line, a, b),
        compute_units=units,
    )


def _verdict(window: Figures, gap: float, span: float, gaps_equal: bool) -> tuple[bool, str]:
    if window.longest_sleep_seconds <= 0:
        at_most = "" if gaps_equal else "at most "
        return False, (
            f"never suspends: runs are {at_most}{span_text(gap)} apart, "
            f"a run keeps the compute awake {span_text(span)}"
        )
    awake_starts = window.runs - window.resumes
    if awake_starts > 0:
        return True, (
            f"suspends between some runs: {awake_starts} of {window.runs} runs start "
            "while the compute is still awake from an earlier one"
        )
    return True, "suspends between runs"


def _check_window(fires: Sequence[float], start: datetime, end: float, where: ZoneInfo) -> None:
    if not fires:
        last = datetime.fromtimestamp(end, where)
        raise ScheduleError(
            f"no schedule fires between {start:%Y-%m-%d %H:%M} and {last:%Y-%m-%d %H:%M} "
            f"{where.key}; widen --window or check the expression"
        )


def make_plan(
    schedules: Sequence[RunSchedule],
    *,
    start: datetime,
    window: float = DEFAULT_WINDOW,
    timezone: str = "UTC",
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    compute_units: float = 1.0,
    provider: Provider | None = None,
    max_wait: float | None = None,
) -> Plan:
    """Plan ``schedules`` over ``window`` seconds from ``start`` (an aware datetime).

    Days are cut at midnight in ``timezone``; each schedule fires in its own time
    zone when it names one, else in ``timezone``. The keywords are those of a
    :class:`Frame`; :func:`plan_in` takes one.
    """
    frame = Frame(start, window, timezone, idle_timeout, compute_units, provider)
    return plan_in(frame, schedules, max_wait=max_wait)


def plan_in(
    frame: Frame, schedules: Sequence[RunSchedule], *, max_wait: float | None = None
) -> Plan:
    """Plan ``schedules`` in ``frame``; a worst wait over ``max_wait`` draws a warning."""
    start, idle = frame.start, frame.idle_timeout
    if start.tzinfo is None:
        raise ValueError("start must be a timezone-aware datetime")
    _check_inputs(schedules, frame.window, idle, frame.compute_units)
    where = zone(frame.timezone)
    begin = start.timestamp()
    end = timeline.window_end(start, frame.window, where)
    line = timeline.timeline(schedules, where, begin, end, idle)
    in_window = line.fires[bisect_left(line.fires, begin) : bisect_left(line.fires, end)]
    _check_window(in_window, start, end, where)
    bounds = timeline.day_bounds(start, end, where)
    days = tuple(_figures(line, a, b, where, frame.compute_units) for a, b in pairwise(bounds))
    totals = _figures(line, begin, end, where, frame.compute_units)
    gaps = timeline.gaps([*in_window, line.next_fire])
    gap = max(gaps)
    span = max(s.run_seconds for s in schedules) + idle
    suspends, verdict = _verdict(totals, gap, span, min(gaps) == gap)
    notes = _warnings(schedules, line, begin, idle, frame.provider)
    if max_wait is not None and totals.worst_wait_seconds > max_wait:
        notes.append(
            f"a job can wait {span_text(totals.worst_wait_seconds)} for a run, "
            f"longer than --max-wait {span_text(max_wait)}"
        )
    return Plan(
        schedules=tuple(schedules),
        timezone=where.key,
        idle_timeout=idle,
        provider=frame.provider,
        days=days,
        window=totals,
        suspends=suspends,
        verdict=verdict,
        gap_seconds=gap,
        awake_span_seconds=span,
        warnings=tuple(dict.fromkeys(notes)),
    )


def _check_inputs(
    schedules: Sequence[RunSchedule], window: float, idle_timeout: float, compute_units: float
) -> None:
    checks = [
        (bool(schedules), "no schedule to plan: give a cron expression or --from FILE"),
        (0 < window <= MAX_WINDOW, "--window must be above 0 and at most 366 days"),
        (idle_timeout >= 0, "--idle-timeout cannot be negative"),
        (compute_units > 0, "--compute-units must be above 0"),
        (all(s.run_seconds >= 0 for s in schedules), "--run-seconds cannot be negative"),
    ]
    for ok, message in checks:
        if not ok:
            raise ScheduleError(message)


def _warnings(
    schedules: Sequence[RunSchedule],
    line: timeline.Timeline,
    begin: float,
    idle: float,
    provider: Provider | None,
) -> list[str]:
    notes = _overlap_warnings(schedules, line, begin)
    for schedule, fires in zip(schedules, line.own, strict=True):
        notes.extend(_budget_warnings(schedule))
        if schedule.trigger is Trigger.GITHUB_ACTIONS:
            notes.extend(_github_warnings(schedule, fires))
    if provider is not None and provider.name is ProviderName.AURORA:
        low, high = AURORA_PAUSE_RANGE
        if not low <= idle <= high:
            notes.append(
                f"Aurora's auto-pause delay is 300 s to 1 day; {span_text(idle)} cannot be set"
            )
    return notes


def _overlap_warnings(
    schedules: Sequence[RunSchedule], line: timeline.Timeline, begin: float
) -> list[str]:
    """Runs that start while an earlier run, of any of the schedules, still works."""
    runs = sorted(
        (fire, schedule.run_seconds)
        for schedule, fires in zip(schedules, line.own, strict=True)
        for fire in fires[:-1]
    )
    busy_until = -math.inf
    previous = -math.inf
    tightest = math.inf
    for fire, seconds in runs:
        if begin <= fire < busy_until:
            tightest = min(tightest, fire - previous)
        busy_until = max(busy_until, fire + seconds)
        previous = fire
    if tightest == math.inf:
        return []
    longest = max(seconds for _, seconds in runs)
    when = "at the same time" if tightest == 0 else f"{span_text(tightest)} apart"
    return [
        f"runs can overlap: a run works up to {span_text(longest)} and two runs can start "
        f"{when}; several runs then work at once (safe, and --max-runners caps them)"
    ]


def _budget_warnings(schedule: RunSchedule) -> list[str]:
    notes: list[str] = []
    budget = schedule.max_seconds
    if budget is None:
        return notes
    if schedule.lease_seconds is not None and schedule.lease_seconds < budget:
        notes.append(
            f"the lease ({span_text(schedule.lease_seconds)}) is shorter than the budget "
            f"({span_text(budget)}): a job working longer relies on lease extensions, "
            "and one missed extension lets another run take it"
        )
    stop = budget + (schedule.grace_seconds or 0.0)
    if schedule.trigger is Trigger.LAMBDA and stop > LAMBDA_LIMIT_SECONDS:
        notes.append(
            f"the budget plus grace ({stop:g} s) is over AWS Lambda's limit of 900 s: "
            "Lambda ends the run before it releases its unstarted jobs"
        )
    deadline = schedule.deadline_seconds
    if deadline is not None and deadline < stop:
        name, killer = _DEADLINES.get(schedule.trigger, ("the time limit", "the trigger ends"))
        notes.append(
            f"{name} ({deadline:g} s) of {schedule.source} is shorter than the budget plus "
            f"grace ({stop:g} s): {killer} the run before it stops in order"
        )
    return notes


def _github_warnings(schedule: RunSchedule, fires: Sequence[float]) -> list[str]:
    gaps = timeline.gaps(fires)
    if gaps and min(gaps) < GITHUB_ACTIONS_MIN_INTERVAL:
        return [
            "GitHub Actions runs a schedule at most every 5 min (and often late); "
            f"{schedule.expression!r} asks for every {span_text(min(gaps))}"
        ]
    return []
