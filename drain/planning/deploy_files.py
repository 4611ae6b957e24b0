"""Reading schedules out of deploy files: crontab files, Kubernetes CronJobs, KEDA
ScaledJobs, GitHub Actions workflows and systemd timers.

``drain plan --from FILE`` should judge the schedule that will actually run, not a
copy retyped on the command line that has drifted from it. Each reader returns the
cron expression of every schedule in the file together with what the file says
about the run it starts (``--max-seconds``, ``--grace-seconds``, ``--lease``, the
time zone, a Kubernetes ``activeDeadlineSeconds``), so the plan's warnings compare
the real values. Those options are found by the names, variables and parsers of
:mod:`drain.core.settings`, the ones ``drain run`` itself reads.

When some entries of a file run drain and others run something else, only drain's
entries are kept: the plan is about the runs that wake the queue's database.

A KEDA ScaledJob has no schedule of its own, but its scaler polls the database
every ``pollingInterval`` seconds, and each poll is a query that wakes a compute
that suspends on no queries: the polling is the schedule that decides whether the
compute sleeps, so it is read as one (each poll planned as a run of the budget).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path, PurePath
from typing import Any

from drain.core import settings as run_settings
from drain.core.durations import parse_duration
from drain.core.errors import UsageError
from drain.planning.cron import ScheduleError
from drain.planning.plan import Trigger

# The settings of ``drain run`` a plan needs, and the field of FoundSchedule each fills.
_READ = {"max_seconds": "max_seconds", "grace_seconds": "grace_seconds", "lease": "lease_seconds"}
_WANTED = [run_settings.BY_KEY[key] for key in _READ]
_FLAGS = {setting.option: setting for setting in _WANTED}
_VARIABLES = {setting.envvar: setting for setting in _WANTED}
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
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


@dataclass(frozen=True)
class FoundSchedule:
    """One schedule read from a file, with what the file says about its runs."""

    expression: str
    source: str
    trigger: Trigger
    timezone: str | None = None
    max_seconds: float | None = None
    grace_seconds: float | None = None
    lease_seconds: float | None = None
    deadline_seconds: float | None = None
    runs_drain: bool = field(default=False, compare=False)


def read_schedules(path: Path) -> list[FoundSchedule]:
    """Every schedule in ``path``, whichever of the three formats it is in."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ScheduleError(f"cannot read {path}: {reason}") from None
    kind = _kind_of(path, text)
    if kind == "service":
        raise ScheduleError(f"{path}: {service_note(path)}")
    if kind == "yaml":
        found = _yaml(path, text)
    elif kind == "systemd":
        found = _systemd(path, text)
    else:
        found = _crontab(path, text)
    if not found:
        expected = {
            "yaml": "a Kubernetes CronJob, a KEDA ScaledJob or a GitHub Actions schedule",
            "systemd": "an OnCalendar= timer",
        }.get(kind, "a crontab line")
        raise ScheduleError(f"no schedule found in {path}: expected {expected}")
    runs_drain = [entry for entry in found if entry.runs_drain]
    return runs_drain or found


def _kind_of(path: Path, text: str) -> str:
    if path.suffix == ".timer" or re.search(r"^\s*\[Timer\]", text, re.MULTILINE):
        return "systemd"
    if path.suffix == ".service" or re.search(r"^\s*\[Service\]", text, re.MULTILINE):
        return "service"
    if path.suffix in {".yaml", ".yml", ".json"}:
        return "yaml"
    if re.search(r"^\s*(apiVersion|kind|on|jobs)\s*:", text, re.MULTILINE):
        return "yaml"
    return "crontab"


def file_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def service_note(path: Path) -> str:
    """What to plan instead of a systemd service: the timer that starts it."""
    timers = [
        timer
        for timer in sorted(path.parent.glob("*.timer"))
        if timer.stem == path.stem
        or dict(sections(file_text(timer)).get("Timer", [])).get("Unit") == path.name
    ]
    if timers:
        return f"a systemd service holds no schedule; its timer does: --from {timers[0]}"
    return f"a systemd service holds no schedule; plan the .timer that starts {path.name}"


# -- command lines -------------------------------------------------------------------


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _words(command: str | Sequence[str]) -> list[str]:
    """The words of a command, with ``sh -c "drain run ..."`` opened up one level."""
    words = _split(command) if isinstance(command, str) else list(command)
    opened: list[str] = []
    for word in words:
        opened.extend(_split(word) if " " in word.strip() else [word])
    return opened


def _runs_drain(words: Sequence[str]) -> bool:
    after_m = [later for earlier, later in pairwise(words) if earlier == "-m"]
    return any(PurePath(word).name == "drain" for word in words) or "drain" in after_m


def _seconds(setting: run_settings.Setting, value: str, name: str, where: str) -> float:
    try:
        return float(setting.parse(value, name))
    except UsageError:
        raise ScheduleError(
            f"{where}: {name} {value!r} is not a duration; fix it, or give --run-seconds"
        ) from None


def _run_options(words: Sequence[str], env: Mapping[str, str], where: str) -> dict[str, float]:
    """``--max-seconds`` and friends from a command and its environment; the last word wins."""
    values = {
        _READ[setting.key]: _seconds(setting, env[name], name, where)
        for name, setting in _VARIABLES.items()
        if name in env
    }
    for index, word in enumerate(words):
        name, equals, value = word.partition("=")
        if name in _VARIABLES and equals:
            setting = _VARIABLES[name]
        elif name in _FLAGS and equals:
            setting = _FLAGS[name]
        elif word in _FLAGS and index + 1 < len(words):
            setting, name, value = _FLAGS[word], word, words[index + 1]
        else:
            continue
        values[_READ[setting.key]] = _seconds(setting, value, name, where)
    return values


# -- crontab ------------------------------------------------------------------------


def _crontab(path: Path, text: str) -> list[FoundSchedule]:
    """Lines of five time fields (or an ``@`` macro) and a command.

    Comments, blank lines and variable assignments are skipped; ``CRON_TZ`` sets
    the time zone of the lines after it and ``DRAIN_*`` variables reach the
    commands, as cron does. ``@reboot`` is not a schedule and is left out.
    """
    env: dict[str, str] = {}
    found: list[FoundSchedule] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        assignment = _ASSIGNMENT.match(line)
        if assignment:
            env[assignment.group(1)] = _unquote(assignment.group(2))
            continue
        where = f"{path}:{number}"
        entry = _crontab_line(line, where, env)
        if entry is not None:
            found.append(entry)
    return found


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _crontab_line(line: str, where: str, env: Mapping[str, str]) -> FoundSchedule | None:
    if line.startswith("@"):
        macro, _, command = line.partition(" ")
        if macro.lower() == "@reboot":
            return None
        expression = macro
    else:
        fields = line.split(None, 5)
        if len(fields) < 6:
            raise ScheduleError(
                f"{where}: not a crontab line (five time fields, then a command): {line!r}"
            )
        expression, command = " ".join(fields[:5]), fields[5]
    words = _words(command)
    return FoundSchedule(
        expression=expression,
        source=where,
        trigger=Trigger.CRON,
        timezone=env.get("CRON_TZ") or None,
        runs_drain=_runs_drain(words),
        **_run_options(words, env, where),
    )


# KEDA's pollingInterval when a ScaledJob gives none (keda.sh/v1alpha1).
KEDA_DEFAULT_POLLING_SECONDS = 30

# -- YAML: Kubernetes and GitHub Actions ------------------------------------------------


def _yaml(path: Path, text: str) -> list[FoundSchedule]:
    import yaml  # loaded for a YAML file only: drain plan --suggest reads none

    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise ScheduleError(f"{path}: not valid YAML: {reason}") from None
    workflows = [doc for doc in documents if isinstance(doc, dict) and _triggers(doc)]
    if workflows:
        return [entry for doc in workflows for entry in _workflow(path, doc)]
    return _kubernetes(path, documents)


def _kubernetes(path: Path, documents: list[Any]) -> list[FoundSchedule]:
    """Every CronJob and ScaledJob in a (possibly multi-document) manifest.

    Suspended CronJobs do not run, so they are left out.
    """
    found: list[FoundSchedule] = []
    for item in _manifest_items(documents):
        if item.get("kind") == "CronJob":
            entry = _cronjob(path, item)
        elif item.get("kind") == "ScaledJob" and str(item.get("apiVersion", "")).startswith(
            "keda.sh/"
        ):
            entry = _scaledjob(path, item)
        else:
            continue
        if entry is not None:
            found.append(entry)
    return found


def _manifest_items(documents: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for document in documents:
        if not isinstance(document, dict):
            continue
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            yield from (item for item in document["items"] if isinstance(item, dict))
        else:
            yield document


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _cronjob(path: Path, item: dict[str, Any]) -> FoundSchedule | None:
    name = _mapping(item.get("metadata")).get("name", "(unnamed)")
    where = f"{path}: CronJob {name}"
    spec = _mapping(item.get("spec"))
    schedule = spec.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        raise ScheduleError(f"{where}: spec.schedule is missing")
    if spec.get("suspend") is True:
        return None
    job = _mapping(_mapping(spec.get("jobTemplate")).get("spec"))
    deadline = job.get("activeDeadlineSeconds")
    if deadline is not None and not isinstance(deadline, int | float):
        raise ScheduleError(f"{where}: activeDeadlineSeconds {deadline!r} is not a number")
    words, env = _containers(_mapping(_mapping(job.get("template")).get("spec")))
    timezone = spec.get("timeZone")
    return FoundSchedule(
        expression=schedule,
        source=where,
        trigger=Trigger.KUBERNETES,
        timezone=str(timezone) if timezone else None,
        deadline_seconds=float(deadline) if deadline is not None else None,
        runs_drain=_runs_drain(words),
        **_run_options(words, env, where),
    )


def _scaledjob(path: Path, item: dict[str, Any]) -> FoundSchedule:
    """A KEDA ScaledJob: its scaler's polling as the schedule, its Job's run as the run."""
    name = _mapping(item.get("metadata")).get("name", "(unnamed)")
    spec = _mapping(item.get("spec"))
    given = spec.get("pollingInterval")
    seconds = KEDA_DEFAULT_POLLING_SECONDS if given is None else given
    where = f"{path}: ScaledJob {name}"
    expression = polling_cron(seconds, where, defaulted=given is None)
    job = _mapping(spec.get("jobTargetRef"))
    deadline = job.get("activeDeadlineSeconds")
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int)):
        raise ScheduleError(f"{where}: activeDeadlineSeconds {deadline!r} is not a number")
    words, env = _containers(_mapping(_mapping(job.get("template")).get("spec")))
    source = (
        f"{where}, its scaler's polling (pollingInterval {seconds} s): each poll is a query "
        "that wakes the compute, planned as a run of the budget"
    )
    return FoundSchedule(
        expression=expression,
        source=source,
        trigger=Trigger.KUBERNETES,
        timezone="UTC",
        deadline_seconds=float(deadline) if deadline is not None else None,
        runs_drain=_runs_drain(words),
        **_run_options(words, env, where),
    )


def polling_cron(seconds: Any, where: str, *, defaulted: bool = False) -> str:
    """A polling interval as the five-field cron expression that fires as often.

    Exact only when the polls line up with the clock: a multiple of 60 s that
    divides an hour, or of an hour that divides a day; any other interval is
    refused rather than approximated, since the plan would judge another schedule.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
        raise ScheduleError(
            f"{where}: pollingInterval {seconds!r} is not a whole number of seconds above 0"
        )
    if seconds % 60 == 0 and 3600 % seconds == 0:
        minutes = seconds // 60
        return {1: "* * * * *", 60: "0 * * * *"}.get(minutes, f"*/{minutes} * * * *")
    if seconds % 3600 == 0 and 86400 % seconds == 0:
        hours = seconds // 3600
        return "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"
    shown = f"{seconds} s (KEDA's default, as none is set)" if defaulted else f"{seconds} s"
    awake = " (and a poll that often keeps the compute awake)" if seconds < 60 else ""
    raise ScheduleError(
        f"{where}: pollingInterval {shown} has no cron equivalent to plan{awake}; set it "
        "to a multiple of 60 s that divides an hour, or of 3600 s that divides a day, e.g. 1200"
    )


def _containers(pod: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The command words and plain environment values of the pod's containers."""
    words: list[str] = []
    env: dict[str, str] = {}
    containers = pod.get("containers")
    for container in containers if isinstance(containers, list) else []:
        container = _mapping(container)
        for key in ("command", "args"):
            part = container.get(key)
            if isinstance(part, list):
                words.extend(_words([str(word) for word in part]))
        variables = container.get("env")
        for variable in variables if isinstance(variables, list) else []:
            variable = _mapping(variable)
            if "name" in variable and "value" in variable:
                env[str(variable["name"])] = str(variable["value"])
    return words, env


def _triggers(document: dict[Any, Any]) -> dict[str, Any]:
    """A workflow's ``on:`` mapping; YAML 1.1 reads a bare ``on`` key as True."""
    if "jobs" not in document:
        return {}
    return _mapping(document.get("on", document.get(True)))


def _workflow(path: Path, document: dict[Any, Any]) -> list[FoundSchedule]:
    """Each ``on.schedule`` cron of a GitHub Actions workflow; GitHub reads cron in UTC."""
    schedules = _triggers(document).get("schedule")
    crons = [
        str(entry["cron"])
        for entry in (schedules if isinstance(schedules, list) else [])
        if isinstance(entry, dict) and "cron" in entry
    ]
    words, env, timeout = _workflow_job(_mapping(document.get("jobs")))
    env = {**_plain_env(document.get("env")), **env}
    return [
        FoundSchedule(
            expression=cron,
            source=f"{path}: schedule {cron}",
            trigger=Trigger.GITHUB_ACTIONS,
            timezone="UTC",
            deadline_seconds=timeout,
            runs_drain=_runs_drain(words),
            **_run_options(words, env, f"{path}: schedule {cron}"),
        )
        for cron in crons
    ]


def _workflow_job(jobs: dict[str, Any]) -> tuple[list[str], dict[str, str], float | None]:
    """The words, environment and ``timeout-minutes`` of the job that runs drain."""
    candidates = []
    for job in (_mapping(job) for job in jobs.values()):
        words: list[str] = []
        env = _plain_env(job.get("env"))
        steps = job.get("steps")
        for step in (_mapping(step) for step in (steps if isinstance(steps, list) else [])):
            for line in str(step.get("run", "")).splitlines():
                words.extend(_words(line))
            env.update(_plain_env(step.get("env")))
        minutes = job.get("timeout-minutes")
        timeout = float(minutes) * 60 if isinstance(minutes, int | float) else None
        candidates.append((words, env, timeout))
    running_drain = [candidate for candidate in candidates if _runs_drain(candidate[0])]
    chosen = running_drain or candidates
    return chosen[0] if chosen else ([], {}, None)


def _plain_env(value: Any) -> dict[str, str]:
    """Environment values written out in the file; ``${{ ... }}`` expressions are unknown."""
    return {
        str(name): str(setting)
        for name, setting in _mapping(value).items()
        if "${{" not in str(setting)
    }


# -- systemd ------------------------------------------------------------------------


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


def _systemd(path: Path, text: str) -> list[FoundSchedule]:
    """Each ``OnCalendar=`` of a timer, with the options of the service it starts."""
    pairs = sections(text).get("Timer", [])
    calendars = [value for key, value in pairs if key == "OnCalendar"]
    if not calendars:
        raise ScheduleError(
            f"{path}: no OnCalendar= in [Timer]; only calendar timers can be planned"
        )
    service = _service(path, dict(pairs).get("Unit"))
    options = _run_options(service.words, service.env, str(path))
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
            words.extend(_words(value.lstrip("-@+!:")))
        elif key == "Environment":
            for assignment in _words(value):
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
