"""Cron expressions in a time zone: checking them, and the times they fire.

Two users share this module: ``drain plan``, which lays a week of a schedule's
fires on a timeline, and the recurring jobs a run fires (:mod:`drain.store.recurring`).
Both must agree on what a schedule means on the days a clock changes, so the rule
lives here once: croniter yields the fire times, and a fixed-time job (minute and
hour fields both fixed) fires once in an hour the clock repeats, as cron does.
On the spring-forward day croniter moves a fire that falls in the skipped hour to
the first minute after it (02:30 Europe/Berlin fires at 03:00), once.

Nothing here reads a clock or a database: every moment is an input, as POSIX
seconds, because subtracting two aware datetimes of one zone ignores a
daylight-saving change that lies between them. croniter is imported on first use,
so a run with no schedule due never loads it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, tzinfo
from typing import Literal, NamedTuple, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from drain.core.errors import UsageError

CatchUp = Literal["latest", "all", "none"]
CATCH_UP_POLICIES: tuple[CatchUp, ...] = get_args(CatchUp)
DEFAULT_CATCH_UP: CatchUp = "latest"
# Missed fires are counted (to report them) this far past what is enqueued; past it
# the report says "more than". Counting walks croniter back one fire at a time.
COUNT_BOUND = 1000

# croniter needs a start to check an expression; a fixed one keeps the clock out of it.
_ANY_TIME = datetime(2000, 1, 1, tzinfo=UTC)
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# Each field and the values it takes; day-of-week 7 is Sunday again, as in cron.
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)


class ScheduleError(UsageError):
    """A schedule that cannot be planned: a bad expression, or one that never fires."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``, or a usage error that says it is unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"unknown time zone {name!r}; use an IANA name such as UTC or Europe/Berlin"
        ) from None


def normalize(expression: str) -> str:
    """The five-field form of ``expression``, or a usage error with croniter's reason.

    Cron, Kubernetes and the crontab macros all use five fields; croniter also
    takes a sixth (seconds) and seventh (year) field, which no trigger drain runs
    under understands, so those are refused rather than silently misread.
    """
    text = " ".join(expression.split())
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            names = ", ".join(MACROS)
            raise ScheduleError(f"bad cron expression {expression!r}: use one of {names}")
        return macro
    fields = text.split(" ") if text else []
    if len(fields) != 5:
        raise ScheduleError(
            f"bad cron expression {expression!r}: it needs five fields "
            f"(minute hour day-of-month month day-of-week), not {len(fields)}"
        )
    check_fields(fields, expression)
    from croniter import CroniterError, croniter  # imported when planning, not at CLI start-up

    try:
        croniter(text, _ANY_TIME)
    except CroniterError as exc:
        reason = " ".join(str(exc).split())
        raise ScheduleError(f"bad cron expression {expression!r}: {reason}") from None
    return text


def check_fields(fields: list[str], expression: str) -> None:
    """Refuse a value or a step beyond its field, naming the field and what it takes.

    croniter takes ``*/61 * * * *``, ``0-59/1000 * * * *`` and ``0 */25 * * *``
    and fires them at the field's first value only: hourly (or daily) where a
    longer gap was meant, on every run for ever. cronie warns of a step larger
    than its field's span and refuses a value outside it, as robfig/cron (behind
    Kubernetes CronJobs) does; drain refuses both. Names (``mon``, ``jan``) and
    croniter's extensions (``L``, ``5#3``) are left to croniter to judge.
    """
    for (field, low, high), text in zip(FIELDS, fields, strict=True):
        takes = f"the {field} field takes {low}-{high}"
        for part in text.split(","):
            span, slash, step = part.partition("/")
            for number in span.split("-"):
                if _is_number(number) and not low <= int(number) <= high:
                    raise ScheduleError(
                        f"bad cron expression {expression!r}: {number} is out of range: {takes}"
                    )
            if slash and _is_number(step) and not 1 <= int(step) <= high - low:
                raise ScheduleError(
                    f"bad cron expression {expression!r}: step /{step} is out of range: "
                    f"{takes}, and steps of 1 to {high - low}"
                )


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _is_fixed_time(expression: str) -> bool:
    """True when cron runs this job once in an hour the clock repeats.

    Cron treats a job whose minute and hour fields are both fixed (neither starts
    with ``*``) as a fixed-time job, and skips its second run when a
    daylight-saving change repeats an hour; ``0 * * * *`` runs in both copies.
    croniter yields both copies, so fixed-time jobs lose the second one here.
    """
    minute, hour = expression.split(" ")[:2]
    return not (minute.startswith("*") or hour.startswith("*"))


def _is_repeated_hour(moment: datetime, where: tzinfo) -> bool:
    local = moment.astimezone(where)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def fire_times(
    expression: str, where: tzinfo, begin: float, end: float
) -> tuple[list[float], float]:
    """The fire times in ``[begin, end)`` and the first one at or after ``end``.

    Each call builds its own croniter iterator: an iterator is stateful, and one
    shared between schedules or windows would hand out times from the wrong place.
    """
    from croniter import CroniterBadDateError, croniter

    expression = normalize(expression)
    fixed = _is_fixed_time(expression)
    # get_next returns times strictly after its start; fires fall on whole minutes.
    iterator = croniter(expression, datetime.fromtimestamp(begin - 1, where))
    fires: list[float] = []
    while True:
        try:
            moment: datetime = iterator.get_next(datetime)
        except CroniterBadDateError:
            raise ScheduleError(f"the schedule {expression!r} never fires") from None
        if fixed and _is_repeated_hour(moment, where):
            continue
        stamp = moment.timestamp()
        if stamp >= end:
            return fires, stamp
        if stamp >= begin:
            fires.append(stamp)


def previous_fire(expression: str, where: tzinfo, moment: float) -> float | None:
    """The last fire time before ``moment``, or None when there is none to find."""
    from croniter import CroniterBadDateError, croniter

    expression = normalize(expression)
    fixed = _is_fixed_time(expression)
    iterator = croniter(expression, datetime.fromtimestamp(moment, where))
    while True:
        try:
            found: datetime = iterator.get_prev(datetime)
        except CroniterBadDateError:
            return None
        if not (fixed and _is_repeated_hour(found, where)):
            return found.timestamp()


class DueFires(NamedTuple):
    """What a schedule owes at one moment: the fires to enqueue and where it goes next."""

    fires: tuple[float, ...]  # ascending; what the run enqueues
    latest: float | None  # the latest fire due, recorded as the last fire whatever was enqueued
    skipped: int  # due fires not enqueued, counted up to COUNT_BOUND
    more_skipped: bool  # more fires were missed than ``skipped`` counts
    following: float  # the first fire after the moment: the schedule's next fire


def next_fire(expression: str, where: tzinfo, moment: float) -> float:
    """The first fire strictly after ``moment``; a schedule that never fires is an error."""
    _, following = fire_times(expression, where, math.floor(moment) + 1, math.floor(moment) + 1)
    return following


def due_fires(
    expression: str,
    where: tzinfo,
    *,
    first: float,
    now: float,
    catch_up: CatchUp,
    limit: int,
    window: float,
) -> DueFires:
    """The fires in ``[first, now]`` a run enqueues under ``catch_up``, and the next one.

    ``first`` is the schedule's recorded next fire. ``latest`` enqueues only the
    most recent due fire; ``all`` every due fire, but no more than the ``limit``
    most recent (older ones are skipped and reported); ``none`` enqueues the most
    recent one only if it came due within ``window`` seconds of ``now`` (the
    usual gap between runs), and skips it otherwise. The walk goes back from
    ``now``, so a schedule asleep for a year costs no more than its bound.
    """
    from croniter import CroniterBadDateError, croniter

    expression = normalize(expression)
    fixed = _is_fixed_time(expression)
    keep = limit if catch_up == "all" else 1
    iterator = croniter(expression, datetime.fromtimestamp(math.floor(now) + 1, where))
    due: list[float] = []
    while len(due) < keep + COUNT_BOUND:
        try:
            moment: datetime = iterator.get_prev(datetime)
        except CroniterBadDateError:
            break
        if moment.timestamp() < first:
            break
        if fixed and _is_repeated_hour(moment, where):
            continue
        due.append(moment.timestamp())
    enqueued = due[:keep]
    if catch_up == "none" and due and now - due[0] > window:
        enqueued = []
    return DueFires(
        fires=tuple(reversed(enqueued)),
        latest=due[0] if due else None,
        skipped=len(due) - len(enqueued),
        more_skipped=len(due) >= keep + COUNT_BOUND,
        following=next_fire(expression, where, now),
    )
