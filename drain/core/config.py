"""The settings of one run once parsed, with their limits.

How people give each setting (its option, variable, default and parser) is
:mod:`drain.core.settings`; this module is what those become: the
:class:`RunConfig` the runner takes and the :class:`ConnectOptions` of its
connection. Like the settings it sits below the database layer, so it takes
nothing from ``drain.store`` (an import-linter contract holds it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from drain.core.errors import UsageError
from drain.core.rates import PERIODS, Rate, parse_rate
from drain.core.settings import (
    APPLICATION_NAME,
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
    DEFAULT_LEASE,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_MAX_RUNNERS,
    DEFAULT_MAX_SECONDS,
    DEFAULT_QUEUE_ORDER,
    DEFAULT_SCHEMA,
    DEFAULT_TABLE,
    DEFAULT_VACUUM,
    SETTINGS,
    ArchiveMode,
    QueueOrder,
    VacuumMode,
)
from drain.core.table import JobTable

__all__ = [
    "DEFAULT_ARCHIVE_AFTER",
    "DEFAULT_ARCHIVE_BATCH",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_MAX_SECONDS",
    "HANDLER_SOURCES",
    "VACUUM_DEAD_FRACTION",
    "VACUUM_MIN_DEAD_ROWS",
    "ConnectOptions",
    "RunConfig",
    "VacuumMode",
    "check_handler_sources",
    "handler_spelling",
    "run_keywords",
]

# auto vacuum: when dead rows pass both of these (autovacuum's own default is
# 50 rows + 20 % of the table; a queue table deserves a tighter leash).
VACUUM_MIN_DEAD_ROWS = 1000
VACUUM_DEAD_FRACTION = 0.1
# Each job of a sync handler in flight is a thread: 100,000 of them spent 26 s and
# 400 MB before the interpreter could start no more; a queue that wants more
# belongs to more runs. Async handlers run as tasks (drain.runner.tasks), a few KB
# each: the run checks the thread cap once it knows which kind its queues have.
MAX_THREADS = 1000
MAX_CONCURRENCY = 10_000
# A cap below this fails even ``{}``-sized payloads, and so every job, for good.
MIN_MAX_PAYLOAD = 1024

# The keywords of drain.run that choose the handlers rather than configure the run.
HANDLER_SOURCES = ("app", "handler", "exec_command")
# What each text source must hold, for the message when it is blank.
_SOURCE_HOLDS = {
    "app": "the module whose @drain.handler functions handle the queues",
    "handler": "module:function",
    "exec_command": "the program to run for each job",
}
_SOURCE_SETTINGS = {setting.key: setting for setting in SETTINGS if setting.key in HANDLER_SOURCES}


class ConnectOptions(NamedTuple):
    """How to reach the database."""

    dsn: str
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    retry_for: float = DEFAULT_CONNECT_RETRY
    application_name: str = APPLICATION_NAME
    pooler: bool = False
    # Say once that connecting is being retried (the CLI, when stderr is a terminal).
    retry_notice: bool = False


_CONNECT_FIELDS = frozenset(ConnectOptions._fields) - {"dsn"}


@dataclass(frozen=True)
class RunConfig:
    """Everything ``drain run`` and ``drain.run()`` take, already parsed."""

    connect: ConnectOptions
    table: JobTable = field(default_factory=JobTable)
    queues: tuple[str, ...] = ()
    queue_order: QueueOrder = DEFAULT_QUEUE_ORDER
    # (queue, N): at most N of that queue's jobs running at once across every run
    queue_caps: tuple[tuple[str, int], ...] = ()
    # (queue, rate): at most rate.starts of that queue's jobs started per period across
    # every run (drain.core.rates; the buckets live in the database, drain.store.rates)
    queue_rates: tuple[tuple[str, Rate], ...] = ()
    batch_size: int = DEFAULT_BATCH_SIZE
    concurrency: int = DEFAULT_CONCURRENCY
    lease: float = DEFAULT_LEASE
    max_seconds: float = DEFAULT_MAX_SECONDS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    max_runners: int = DEFAULT_MAX_RUNNERS
    archive_after: float = DEFAULT_ARCHIVE_AFTER
    archive_mode: ArchiveMode | Literal["off"] = DEFAULT_ARCHIVE_MODE
    archive_batch: int = DEFAULT_ARCHIVE_BATCH
    vacuum: VacuumMode = DEFAULT_VACUUM
    backoff_base: float = DEFAULT_BACKOFF_BASE
    backoff_cap: float = DEFAULT_BACKOFF_CAP
    max_payload: int = DEFAULT_MAX_PAYLOAD
    record: bool = True
    schedules: bool = True  # fire the recurring jobs that came due, before the first claim
    progress: bool = False
    # Credential variables an --exec program keeps (drain.runner.program_env strips them).
    exec_keep_env: tuple[str, ...] = ()
    # What the run reports before it exits (drain.observe.observers): each turns one on.
    metrics_textfile: str | None = None
    pushgateway: str | None = None
    otel: bool = False
    sentry_monitor: str | None = None
    sentry_schedule: str | None = None  # the runs' cron, for the monitor's upsert
    report: str | None = None

    @classmethod
    def of(cls, dsn: str, **keywords: Any) -> RunConfig:
        """A config from ``drain.run`` keywords: the connection's go to :class:`ConnectOptions`.

        Sequences (``queues``, ``exec_keep_env``) may be any iterable; an unknown
        keyword is a ``TypeError``, as for any call.
        """
        connect = {key: keywords.pop(key) for key in list(keywords) if key in _CONNECT_FIELDS}
        if isinstance(keywords.get("queue_caps"), dict):
            keywords["queue_caps"] = tuple(keywords["queue_caps"].items())
        if "queue_rates" in keywords:
            keywords["queue_rates"] = _rates(keywords["queue_rates"])
        for key in ("queues", "exec_keep_env", "queue_caps"):
            if key in keywords:
                keywords[key] = tuple(keywords[key])
        return cls(connect=ConnectOptions(dsn, **connect), **keywords)

    def validate(self) -> None:
        """Reject settings that cannot work, before anything connects."""
        checks = [
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.concurrency >= 1, "--concurrency must be at least 1"),
            (
                self.concurrency <= MAX_CONCURRENCY,
                f"--concurrency must be at most {MAX_CONCURRENCY:,}",
            ),
            (self.lease >= 1, "--lease must be at least 1 second"),
            (self.max_seconds > 0, "--max-seconds must be above 0"),
            (self.grace_seconds >= 0, "--grace-seconds cannot be negative"),
            (self.max_runners >= 0, "--max-runners cannot be negative"),
            (
                all(cap >= 1 for _, cap in self.queue_caps),
                "--queue-cap must be at least 1 for every queue it names",
            ),
            (
                all(rate.starts >= 1 and rate.unit in PERIODS for _, rate in self.queue_rates),
                "--queue-rate must be N/s, N/m or N/h with N at least 1 for every queue it names",
            ),
            (self.archive_batch >= 1, "--archive-batch must be at least 1"),
            (self.archive_after >= 0, "--archive-after cannot be negative"),
            (self.backoff_base > 0 and self.backoff_cap > 0, "backoff must be above 0"),
            (
                self.max_payload >= MIN_MAX_PAYLOAD,
                "--max-payload must be at least 1KiB (a smaller cap fails every job for good)",
            ),
            (
                self.connect.connect_timeout > 0,
                "--connect-timeout must be above 0 (libpq reads 0 as wait forever)",
            ),
            (
                not (self.connect.pooler and self.max_runners),
                "--max-runners needs session advisory locks, which a transaction-mode "
                "pooler cannot keep; connect directly to use it",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)


def _rates(given: Any) -> tuple[tuple[str, Rate], ...]:
    """``queue_rates`` of ``drain.run``: a dict or pairs, each rate a Rate or ``"40/s"``."""
    pairs = given.items() if isinstance(given, Mapping) else given
    return tuple(
        (queue, rate if isinstance(rate, Rate) else parse_rate(str(rate), f"queue_rates {queue}"))
        for queue, rate in pairs
    )


def run_keywords(values: Mapping[str, Any]) -> dict[str, Any]:
    """``drain.run`` keywords from parsed settings: ``schema`` and ``table`` become one JobTable.

    ``values`` is what :func:`drain.core.settings.from_options` or
    :func:`~drain.core.settings.from_environment` returned; a missing half of the table
    takes its default.
    """
    keywords = dict(values)
    schema = keywords.pop("schema", None)
    name = keywords.pop("table", None)
    if schema is not None or name is not None:
        keywords["table"] = JobTable(
            DEFAULT_SCHEMA if schema is None else schema, DEFAULT_TABLE if name is None else name
        )
    return keywords


def handler_spelling(
    variables: Collection[str] = (), keywords: Collection[str] = ()
) -> dict[str, str]:
    """How each handler source was given, for the messages about it.

    A source in ``keywords`` was a ``drain.run`` keyword, one in ``variables`` came
    from its ``DRAIN_*`` variable; any other is named by its option.
    """
    spelled = {"handlers": "handlers="}
    for key, setting in _SOURCE_SETTINGS.items():
        if key in keywords:
            spelled[key] = f"{key}="
        elif key in variables:
            spelled[key] = setting.envvar
        else:
            spelled[key] = setting.option
    return spelled


def _check_module_name(app: Any, name: str) -> None:
    """Refuse a file path given for ``--app``, naming the module it meant.

    ``--app tasks.py`` fails on import as "No module named 'tasks'", which reads
    as if the file were missing; the fix is the module's dotted name.
    """
    if not isinstance(app, str):
        return
    text = app.strip()
    if not (text.endswith(".py") or "/" in text):
        return
    module = text.removesuffix(".py").removeprefix("./").strip("/").replace("/", ".")
    spelled = f"{name} {module}" if name.startswith("-") else f"{name}={module}"
    raise UsageError(f"{name} takes a module name: did you mean {spelled}?")


def check_handler_sources(
    sources: Mapping[str, Any],
    spelled: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Refuse a blank handler source, and anything but exactly one source.

    The blank one is the dangerous mistake: ``/bin/sh -c "   "`` exits 0, so an
    unset template variable (``--exec "$CMD"``, ``DRAIN_EXEC="${CMD}"``) would
    mark every job done without running anything. ``drain run`` and the
    serverless entry point both call this, each naming the sources as the user
    gave them (``spelled``, from :func:`handler_spelling`). ``environ``, where the
    sources may come from variables: with no source at all, a source variable
    that is set but empty is named, since it is what the user meant to fill.
    """
    names = handler_spelling() if spelled is None else spelled
    for key, holds in _SOURCE_HOLDS.items():
        value = sources.get(key)
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{names[key]} is empty: give {holds}")
    _check_module_name(sources.get("app"), names["app"])
    given = [key for key in (*HANDLER_SOURCES, "handlers") if sources.get(key) is not None]
    if not given and environ is not None:
        for key, setting in _SOURCE_SETTINGS.items():
            if setting.envvar in environ:
                raise UsageError(f"{setting.envvar} is empty: give {_SOURCE_HOLDS[key]}")
    if len(given) != 1:
        *first, last = (names[key] for key in HANDLER_SOURCES)
        both = f" ({' and '.join(names[key] for key in given)} given)" if given else ""
        raise UsageError(f"give exactly one handler source: {', '.join(first)} or {last}{both}")
