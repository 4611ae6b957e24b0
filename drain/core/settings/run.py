"""``drain run``'s settings, in the order its help lists them, panel by panel.

Three readers take these settings from people: ``drain run``'s options
(:mod:`drain.cli.run` builds them from :data:`SETTINGS`), the serverless entry
point's environment (:mod:`drain.serverless`) and the deploy-file reader
(:mod:`drain.planning.sources`, which finds ``--max-seconds`` and friends in crontab
lines, units and CronJobs). Each used to carry its own names, defaults and
parsers, and they drifted apart (a queue list split two ways); here one table
says everything, and ``tests/test_settings.py`` holds ``drain run --help`` to it.
"""

from __future__ import annotations

from drain.core.settings.defaults import (
    DEFAULT_ARCHIVE_AFTER,
    DEFAULT_ARCHIVE_BATCH,
    DEFAULT_ARCHIVE_MODE,
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_CAP,
    DEFAULT_BATCH_SIZE,
    DEFAULT_CONCURRENCY,
    DEFAULT_GRACE_SECONDS,
    DEFAULT_LEASE,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_MAX_RUNNERS,
    DEFAULT_MAX_SECONDS,
    DEFAULT_QUEUE_ORDER,
    DEFAULT_VACUUM,
    LOG_FORMATS,
    QUEUE_ORDERS,
    RUN_ARCHIVE_MODES,
    VACUUM_MODES,
)
from drain.core.settings.kinds import (
    CAPS,
    DURATION,
    FLAG,
    INTEGER,
    NAMES,
    RATES,
    SECONDS,
    TEXT,
    VARIABLE_NAMES,
    Choice,
    Flag,
    Setting,
    Size,
)
from drain.core.settings.shared import (
    ARCHIVE_PANEL,
    BUDGET_PANEL,
    CONNECTION,
    HANDLERS_PANEL,
    JSON,
    OBSERVABILITY_PANEL,
    VERBOSE,
)

# Every variable is ``DRAIN_`` and the option in capitals (tests/test_docs.py holds
# every command to that rule). Rows kept as written: key, option, variables,
# parser, default on the first line.
# fmt: off
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "app", "--app", ("DRAIN_APP",), TEXT, None,
        "Import this module; its @drain.handler functions handle their queues.",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "handler", "--handler", ("DRAIN_HANDLER",), TEXT, None,
        "module:function handling --queue (or the 'default' queue).",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "exec_command", "--exec", ("DRAIN_EXEC",), TEXT, None,
        "Run this shell command per job, payload as JSON on stdin; exit 0 = done.",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "exec_keep_env", "--exec-keep-env", ("DRAIN_EXEC_KEEP_ENV",), VARIABLE_NAMES, (),
        "A credential variable the --exec program keeps (repeatable, or comma "
        "separated): programs get no DRAIN_DSN, DATABASE_URL, PGPASSWORD or PGPASSFILE, "
        "none of drain's tokens for metrics, traces and check-ins (SENTRY_DSN, "
        "OTEL_EXPORTER_OTLP_*, DRAIN_PUSHGATEWAY), nor any variable holding one of these "
        "secrets, unless named here.",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "queues", "--queue", ("DRAIN_QUEUE",), NAMES, (),
        "A queue to drain (repeatable, or comma separated). Default: every queue with "
        "a handler.",
        short="-q",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "queue_order", "--queue-order", ("DRAIN_QUEUE_ORDER",), Choice(QUEUE_ORDERS),
        DEFAULT_QUEUE_ORDER,
        "rotate: claim from the queues in turn; strict: drain them in the order --queue "
        "gives, the first queue first.",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "queue_caps", "--queue-cap", ("DRAIN_QUEUE_CAP",), CAPS, (),
        "QUEUE=N: at most N jobs of that queue running at once across every run "
        "(repeatable).",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "queue_rates", "--queue-rate", ("DRAIN_QUEUE_RATE",), RATES, (),
        "QUEUE=N/s|m|h: at most N jobs of that queue started per second, minute or hour "
        "across every run (repeatable; bursts of a fifth of N).",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "schedules", "--no-schedules", ("DRAIN_NO_SCHEDULES",), Flag(negated=True), True,
        "Do not fire the recurring jobs in drain_schedules that have come due.",
        panel=HANDLERS_PANEL,
    ),
    Setting(
        "batch_size", "--batch-size", ("DRAIN_BATCH_SIZE",), INTEGER, DEFAULT_BATCH_SIZE,
        "Jobs per claim, at most: claims start at 10 per worker (at most 100) and grow "
        "toward this only while jobs finish fast.",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "concurrency", "--concurrency", ("DRAIN_CONCURRENCY",), INTEGER, DEFAULT_CONCURRENCY,
        "Jobs running at once.",
        short="-c",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "lease", "--lease", ("DRAIN_LEASE",), DURATION, DEFAULT_LEASE,
        "Lease per claim; renewed while a job works.",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "max_seconds", "--max-seconds", ("DRAIN_MAX_SECONDS",), SECONDS, DEFAULT_MAX_SECONDS,
        "The run's budget: no claim starts after it.",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "grace_seconds", "--grace-seconds", ("DRAIN_GRACE_SECONDS",), SECONDS,
        DEFAULT_GRACE_SECONDS,
        "How long in-flight jobs may finish after the budget or a signal.",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "max_runners", "--max-runners", ("DRAIN_MAX_RUNNERS",), INTEGER, DEFAULT_MAX_RUNNERS,
        "At most this many runs work at once on this table (0: no limit).",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "backoff_base", "--backoff-base", ("DRAIN_BACKOFF_BASE",), DURATION,
        DEFAULT_BACKOFF_BASE,
        "First retry delay / 2.",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "backoff_cap", "--backoff-cap", ("DRAIN_BACKOFF_CAP",), DURATION, DEFAULT_BACKOFF_CAP,
        "Longest retry delay.",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "max_payload", "--max-payload", ("DRAIN_MAX_PAYLOAD",), Size(), DEFAULT_MAX_PAYLOAD,
        "Bytes, or a unit (64KiB, 16MiB; at least 1KiB); a larger stored payload fails its "
        "job instead of being loaded.",
        panel=BUDGET_PANEL,
    ),
    Setting(
        "archive_after", "--archive-after", ("DRAIN_ARCHIVE_AFTER",), DURATION,
        DEFAULT_ARCHIVE_AFTER,
        "Archive done jobs this old.",
        panel=ARCHIVE_PANEL,
    ),
    Setting(
        "archive_mode", "--archive-mode", ("DRAIN_ARCHIVE_MODE",), Choice(RUN_ARCHIVE_MODES),
        DEFAULT_ARCHIVE_MODE,
        "move: into <table>_archive; delete: drop them; off: keep them.",
        panel=ARCHIVE_PANEL,
    ),
    Setting(
        "archive_batch", "--archive-batch", ("DRAIN_ARCHIVE_BATCH",), INTEGER,
        DEFAULT_ARCHIVE_BATCH,
        "Rows per archive transaction.",
        panel=ARCHIVE_PANEL,
    ),
    Setting(
        "vacuum", "--vacuum", ("DRAIN_VACUUM",), Choice(VACUUM_MODES), DEFAULT_VACUUM,
        "auto: when dead rows pile up; always; off.",
        panel=ARCHIVE_PANEL,
    ),
    Setting(
        "record", "--no-record", ("DRAIN_NO_RECORD",), Flag(negated=True), True,
        "Do not write to drain_runs.",
        panel=OBSERVABILITY_PANEL,
    ),
    Setting(
        "metrics_textfile", "--metrics-textfile", ("DRAIN_METRICS_TEXTFILE",), TEXT, None,
        "Write the run's metrics to this file at its end, atomically, for node_exporter's "
        "textfile collector (pip install 'pg-drain[metrics]').",
        panel=OBSERVABILITY_PANEL,
    ),
    Setting(
        "pushgateway", "--pushgateway", ("DRAIN_PUSHGATEWAY",), TEXT, None,
        "Push the run's metrics to this Prometheus Pushgateway URL at its end "
        "(pip install 'pg-drain[metrics]').",
        panel=OBSERVABILITY_PANEL,
    ),
    Setting(
        "otel", "--otel", ("DRAIN_OTEL",), FLAG, False,
        "Export a trace of the run (a span per run and per job) over OTLP/HTTP; on by itself "
        "when OTEL_EXPORTER_OTLP_ENDPOINT is set (pip install 'pg-drain[otel]').",
        panel=OBSERVABILITY_PANEL,
    ),
    Setting(
        "sentry_monitor", "--sentry-monitor", ("DRAIN_SENTRY_MONITOR",), TEXT, None,
        "Send Sentry Crons check-ins for this monitor slug (SENTRY_DSN names the project; "
        "pip install 'pg-drain[sentry]').",
        panel=OBSERVABILITY_PANEL,
    ),
    Setting(
        "sentry_schedule", "--sentry-schedule", ("DRAIN_SENTRY_SCHEDULE",), TEXT, None,
        "The cron schedule the runs are started on, sent with the check-ins so Sentry creates "
        "the monitor itself, with the budget plus grace as its maximum runtime.",
        panel=OBSERVABILITY_PANEL,
    ),
    Setting(
        "report", "--report", ("DRAIN_REPORT",), TEXT, None,
        "At the end, write the HTML report of the last 7 days of runs to this file.",
        panel=OBSERVABILITY_PANEL,
    ),
    Setting(
        "log_format", "--log-format", ("DRAIN_LOG_FORMAT",), Choice(LOG_FORMATS), "text",
        "text: drain's lines; json: one JSON object per line (time, level, message, the "
        "run's fields), never a payload or a password.",
        command_only=True,
        panel=OBSERVABILITY_PANEL,
    ),
    JSON._replace(panel=OBSERVABILITY_PANEL),
    VERBOSE._replace(panel=OBSERVABILITY_PANEL),
    *CONNECTION,
)
# fmt: on
BY_KEY: dict[str, Setting] = {setting.key: setting for setting in SETTINGS}
