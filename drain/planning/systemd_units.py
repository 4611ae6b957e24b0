"""Schedules in systemd units: an OnCalendar= timer, and the service it starts.

A timer holds the schedule (``OnCalendar=``, turned into a cron expression), its
service the command and its time limit (``TimeoutStartSec=``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from drain.core.durations import parse_duration
from drain.planning.cron import ScheduleError
from drain.planning.plan import Trigger
from drain.planning.run_commands import FoundSchedule, command_words, run_options

_ZONE = re.compile(r"UTC|[A-Za-z][\w+-]*(/[\w+-]+)+")
_SPAN = re.compile(r"(\s*\d+(\.\d+)?\s*[a-z]*)+\s*")
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")
_SPAN_UNITS = {
    **dict.fromkeys(("", "s", "sec", "second", "seconds"), "s"),
    **dict.fromkeys(("ms", "msec"), "ms"),
    **dict.fromkeys(("m", "min", "minute", "minutes"), "m"),
    **dict.fromkeys(("h", "hr", "hour", "hours"), "h"),
    **dict.fromkeys(("d", "day", "days"), "d"),
}
_SYSTEMD_SHORTHANDS = {
    "minutely": "* * * * *",
    "hourly": "0 * * * *",
    "daily": "0 0 * * *",
    "weekly": "0 0 * * 1",
    "monthly": "0 0 1 * *",
    "quarterly": "0 0 1 1,4,7,10 *",
    "semiannually": "0 0 1 1,7 *",
    "yearly": "0 0 1 1 *",
    "annually": "0 0 1 1 *",
}


def sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file's ``key=value`` pairs per section; keys such as OnCalendar repeat."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            continue
        key, equals, value = line.partition("=")
        if equals:
            sections.setdefault(current, []).append((key.strip(), value.strip()))
    return sections


def read_timer(path: Path, text: str) -> list[FoundSchedule]:
    """Each ``OnCalendar=`` of a timer, with the options of the service it starts."""
    pairs = sections(text).get("Timer", [])
    calendars = [value for key, value in pairs if key == "OnCalendar"]
    if not calendars:
        raise ScheduleError(
            f"{path}: no OnCalendar= in [Timer]; only calendar timers can be planned"
        )
    service = _service(path, dict(pairs).get("Unit"))
    options = run_options(service.words, service.env, str(path))
    found: list[FoundSchedule] = []
    for calendar in calendars:
        expression, timezone = _calendar_to_cron(calendar, str(path))
        found.append(
            FoundSchedule(
                expression=expression,
                source=f"{path}: OnCalendar={calendar}",
                trigger=Trigger.SYSTEMD,
                timezone=timezone,
                deadline_seconds=service.timeout,
                runs_drain=True,
                **options,
            )
        )
    return found


@dataclass(frozen=True)
class _Service:
    """What a timer's service says about the run: its command, environment and time limit."""

    words: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None


def _service(timer: Path, unit: str | None) -> _Service:
    """The service beside the timer (``Unit=``, else the timer's own name), if there is one."""
    path = timer.with_name(unit or f"{timer.stem}.service")
    if not path.is_file():
        return _Service()
    pairs = sections(path.read_text(encoding="utf-8")).get("Service", [])
    words: list[str] = []
    env: dict[str, str] = {}
    timeouts: dict[str, str] = {}
    for key, value in pairs:
        if key == "ExecStart":
            words.extend(command_words(value.lstrip("-@+!:")))
        elif key == "Environment":
            for assignment in command_words(value):
                name, _, setting = assignment.partition("=")
                env[name] = setting
        elif key in ("TimeoutStartSec", "TimeoutSec"):
            timeouts[key] = value
    limit = timeouts.get("TimeoutStartSec", timeouts.get("TimeoutSec"))
    timeout = None if limit is None else _timespan(limit, f"{path}: TimeoutStartSec")
    return _Service(words, env, timeout)


def _timespan(value: str, where: str) -> float | None:
    """A systemd time span (``420``, ``7min``, ``5min 30s``); ``infinity`` is no limit."""
    text = value.strip().lower()
    if text == "infinity":
        return None
    parts = _SPAN_PART.findall(text)
    if not parts or not _SPAN.fullmatch(text) or any(u not in _SPAN_UNITS for _, u in parts):
        raise ScheduleError(f"{where}: {value!r} is not a time span")
    return parse_duration("".join(number + _SPAN_UNITS[unit] for number, unit in parts))


def _calendar_to_cron(calendar: str, where: str) -> tuple[str, str | None]:
    """A systemd calendar event as a cron expression and its time zone.

    Covers the shorthands and ``[weekdays] [*-month-day] [hour:minute[:00]] [zone]``
    with lists, ranges (``..``) and repetitions (``/``); anything else (years,
    seconds other than 0, ``~``) is refused rather than approximated.
    """
    text = " ".join(calendar.split())
    shorthand = _SYSTEMD_SHORTHANDS.get(text.lower())
    if shorthand is not None:
        return shorthand, None
    tokens = text.split(" ")
    timezone = tokens.pop() if tokens and _ZONE.fullmatch(tokens[-1]) else None
    try:
        return _calendar_fields(tokens), timezone
    except (ValueError, IndexError):
        raise ScheduleError(
            f"{where}: OnCalendar={calendar} has no cron equivalent drain understands; "
            "give the schedule as a cron expression instead"
        ) from None


def _calendar_fields(tokens: list[str]) -> str:
    weekdays = "*"
    if tokens and tokens[0][:1].isalpha():
        weekdays = tokens.pop(0).lower().replace("..", "-")
    date = tokens.pop(0) if tokens and "-" in tokens[0] else "*-*-*"
    clock = tokens.pop(0) if tokens and ":" in tokens[0] else "00:00:00"
    if tokens:
        raise ValueError(tokens[0])
    year, month, day = date.split("-")
    parts = clock.split(":")
    if year != "*" or len(parts) not in (2, 3) or (len(parts) == 3 and int(parts[2]) != 0):
        raise ValueError(date)
    fields = [
        _cron_field(parts[1], 0, 59),
        _cron_field(parts[0], 0, 23),
        _cron_field(day, 1, 31),
        _cron_field(month, 1, 12),
        weekdays,
    ]
    return " ".join(fields)


def _cron_field(text: str, low: int, high: int) -> str:
    """One systemd component (``*``, ``5``, ``1,15``, ``1..5``, ``0/15``) in cron's syntax."""
    parts: list[str] = []
    for part in text.split(","):
        if part == "*":
            parts.append("*")
        elif "/" in part:
            base, step = part.split("/")
            start = "*" if base == "*" or int(base) == low else f"{int(base)}-{high}"
            parts.append(f"{start}/{int(step)}")
        elif ".." in part:
            first, last = part.split("..")
            parts.append(f"{int(first)}-{int(last)}")
        else:
            parts.append(str(int(part)))
    return ",".join(parts)
