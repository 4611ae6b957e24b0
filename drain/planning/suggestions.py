"""``drain plan --suggest``: the even schedules whose worst wait fits, least awake first.

Every k minutes and every h hours that divide the hour or the day are planned
with :func:`drain.planning.plan.plan_in` in the caller's frame; nothing here reads
a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from drain.planning.cron import ScheduleError
from drain.planning.plan import (
    GITHUB_ACTIONS_MIN_INTERVAL,
    Frame,
    Plan,
    RunSchedule,
    Trigger,
    plan_in,
)


@dataclass(frozen=True)
class Candidate:
    """A schedule ``--suggest`` may propose: every k minutes or every h hours."""

    expression: str
    label: str
    interval: float

    def as_dict(self, result: Plan | None = None) -> dict[str, Any]:
        """The candidate for ``--json``, with the figures of its plan when it has one."""
        entry: dict[str, Any] = {
            "expression": self.expression,
            "label": self.label,
            "interval_seconds": self.interval,
        }
        if result is not None:
            entry["suspends"] = result.suspends
            entry["window"] = result.window.as_dict(per_day=True)
        return entry


@dataclass(frozen=True)
class Suggestions:
    """What ``--suggest`` found among the candidates whose worst wait fits.

    ``sleeping`` lets the compute suspend, least awake time first; ``sleepless``
    never does. When nothing fits and sleeps, ``nearest`` is the candidate with the
    shortest wait that does, so the answer can say what sleep would cost.
    """

    max_wait: float
    idle_timeout: float
    awake_span: float
    sleeping: tuple[tuple[Candidate, Plan], ...]
    sleepless: tuple[Candidate, ...]
    nearest: tuple[Candidate, Plan] | None

    def as_dict(self, sources: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The suggestions for ``--json``; ``sources`` (where ``d`` and ``T`` came from) is the caller's."""
        return {
            "max_wait_seconds": self.max_wait,
            **(sources or {}),
            "awake_span_seconds": self.awake_span,
            "can_sleep": bool(self.sleeping),
            "suggestions": [candidate.as_dict(result) for candidate, result in self.sleeping],
            "never_suspend": [candidate.as_dict() for candidate in self.sleepless],
            "nearest": self.nearest[0].as_dict(self.nearest[1]) if self.nearest else None,
        }


MINUTE_STEPS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)


HOUR_STEPS = (1, 2, 3, 4, 6, 8, 12, 24)


def candidates() -> tuple[Candidate, ...]:
    """Every k minutes and every h hours that divide the hour or the day evenly.

    Only even divisors keep the gaps equal: ``*/7`` would run at :56 and again at
    :00, four minutes later.
    """
    minutes = [
        Candidate("* * * * *" if k == 1 else f"*/{k} * * * *", f"every {k} min", k * 60.0)
        for k in MINUTE_STEPS
    ]
    hours = [
        Candidate(_hourly(h), "every hour" if h == 1 else f"every {h} h", h * 3600.0)
        for h in HOUR_STEPS
    ]
    return (*minutes, *hours)


def _hourly(hours: int) -> str:
    if hours == 1:
        return "0 * * * *"
    return "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"


def suggest_in(frame: Frame, template: RunSchedule, *, max_wait: float) -> Suggestions:
    """The candidate schedules whose worst wait is at most ``max_wait``, least awake first.

    ``template`` carries ``d`` and the rest of the run's settings; only its
    expression is replaced. When none of the fitting ones lets the compute sleep,
    the shortest wait that would is found too, so the answer says what it costs.
    """
    if max_wait <= 0:
        raise ScheduleError("--max-wait must be above 0")
    idle_timeout = frame.idle_timeout
    span = template.run_seconds + idle_timeout
    minimum = GITHUB_ACTIONS_MIN_INTERVAL if template.trigger is Trigger.GITHUB_ACTIONS else 0.0
    sleeping: list[tuple[Candidate, Plan]] = []
    sleepless: list[Candidate] = []
    nearest: tuple[Candidate, Plan] | None = None
    for candidate in sorted(candidates(), key=lambda c: c.interval):
        if candidate.interval < minimum:
            continue
        if candidate.interval > max_wait and (sleeping or nearest):
            break
        if candidate.interval < 3600 and candidate.interval <= span:
            # A minute step keeps its gaps equal through any clock change, so no
            # gap can outlast d + T: no need to walk a week of fire times.
            if candidate.interval <= max_wait:
                sleepless.append(candidate)
            continue
        plan = plan_in(
            frame, [replace(template, expression=candidate.expression, source=candidate.label)]
        )
        fits = plan.window.worst_wait_seconds <= max_wait
        if fits and plan.suspends:
            sleeping.append((candidate, plan))
        elif fits:
            sleepless.append(candidate)
        elif plan.suspends and nearest is None:
            nearest = (candidate, plan)
    sleeping.sort(
        key=lambda pair: (pair[1].window.awake_seconds, pair[1].window.worst_wait_seconds)
    )
    return Suggestions(
        max_wait,
        idle_timeout,
        span,
        tuple(sleeping),
        tuple(sleepless),
        None if sleeping else nearest,
    )
