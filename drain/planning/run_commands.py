"""How a deploy file's command line runs drain: whether it does, and the options it passes.

Every reader of :mod:`drain.planning.deploy_files` (crontab, Kubernetes and KEDA
manifests, GitHub Actions workflows, systemd units) hands its command words and
environment here, so ``--max-seconds``, ``--grace-seconds`` and ``--lease`` are
found by the names, variables and parsers of :mod:`drain.core.settings`, the ones
``drain run`` itself reads.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import PurePath

from drain.core import settings as run_settings
from drain.core.errors import UsageError
from drain.planning.cron import ScheduleError
from drain.planning.plan import Trigger

# The settings of ``drain run`` a plan needs, and the field of FoundSchedule each fills.
_READ = {"max_seconds": "max_seconds", "grace_seconds": "grace_seconds", "lease": "lease_seconds"}
_WANTED = [run_settings.BY_KEY[key] for key in _READ]
_FLAGS = {setting.option: setting for setting in _WANTED}
_VARIABLES = {setting.envvar: setting for setting in _WANTED}


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


def split_command(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def command_words(command: str | Sequence[str]) -> list[str]:
    """The words of a command, with ``sh -c "drain run ..."`` opened up one level."""
    words = split_command(command) if isinstance(command, str) else list(command)
    opened: list[str] = []
    for word in words:
        opened.extend(split_command(word) if " " in word.strip() else [word])
    return opened


def is_drain_command(words: Sequence[str]) -> bool:
    after_m = [later for earlier, later in pairwise(words) if earlier == "-m"]
    return any(PurePath(word).name == "drain" for word in words) or "drain" in after_m


def _seconds(setting: run_settings.Setting, value: str, name: str, where: str) -> float:
    try:
        return float(setting.parse(value, name))
    except UsageError:
        raise ScheduleError(
            f"{where}: {name} {value!r} is not a duration; fix it, or give --run-seconds"
        ) from None


def run_options(words: Sequence[str], env: Mapping[str, str], where: str) -> dict[str, float]:
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
