"""The one table of settings: every command's options, each defined once.

A row (:class:`Setting`) says how people give a setting (option, variables),
what it is when they do not (default), how its text is read (parser) and what
the help says. The CLI builds every command's options from :func:`settings_of`,
the serverless entry point reads ``drain run``'s from the environment
(:func:`from_environment`), the deploy-file reader finds them in crontab lines,
and the docs' option reference is generated from the same rows.

This is the bottom layer: it imports no database code, so the planner and the
CLI can read defaults without loading the driver, and the store takes its
defaults from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drain.core.settings import commands
from drain.core.settings.defaults import (
    APPLICATION_NAME,
    ARCHIVE_MODES,
    DEFAULT_ARCHIVE_AFTER,
    DEFAULT_ARCHIVE_BATCH,
    DEFAULT_ARCHIVE_MODE,
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_CAP,
    DEFAULT_BATCH_SIZE,
    DEFAULT_CONCURRENCY,
    DEFAULT_CONNECT_RETRY,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_GRACE_SECONDS,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_LEASE,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_CLAIM_BYTES,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_MAX_RUNNERS,
    DEFAULT_MAX_SECONDS,
    DEFAULT_QUEUE_ORDER,
    DEFAULT_SCHEMA,
    DEFAULT_TABLE,
    DEFAULT_VACUUM,
    DSN_VARIABLES,
    LOG_FORMATS,
    MAX_ATTEMPTS,
    QUEUE_ORDERS,
    RUN_ARCHIVE_MODES,
    VACUUM_MODES,
    ArchiveMode,
    QueueOrder,
    VacuumMode,
)
from drain.core.settings.kinds import (
    CAPS,
    DURATION,
    FLAG,
    IDS,
    INTEGER,
    NAMES,
    NUMBER,
    PATHS,
    RATES,
    SECONDS,
    TEXT,
    VARIABLE_NAMES,
    Caps,
    Choice,
    Duration,
    Flag,
    Ids,
    Integer,
    Kind,
    Names,
    Number,
    Paths,
    Rates,
    Setting,
    Size,
    Text,
    VariableNames,
)
from drain.core.settings.run import BY_KEY, SETTINGS

__all__ = [
    "APPLICATION_NAME",
    "ARCHIVE_MODES",
    "BY_KEY",
    "CAPS",
    "COMMANDS",
    "DEFAULT_ARCHIVE_AFTER",
    "DEFAULT_ARCHIVE_BATCH",
    "DEFAULT_ARCHIVE_MODE",
    "DEFAULT_BACKOFF_BASE",
    "DEFAULT_BACKOFF_CAP",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_CONNECT_RETRY",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_LEASE",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_CLAIM_BYTES",
    "DEFAULT_MAX_PAYLOAD",
    "DEFAULT_MAX_RUNNERS",
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_QUEUE_ORDER",
    "DEFAULT_SCHEMA",
    "DEFAULT_TABLE",
    "DEFAULT_VACUUM",
    "DSN_VARIABLES",
    "DURATION",
    "FLAG",
    "IDS",
    "INTEGER",
    "LOG_FORMATS",
    "MAX_ATTEMPTS",
    "NAMES",
    "NUMBER",
    "PATHS",
    "QUEUE_ORDERS",
    "RATES",
    "RUN_ARCHIVE_MODES",
    "SECONDS",
    "SETTINGS",
    "TEXT",
    "VACUUM_MODES",
    "VARIABLE_NAMES",
    "ArchiveMode",
    "Caps",
    "Choice",
    "Duration",
    "Flag",
    "Ids",
    "Integer",
    "Kind",
    "Names",
    "Number",
    "Paths",
    "QueueOrder",
    "Rates",
    "Setting",
    "Size",
    "Text",
    "VacuumMode",
    "VariableNames",
    "from_environment",
    "from_options",
    "setting_of",
    "settings_of",
]

# Every command's settings, in the order its help lists them; a group's
# subcommands are named with the group ("jobs show").
COMMANDS: dict[str, tuple[Setting, ...]] = {
    "init": commands.INIT,
    "enqueue": commands.ENQUEUE,
    "migrate": commands.MIGRATE,
    "run": SETTINGS,
    "plan": commands.PLAN,
    "status": commands.STATUS,
    "jobs": commands.JOBS,
    "jobs show": commands.JOBS_SHOW,
    "report": commands.REPORT,
    "schedule add": commands.SCHEDULE_ADD,
    "schedule list": commands.SCHEDULE_LIST,
    "schedule remove": commands.SCHEDULE_REMOVE,
    "cancel": commands.CANCEL,
    "retry": commands.RETRY,
    "archive": commands.ARCHIVE,
    "purge": commands.PURGE,
    "demo": commands.DEMO,
    "manage.py drain_run": commands.DJANGO_RUN,
}


def settings_of(command: str) -> list[Setting]:
    """Every setting of ``command`` (``"run"``, ``"jobs show"``), in its help's order.

    The docs' option reference calls this, so the reference and the help are one list.
    """
    try:
        return list(COMMANDS[command])
    except KeyError:
        raise KeyError(f"no command {command!r}: one of {', '.join(COMMANDS)}") from None


def setting_of(command: str, key: str) -> Setting:
    """The row of ``command`` whose keyword is ``key`` (``("plan", "provider")``)."""
    found = [setting for setting in settings_of(command) if setting.key == key]
    if not found:
        raise KeyError(f"drain {command} has no setting {key!r}")
    return found[0]


def from_options(
    given: Mapping[str, Any],
    table: tuple[Setting, ...] = SETTINGS,
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every setting's value from a command's parsed options (by :attr:`Setting.param`).

    ``names`` says where a value came from when it was not the option (its
    variable), so an error names what the user set: ``DRAIN_MAX_SECONDS: ...``.
    """
    shown = names or {}
    return {s.key: s.from_option(given.get(s.param), shown.get(s.param)) for s in table}


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings whose variable is set (and not empty), parsed; errors name the variable.

    A setting with two variables (the DSN) takes the first one set.
    """
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.command_only:
            continue
        name = next((name for name in setting.envvars if environ.get(name)), None)
        if name is not None:
            values[setting.key] = setting.parse(environ[name], name)
    return values
