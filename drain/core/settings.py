"""The settings of ``drain run``, each defined once: option, variable, default, parser, help.

Three readers take these settings from people: ``drain run``'s options
(:mod:`drain.cli.run` builds them from :data:`SETTINGS`), the serverless entry
point's environment (:mod:`drain.serverless`) and the deploy-file reader
(:mod:`drain.planning.sources`, which finds ``--max-seconds`` and friends in crontab
lines, units and CronJobs). Each used to carry its own names, defaults and
parsers, and they drifted apart (a queue list split two ways); here one table
says everything, and ``tests/test_settings.py`` holds ``drain run --help`` to it.

This is the bottom layer: it imports no database code, so the planner and the
CLI can read defaults without loading the driver, and ``drain.store.db`` and
``drain.store.queue`` take their defaults from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, NamedTuple, get_args

from drain.core.durations import format_duration, parse_duration
from drain.core.errors import UsageError
from drain.core.rates import Rate, parse_queue_rate

ArchiveMode = Literal["move", "delete"]
VacuumMode = Literal["auto", "always", "off"]
QueueOrder = Literal["rotate", "strict"]
LOG_FORMATS: tuple[str, ...] = ("text", "json")
QUEUE_ORDERS: tuple[str, ...] = get_args(QueueOrder)
ARCHIVE_MODES: tuple[str, ...] = get_args(ArchiveMode)
# A run may also leave old jobs alone; ``drain archive`` exists to archive.
RUN_ARCHIVE_MODES: tuple[str, ...] = (*ARCHIVE_MODES, "off")
VACUUM_MODES: tuple[str, ...] = get_args(VacuumMode)

# Jobs per claim, at most: claims start small and grow toward this only while
# jobs finish fast (see the runner's claim policy).
DEFAULT_BATCH_SIZE = 1000
DEFAULT_CONCURRENCY = 1
DEFAULT_LEASE = 300.0
DEFAULT_MAX_SECONDS = 300.0
DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_MAX_RUNNERS = 0
DEFAULT_ARCHIVE_AFTER = 7 * 86400.0
DEFAULT_ARCHIVE_MODE: ArchiveMode = "move"
DEFAULT_ARCHIVE_BATCH = 10_000
DEFAULT_VACUUM: VacuumMode = "auto"
DEFAULT_QUEUE_ORDER: QueueOrder = "rotate"
DEFAULT_BACKOFF_BASE = 10.0
DEFAULT_BACKOFF_CAP = 3600.0
DEFAULT_MAX_PAYLOAD = 16 * 1024 * 1024
# A claim brings at most this much decoded payload, whatever its row count.
DEFAULT_MAX_CLAIM_BYTES = 16 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_CONNECT_RETRY = 30.0
DEFAULT_SCHEMA = "public"
DEFAULT_TABLE = "jobs"
APPLICATION_NAME = "drain"
DSN_VARIABLES = ("DRAIN_DSN", "DATABASE_URL")
# The article's platform suspends a compute after about ten minutes without
# activity: the T of ``drain plan`` and ``drain status`` unless told otherwise.
DEFAULT_IDLE_TIMEOUT = 600.0


# -- the parsers, one per kind ------------------------------------------------------------


class Duration:
    """``90``, ``90s``, ``5m``, ``1h``, ``7d``: seconds as a float (:func:`parse_duration`).

    ``plain`` shows the default as bare seconds, for options named ``--*-seconds``.
    """

    metavar = "TEXT"

    def __init__(self, *, plain: bool = False) -> None:
        self.plain = plain

    def parse(self, text: str, name: str) -> float:
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise UsageError(f"{name}: {exc}") from None

    def shown(self, value: Any) -> str | None:
        return f"{value:g}" if self.plain else format_duration(value)


class Integer:
    """A whole number; its limits are the run's to check (``RunConfig.validate``)."""

    metavar = "INTEGER"

    def parse(self, text: str, name: str) -> int:
        try:
            return int(text.strip())
        except ValueError:
            raise UsageError(f"{name}: not a whole number: {text!r}") from None

    def shown(self, value: Any) -> str | None:
        return str(value)


class Size:
    """Bytes, bare or with a unit (``65536``, ``64KiB``, ``16MiB``, ``1MB``), as
    every other size-like option takes units; the floor is ``RunConfig.validate``'s."""

    metavar = "SIZE"
    _UNITS: ClassVar[dict[str, int]] = {
        "": 1,
        "b": 1,
        "k": 1024,
        "kb": 1000,
        "kib": 1024,
        "m": 1024**2,
        "mb": 1000**2,
        "mib": 1024**2,
        "g": 1024**3,
        "gb": 1000**3,
        "gib": 1024**3,
    }
    _FORM = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")

    def parse(self, text: str, name: str) -> int:
        match = self._FORM.fullmatch(text.strip().lower())
        if match is None or match.group(2) not in self._UNITS:
            raise UsageError(f"{name}: not a size: {text!r}; write bytes or a unit, e.g. 16MiB")
        return int(float(match.group(1)) * self._UNITS[match.group(2)])

    def shown(self, value: Any) -> str | None:
        for unit in ("GiB", "MiB", "KiB"):
            scale = self._UNITS[unit.lower()]
            if value % scale == 0:
                return f"{value // scale}{unit}"
        return str(value)


class Choice:
    """One of a few words, in any case."""

    metavar = "TEXT"

    def __init__(self, choices: tuple[str, ...]) -> None:
        self.choices = choices

    def parse(self, text: str, name: str) -> str:
        cleaned = text.strip().lower()
        if cleaned not in self.choices:
            *first, last = self.choices
            raise UsageError(f"{name} must be {', '.join(first)} or {last}, not {text!r}")
        return cleaned

    def shown(self, value: Any) -> str | None:
        return str(value)


class Names:
    """A list of names, comma separated, blanks around each stripped (queues, variables).

    On the command line the option also repeats; every value is split the same way.
    """

    def parse(self, text: str, name: str) -> tuple[str, ...]:
        return self.join([text])

    def join(self, texts: Iterable[str]) -> tuple[str, ...]:
        return tuple(part.strip() for text in texts for part in text.split(",") if part.strip())

    def shown(self, value: Any) -> str | None:
        return None


class VariableNames(Names):
    """Variable names, split as any list is; given, but naming none, is an empty name.

    ``--exec-keep-env "$UNSET"`` names no variable: kept as an empty name, so the
    check of the names (:func:`drain.runner.programs.check_variable_names`) refuses it
    rather than the program running without the variable it was meant to keep.
    """

    def join(self, texts: Iterable[str]) -> tuple[str, ...]:
        given = list(texts)
        return super().join(given) or (("",) if given else ())


class Caps(Names):
    """``QUEUE=N`` pairs (``emails=7``): a queue and the most of its jobs running at once.

    Repeats and splits on commas as any list does; a queue named twice keeps the
    last cap given.
    """

    metavar = "QUEUE=N"

    def parse(self, text: str, name: str) -> tuple[tuple[str, int], ...]:  # type: ignore[override]
        return self._pairs([text], name)

    def join(self, texts: Iterable[str]) -> tuple[tuple[str, int], ...]:  # type: ignore[override]
        return self._pairs(texts, "--queue-cap")

    def _pairs(self, texts: Iterable[str], name: str) -> tuple[tuple[str, int], ...]:
        caps: dict[str, int] = {}
        for part in super().join(texts):
            queue, equals, number = part.rpartition("=")
            queue = queue.strip()
            try:
                cap = int(number.strip()) if equals and queue else 0
            except ValueError:
                cap = 0
            if cap < 1:
                raise UsageError(
                    f"{name}: {part!r} is not QUEUE=N with N at least 1, e.g. emails=7"
                )
            caps[queue] = cap
        return tuple(caps.items())


class Rates(Names):
    """``QUEUE=N/s|m|h`` pairs (``emails=40/s``): a queue and its starts per period
    across every run (:mod:`drain.core.rates`). Repeats and splits on commas as any
    list does; a queue named twice keeps the last rate given."""

    metavar = "QUEUE=N/s|m|h"

    def parse(self, text: str, name: str) -> tuple[tuple[str, Rate], ...]:  # type: ignore[override]
        return self._pairs([text], name)

    def join(self, texts: Iterable[str]) -> tuple[tuple[str, Rate], ...]:  # type: ignore[override]
        return self._pairs(texts, "--queue-rate")

    def _pairs(self, texts: Iterable[str], name: str) -> tuple[tuple[str, Rate], ...]:
        found = dict(parse_queue_rate(part, name) for part in super().join(texts))
        return tuple(found.items())


class Text:
    """Free text, taken as written (a module, a command, a DSN, a name)."""

    metavar = "TEXT"

    def parse(self, text: str, name: str) -> str:
        return text

    def shown(self, value: Any) -> str | None:
        return None if value is None else str(value)


# The spellings click accepts for a flag read from its variable, so the serverless
# entry point reads DRAIN_POOLER=y exactly as ``drain run`` does.
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})


class Flag:
    """On or off; ``negated`` for an option that turns a setting off (``--no-record``)."""

    def __init__(self, *, negated: bool = False) -> None:
        self.negated = negated

    def parse(self, text: str, name: str) -> bool:
        value = text.strip().lower()
        if value not in _TRUE | _FALSE:
            raise UsageError(f"{name}: not yes or no: {text!r}; write 1 or 0 (or true/false)")
        return (value in _TRUE) != self.negated

    def given(self, flag: bool) -> bool:
        """The setting's value when the flag was (or was not) given."""
        return flag != self.negated

    def shown(self, value: Any) -> str | None:
        return None


Kind = Duration | Integer | Size | Choice | Names | Caps | Rates | Text | Flag
DURATION = Duration()
SECONDS = Duration(plain=True)
INTEGER = Integer()
NAMES = Names()
VARIABLE_NAMES = VariableNames()
CAPS = Caps()
RATES = Rates()
TEXT = Text()
FLAG = Flag()


# -- the table ------------------------------------------------------------------------


class Setting(NamedTuple):
    """One setting of a run: how people give it, what it is when they do not, and its parser.

    ``key`` is the keyword ``drain.run`` takes (a :class:`~drain.core.config.RunConfig`
    or connection field, a handler source, ``dsn``, ``schema``/``table``).
    ``command_only`` settings shape what the command prints, not the run, so the
    serverless entry point does not read them.
    """

    key: str
    option: str
    envvars: tuple[str, ...]
    kind: Kind
    default: Any
    help: str
    short: str | None = None
    command_only: bool = False

    @property
    def envvar(self) -> str:
        return self.envvars[0]

    @property
    def param(self) -> str:
        """The option as a Python name (``--no-record``: ``no_record``), as the CLI calls it."""
        return self.option.lstrip("-").replace("-", "_")

    @property
    def shown_default(self) -> str | None:
        """The default as ``drain run --help`` shows it; ``None`` shows none."""
        if isinstance(self.kind, Flag) or self.default is None:
            return None
        return self.kind.shown(self.default)

    def parse(self, text: str, name: str | None = None) -> Any:
        """The value of ``text`` given for this setting; usage errors name ``name``."""
        return self.kind.parse(text, name or self.option)

    def from_option(self, given: Any) -> Any:
        """The value from what the option parser produced (text, repeated texts or a flag)."""
        if isinstance(self.kind, Flag):
            return self.kind.given(bool(given))
        if isinstance(self.kind, Names):
            return self.kind.join(given or ())
        if given is None:
            return self.default
        return self.parse(given)


# In the order ``drain run --help`` lists them. Every variable is ``DRAIN_`` and the
# option in capitals (tests/test_docs.py holds every command to that rule). Rows
# kept as written: key, option, variables, parser, default on the first line.
# fmt: off
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "app", "--app", ("DRAIN_APP",), TEXT, None,
        "Import this module; its @drain.handler functions handle their queues.",
    ),
    Setting(
        "handler", "--handler", ("DRAIN_HANDLER",), TEXT, None,
        "module:function handling --queue (or the 'default' queue).",
    ),
    Setting(
        "exec_command", "--exec", ("DRAIN_EXEC",), TEXT, None,
        "Run this shell command per job, payload as JSON on stdin; exit 0 = done.",
    ),
    Setting(
        "exec_keep_env", "--exec-keep-env", ("DRAIN_EXEC_KEEP_ENV",), VARIABLE_NAMES, (),
        "A credential variable the --exec program keeps (repeatable, or comma "
        "separated): programs get no DRAIN_DSN, DATABASE_URL, PGPASSWORD or PGPASSFILE, "
        "none of drain's tokens for metrics, traces and check-ins (SENTRY_DSN, "
        "OTEL_EXPORTER_OTLP_*, DRAIN_PUSHGATEWAY), nor any variable holding one of these "
        "secrets, unless named here.",
    ),
    Setting(
        "queues", "--queue", ("DRAIN_QUEUE",), NAMES, (),
        "A queue to drain (repeatable, or comma separated). Default: every queue with "
        "a handler.",
        short="-q",
    ),
    Setting(
        "queue_order", "--queue-order", ("DRAIN_QUEUE_ORDER",), Choice(QUEUE_ORDERS),
        DEFAULT_QUEUE_ORDER,
        "rotate: claim from the queues in turn; strict: drain them in the order --queue "
        "gives, the first queue first.",
    ),
    Setting(
        "queue_caps", "--queue-cap", ("DRAIN_QUEUE_CAP",), CAPS, (),
        "QUEUE=N: at most N jobs of that queue running at once across every run "
        "(repeatable).",
    ),
    Setting(
        "queue_rates", "--queue-rate", ("DRAIN_QUEUE_RATE",), RATES, (),
        "QUEUE=N/s|m|h: at most N jobs of that queue started per second, minute or hour "
        "across every run (repeatable; bursts of a fifth of N).",
    ),
    Setting(
        "batch_size", "--batch-size", ("DRAIN_BATCH_SIZE",), INTEGER, DEFAULT_BATCH_SIZE,
        "Jobs per claim, at most (claims start at 100 and grow only while jobs are fast).",
    ),
    Setting(
        "concurrency", "--concurrency", ("DRAIN_CONCURRENCY",), INTEGER, DEFAULT_CONCURRENCY,
        "Jobs running at once.",
        short="-c",
    ),
    Setting(
        "lease", "--lease", ("DRAIN_LEASE",), DURATION, DEFAULT_LEASE,
        "Lease per claim; renewed while a job works.",
    ),
    Setting(
        "max_seconds", "--max-seconds", ("DRAIN_MAX_SECONDS",), SECONDS, DEFAULT_MAX_SECONDS,
        "The run's budget: no claim starts after it.",
    ),
    Setting(
        "grace_seconds", "--grace-seconds", ("DRAIN_GRACE_SECONDS",), SECONDS,
        DEFAULT_GRACE_SECONDS,
        "How long in-flight jobs may finish after the budget or a signal.",
    ),
    Setting(
        "max_runners", "--max-runners", ("DRAIN_MAX_RUNNERS",), INTEGER, DEFAULT_MAX_RUNNERS,
        "At most this many runs work at once on this table (0: no limit).",
    ),
    Setting(
        "archive_after", "--archive-after", ("DRAIN_ARCHIVE_AFTER",), DURATION,
        DEFAULT_ARCHIVE_AFTER,
        "Archive done jobs this old.",
    ),
    Setting(
        "archive_mode", "--archive-mode", ("DRAIN_ARCHIVE_MODE",), Choice(RUN_ARCHIVE_MODES),
        DEFAULT_ARCHIVE_MODE,
        "move: into <table>_archive; delete: drop them; off: keep them.",
    ),
    Setting(
        "archive_batch", "--archive-batch", ("DRAIN_ARCHIVE_BATCH",), INTEGER,
        DEFAULT_ARCHIVE_BATCH,
        "Rows per archive transaction.",
    ),
    Setting(
        "vacuum", "--vacuum", ("DRAIN_VACUUM",), Choice(VACUUM_MODES), DEFAULT_VACUUM,
        "auto: when dead rows pile up; always; off.",
    ),
    Setting(
        "backoff_base", "--backoff-base", ("DRAIN_BACKOFF_BASE",), DURATION,
        DEFAULT_BACKOFF_BASE,
        "First retry delay / 2.",
    ),
    Setting(
        "backoff_cap", "--backoff-cap", ("DRAIN_BACKOFF_CAP",), DURATION, DEFAULT_BACKOFF_CAP,
        "Longest retry delay.",
    ),
    Setting(
        "max_payload", "--max-payload", ("DRAIN_MAX_PAYLOAD",), Size(), DEFAULT_MAX_PAYLOAD,
        "Bytes, or a unit (64KiB, 16MiB; at least 1KiB); a larger stored payload fails its "
        "job instead of being loaded.",
    ),
    Setting(
        "retry_for", "--connect-retry", ("DRAIN_CONNECT_RETRY",), DURATION,
        DEFAULT_CONNECT_RETRY,
        "Keep retrying the connection this long while a compute resumes.",
    ),
    Setting(
        "record", "--no-record", ("DRAIN_NO_RECORD",), Flag(negated=True), True,
        "Do not write to drain_runs.",
    ),
    Setting(
        "schedules", "--no-schedules", ("DRAIN_NO_SCHEDULES",), Flag(negated=True), True,
        "Do not fire the recurring jobs in drain_schedules that have come due.",
    ),
    Setting(
        "metrics_textfile", "--metrics-textfile", ("DRAIN_METRICS_TEXTFILE",), TEXT, None,
        "Write the run's metrics to this file at its end, atomically, for node_exporter's "
        "textfile collector (pip install 'pg-drain[metrics]').",
    ),
    Setting(
        "pushgateway", "--pushgateway", ("DRAIN_PUSHGATEWAY",), TEXT, None,
        "Push the run's metrics to this Prometheus Pushgateway URL at its end "
        "(pip install 'pg-drain[metrics]').",
    ),
    Setting(
        "otel", "--otel", ("DRAIN_OTEL",), FLAG, False,
        "Export a trace of the run (a span per run and per job) over OTLP/HTTP; on by itself "
        "when OTEL_EXPORTER_OTLP_ENDPOINT is set (pip install 'pg-drain[otel]').",
    ),
    Setting(
        "sentry_monitor", "--sentry-monitor", ("DRAIN_SENTRY_MONITOR",), TEXT, None,
        "Send Sentry Crons check-ins for this monitor slug (SENTRY_DSN names the project; "
        "pip install 'pg-drain[sentry]').",
    ),
    Setting(
        "sentry_schedule", "--sentry-schedule", ("DRAIN_SENTRY_SCHEDULE",), TEXT, None,
        "The cron schedule the runs are started on, sent with the check-ins so Sentry creates "
        "the monitor itself, with the budget plus grace as its maximum runtime.",
    ),
    Setting(
        "report", "--report", ("DRAIN_REPORT",), TEXT, None,
        "At the end, write the HTML report of the last 7 days of runs to this file.",
    ),
    Setting(
        "dsn", "--dsn", DSN_VARIABLES, TEXT, None,
        "PostgreSQL connection string (URL or key=value). libpq's PG* variables and "
        "~/.pgpass fill in what it leaves out, so the password need not be on the command "
        "line.",
    ),
    Setting(
        "schema", "--schema", ("DRAIN_SCHEMA",), TEXT, DEFAULT_SCHEMA,
        "Schema of the queue table.",
    ),
    Setting(
        "table", "--table", ("DRAIN_TABLE",), TEXT, DEFAULT_TABLE,
        "Name of the queue table.",
    ),
    Setting(
        "connect_timeout", "--connect-timeout", ("DRAIN_CONNECT_TIMEOUT",), DURATION,
        DEFAULT_CONNECT_TIMEOUT,
        "How long one connection attempt may take (libpq would wait over two minutes).",
    ),
    Setting(
        "pooler", "--pooler", ("DRAIN_POOLER",), FLAG, False,
        "Connecting through a transaction-mode pooler (PgBouncer): no prepared statements.",
    ),
    Setting(
        "log_format", "--log-format", ("DRAIN_LOG_FORMAT",), Choice(LOG_FORMATS), "text",
        "text: drain's lines; json: one JSON object per line (time, level, message, the "
        "run's fields), never a payload or a password.",
        command_only=True,
    ),
    Setting(
        "json", "--json", ("DRAIN_JSON",), FLAG, False,
        "Print the result as JSON on stdout.",
        command_only=True,
    ),
    Setting(
        "verbose", "--verbose", ("DRAIN_VERBOSE",), FLAG, False,
        "Log more, and show tracebacks.",
        short="-v",
        command_only=True,
    ),
)
# fmt: on
BY_KEY: dict[str, Setting] = {setting.key: setting for setting in SETTINGS}


def from_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting's value from the parsed options of ``drain run`` (by :attr:`Setting.param`)."""
    return {s.key: s.from_option(given.get(s.param)) for s in SETTINGS}


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
