"""``drain plan`` as one call: a request of what was asked, an answer of what was found.

The command line parses the options into a :class:`PlanRequest`; :func:`answer`
reads the schedules, checks every one before anything connects, asks for the
recorded runs and recurring jobs only when the request needs them (the readers
are handed in, so planning never loads a database driver), and plans or
suggests. What the answer says in words is the command line's business.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from drain.core.errors import EXIT_FAILURE, EXIT_OK, UsageError
from drain.planning import cron, fire_delays, plan
from drain.planning import sources as schedules
from drain.planning.suggestions import Suggestions, suggest_in


class Sources(NamedTuple):
    """Where ``d`` and ``T`` came from, said in the report and in the JSON."""

    run_seconds: schedules.RunSecondsSource
    idle_timeout: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_seconds_from": self.run_seconds.text,
            "history_runs": self.run_seconds.runs,
            "history_days": self.run_seconds.history_days,
            "idle_timeout_from": self.idle_timeout,
        }


class Recurring(NamedTuple):
    """The recurring jobs of the queue table, as ``--schedules-from-db`` read them."""

    table: str  # the schedules table, schema-qualified, for the report
    jobs_table: str
    jobs: list[fire_delays.Recurring]


class Delays(NamedTuple):
    """The recurring jobs' delays under one plan's drain runs."""

    source: Recurring
    found: tuple[fire_delays.FireDelays, ...]


class PlanRequest(NamedTuple):
    """Everything ``drain plan`` was asked, parsed; ``today`` is the caller's clock.

    ``dsn`` is only whether one was given (the readers know where to connect).
    """

    expressions: tuple[str, ...]
    files: tuple[Path, ...]
    settings: schedules.RunSettings
    idle_timeout: float | None
    provider: plan.ProviderName | None
    tz: str
    window: float
    start: str | None
    compute_units: float
    suggest: bool
    max_wait: float | None
    dsn: bool
    history_days: float
    schedules_from_db: bool
    today: date


class PlanAnswer(NamedTuple):
    """What was found: suggestions, or one plan per group of schedules, and where d and T
    came from. ``single``: the schedules were given together (arguments), one report."""

    sources: Sources
    suggestions: Suggestions | None = None
    plans: tuple[tuple[str | None, plan.Plan, Delays | None], ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def single(self) -> bool:
        return len(self.plans) == 1 and self.plans[0][0] is None

    @property
    def suspends(self) -> bool:
        if self.suggestions is not None:
            return bool(self.suggestions.sleeping)
        return all(result.suspends for _, result, _ in self.plans)

    @property
    def exit_code(self) -> int:
        """0 when the compute can suspend (or a schedule was found that lets it), else 1."""
        return EXIT_OK if self.suspends else EXIT_FAILURE


def frame_of(request: PlanRequest) -> tuple[plan.Frame, str]:
    """The window and platform of the plan, and where its ``T`` came from."""
    chosen = plan.PROVIDERS[request.provider] if request.provider is not None else None
    idle, idle_source = schedules.idle_timeout(request.idle_timeout, chosen)
    zone = cron.zone(request.tz)
    frame = plan.Frame(
        start=window_start(request.start, request.today, zone),
        window=request.window,
        timezone=request.tz,
        idle_timeout=idle,
        compute_units=request.compute_units,
        provider=chosen,
    )
    return frame, idle_source


def window_start(text: str | None, today: date, zone: Any) -> datetime:
    """The window's start; by default the coming Monday, so the days line up with a week."""
    if text is None:
        monday = today + timedelta(days=(7 - today.weekday()) % 7)
        return datetime(monday.year, monday.month, monday.day, tzinfo=zone)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--start: not an ISO 8601 date or time: {text!r}, e.g. 2026-11-30 or "
            "2026-11-30T08:00+01:00"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def answer(
    request: PlanRequest,
    frame: plan.Frame,
    idle_source: str,
    read_history: Callable[[float], schedules.History],
    read_recurring: Callable[[], Recurring],
) -> PlanAnswer:
    """Plan (or suggest) what ``request`` asks, in ``frame``.

    Every schedule is read and checked before a reader is called, so a typo in a
    file never costs a connection; the recurring jobs are read only with
    ``schedules_from_db``, the recorded runs only when ``d`` is not given.
    """
    groups: list[schedules.Group] = []
    skipped: list[tuple[str, str]] = []
    expressions, files = list(request.expressions), list(request.files)
    if request.suggest:
        schedules.requested(True, request.max_wait, expressions, files)
    else:
        groups, skipped = schedules.requested_groups(expressions, files)
    recurring = None
    if request.schedules_from_db:
        if not request.dsn:
            raise UsageError(
                "--schedules-from-db reads the recurring jobs of a database: give --dsn"
            )
        if request.suggest:
            raise UsageError(
                "--schedules-from-db reports on the schedules you give; --suggest proposes its own"
            )
        recurring = read_recurring()
    history = None
    dsn = "given" if request.dsn else None
    if schedules.wants_history(request.settings, dsn, request.history_days):
        history = read_history(request.history_days)
    settings, d_source = schedules.settle_run_seconds(request.settings, history)
    sources = Sources(d_source, idle_source)
    if request.suggest and request.max_wait is not None:
        template = schedules.template(settings)
        found = suggest_in(frame, template, max_wait=request.max_wait)
        return PlanAnswer(sources, suggestions=found)
    plans = []
    for group in groups:
        resolved = [schedules.resolve(entry, settings) for entry in group.schedules]
        result = plan.plan_in(frame, resolved, max_wait=request.max_wait)
        plans.append((group.source, result, _delays(frame, result, recurring)))
    return PlanAnswer(sources, plans=tuple(plans), skipped=tuple(skipped))


def _delays(frame: plan.Frame, result: plan.Plan, recurring: Recurring | None) -> Delays | None:
    if recurring is None:
        return None
    return Delays(recurring, fire_delays.fire_delays(frame, result.schedules, recurring.jobs))
