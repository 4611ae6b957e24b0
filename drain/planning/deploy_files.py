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

The readers live apart, one per family of files: :mod:`~drain.planning.manifests`
(YAML), :mod:`~drain.planning.systemd_units` and, here, crontab; what a command
line says about drain is :mod:`~drain.planning.run_commands`' to read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from drain.planning import manifests, systemd_units
from drain.planning.cron import ScheduleError
from drain.planning.plan import Trigger
from drain.planning.run_commands import FoundSchedule, command_words, is_drain_command, run_options

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


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
        found = manifests.read_yaml(path, text)
    elif kind == "systemd":
        found = systemd_units.read_timer(path, text)
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
        or dict(systemd_units.sections(file_text(timer)).get("Timer", [])).get("Unit") == path.name
    ]
    if timers:
        return f"a systemd service holds no schedule; its timer does: --from {timers[0]}"
    return f"a systemd service holds no schedule; plan the .timer that starts {path.name}"


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
    words = command_words(command)
    return FoundSchedule(
        expression=expression,
        source=where,
        trigger=Trigger.CRON,
        timezone=env.get("CRON_TZ") or None,
        runs_drain=is_drain_command(words),
        **run_options(words, env, where),
    )


# KEDA's pollingInterval when a ScaledJob gives none (keda.sh/v1alpha1).
