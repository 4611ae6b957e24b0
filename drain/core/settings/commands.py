"""The settings of every command but ``drain run``: one tuple per command, in help order.

Each command's own options come first, then the shared rows of
:mod:`drain.core.settings.shared` (connection, table, output), so ``--dsn`` or
``--json`` is one row however many commands take it. ``drain plan`` reads
``drain run``'s budget rows with a default of its own (the deploy file's), and
its ``--dsn`` turns on the recorded runs, so those rows are its own.
"""

from __future__ import annotations

from drain.core.durations import format_duration
from drain.core.settings.defaults import (
    ARCHIVE_MODES,
    CATCH_UP_MODES,
    DEFAULT_ARCHIVE_MODE,
    DEFAULT_CATCH_UP,
    DEFAULT_CATCH_UP_LIMIT,
    DEFAULT_COMPUTE_UNITS,
    DEFAULT_DEMO_JOBS,
    DEFAULT_DEMO_RUNNERS,
    DEFAULT_FAIL_ON,
    DEFAULT_GRACE_SECONDS,
    DEFAULT_HISTORY_DAYS,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_JOBS_LIMIT,
    DEFAULT_LEASE,
    DEFAULT_LOCK_ATTEMPTS,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_SECONDS,
    DEFAULT_MAX_TRANSACTION_AGE,
    DEFAULT_NAIVE_WORKERS,
    DEFAULT_PER_RUN,
    DEFAULT_REPORT_DAYS,
    DEFAULT_SCALER_ROLE,
    DEFAULT_STATUS_ERRORS,
    DEFAULT_STATUS_RUNS,
    DEFAULT_TZ,
    DEFAULT_WINDOW,
    JOB_STATUSES,
    PROVIDERS,
    TRIGGERS,
)
from drain.core.settings.kinds import (
    DURATION,
    FLAG,
    IDS,
    INTEGER,
    NAMES,
    NUMBER,
    PATHS,
    RATES,
    TEXT,
    VARIABLE_NAMES,
    Choice,
    Setting,
)
from drain.core.settings.run import BY_KEY as RUN
from drain.core.settings.run import SETTINGS as RUN_SETTINGS
from drain.core.settings.shared import (
    CONNECT_TIMEOUT,
    CONNECTION,
    CONNECTION_PANEL,
    JSON,
    OUTPUT,
    SCHEMA,
    TABLE,
    VERBOSE,
)

_DRY_RUN = "--dry-run", ("DRAIN_DRY_RUN",), FLAG, False
_MAX_ATTEMPTS = "--max-attempts", ("DRAIN_MAX_ATTEMPTS",), INTEGER, DEFAULT_MAX_ATTEMPTS
_TZ = "--tz", ("DRAIN_TZ",), TEXT, DEFAULT_TZ
# drain report's own window and idle timeout, which drain run --report reads too.
REPORT_DAYS = Setting(
    "days",
    "--days",
    ("DRAIN_REPORT_DAYS",),
    NUMBER,
    DEFAULT_REPORT_DAYS,
    "How many days of recorded runs to draw, up to now on the database clock.",
)
REPORT_IDLE_TIMEOUT = Setting(
    "idle_timeout",
    "--idle-timeout",
    ("DRAIN_IDLE_TIMEOUT",),
    DURATION,
    DEFAULT_IDLE_TIMEOUT,
    "How long after a run the compute stays awake (shaded after each run).",
)

# fmt: off
INIT: tuple[Setting, ...] = (
    Setting(
        "print_sql", "--print-sql", ("DRAIN_PRINT_SQL",), FLAG, False,
        "Print the DDL instead of applying it (for your own migration tool).",
    ),
    Setting(
        "print_grants", "--print-grants", ("DRAIN_PRINT_GRANTS",), TEXT, None,
        "Print the least-privilege grants a worker role needs, and exit.",
        metavar="ROLE",
    ),
    Setting(
        "print_scaler_query", "--print-scaler-query", ("DRAIN_PRINT_SCALER_QUERY",), FLAG, False,
        "Print the backlog query for an autoscaler (KEDA's postgresql trigger) and the "
        "grants its role needs (no payloads), and exit.",
    ),
    Setting(
        "per_run", "--per-run", ("DRAIN_PER_RUN",), INTEGER, None,
        "With --print-scaler-query: the jobs one runner handles per run (the "
        f"targetQueryValue). Default: {DEFAULT_PER_RUN}.",
        metavar="N",
    ),
    Setting(
        "scaler_role", "--scaler-role", ("DRAIN_SCALER_ROLE",), TEXT, None,
        f"With --print-scaler-query: the role the scaler connects as. Default: "
        f"{DEFAULT_SCALER_ROLE}.",
        metavar="ROLE",
    ),
    Setting(
        "extras", "--with", ("DRAIN_WITH",), VARIABLE_NAMES, (),
        "Also add an optional extra (repeatable): dedupe (dedupe keys for enqueue "
        "--key), priority (a priority column: higher runs first). The same live step as "
        "drain migrate --with.",
        metavar="EXTRA",
    ),
    *CONNECTION,
    *OUTPUT,
)

MIGRATE: tuple[Setting, ...] = (
    Setting(
        "extras", "--with", ("DRAIN_WITH",), VARIABLE_NAMES, (),
        "Also add an optional extra (repeatable): dedupe, priority. An extra partly "
        "there already is finished without being named.",
        metavar="EXTRA",
    ),
    Setting(
        "dry_run", "--dry-run", ("DRAIN_DRY_RUN",), FLAG, False,
        "Print the SQL the table needs and change nothing.",
    ),
    Setting(
        "print_sql", "--print-sql", ("DRAIN_PRINT_SQL",), FLAG, False,
        "Print the steps from --from on, without connecting (for your own migration tool).",
    ),
    Setting(
        "from_version", "--from", ("DRAIN_FROM",), INTEGER, None,
        "With --print-sql: the schema version the table is at (0: made by hand from "
        "the article).",
        metavar="N",
    ),
    Setting(
        "lock_timeout", "--lock-timeout", ("DRAIN_LOCK_TIMEOUT",), DURATION, DEFAULT_LOCK_TIMEOUT,
        "How long one statement waits for its lock before it gives up its place in the "
        "queue (and holds no run back) and tries again.",
    ),
    Setting(
        "lock_attempts", "--lock-attempts", ("DRAIN_LOCK_ATTEMPTS",), INTEGER,
        DEFAULT_LOCK_ATTEMPTS,
        "How many times a statement tries for its lock before the migration stops.",
        metavar="N",
    ),
    *CONNECTION,
    *OUTPUT,
)

ENQUEUE: tuple[Setting, ...] = (
    Setting(
        "file", "--file", ("DRAIN_FILE",), TEXT, None,
        "A file of JSON payloads, one per line ('-' for stdin); sent with COPY.",
        short="-f", metavar="PATH",
    ),
    Setting(
        "run_at", "--run-at", ("DRAIN_RUN_AT",), TEXT, None,
        "When the job becomes ready (ISO 8601).",
    ),
    Setting(
        "delay", "--delay", ("DRAIN_DELAY",), DURATION, None,
        "Ready after this long, e.g. 90s, 5m.",
    ),
    Setting("max_attempts", *_MAX_ATTEMPTS, "Attempts before failed."),
    Setting(
        "priority", "--priority", ("DRAIN_PRIORITY",), INTEGER, None,
        "Higher runs first within the queue (default 0; needs the priority column: "
        "drain migrate --with priority).",
    ),
    Setting(
        "key", "--key", ("DRAIN_ENQUEUE_KEY",), TEXT, None,
        "A dedupe key: a duplicate, not a new job, while one with the key is queued or "
        "running (needs drain init --with dedupe).",
    ),
    Setting(
        "key_field", "--key-field", ("DRAIN_KEY_FIELD",), TEXT, None,
        "Take each job's dedupe key from this field of its payload (for --file).",
        metavar="NAME",
    ),
    *CONNECTION,
    *OUTPUT,
)

PLAN: tuple[Setting, ...] = (
    Setting(
        "files", "--from", ("DRAIN_FROM",), PATHS, (),
        "Read the schedules of a crontab, a Kubernetes CronJob manifest, a systemd timer or "
        "a KEDA ScaledJob (its polling, which wakes the compute) (repeatable; a directory "
        "reads its files).",
    ),
    Setting(
        "run_seconds", "--run-seconds", ("DRAIN_RUN_SECONDS",), DURATION, None,
        "How long a run works (d). Default: the --max-seconds budget.",
    ),
    Setting(
        "max_seconds", RUN["max_seconds"].option, RUN["max_seconds"].envvars, DURATION, None,
        "The run's budget. Default: what the --from file says, else "
        f"{DEFAULT_MAX_SECONDS:g}.",
    ),
    Setting(
        "grace_seconds", RUN["grace_seconds"].option, RUN["grace_seconds"].envvars, DURATION,
        None,
        "The run's grace after its budget. Default: the file's, else "
        f"{DEFAULT_GRACE_SECONDS:g}.",
    ),
    Setting(
        "lease", RUN["lease"].option, RUN["lease"].envvars, DURATION, None,
        f"The run's lease. Default: the file's, else {format_duration(DEFAULT_LEASE)}.",
    ),
    Setting(
        "idle_timeout", "--idle-timeout", ("DRAIN_IDLE_TIMEOUT",), DURATION, None,
        "How long the compute stays awake after a run (T). Default: the provider's, else "
        f"{format_duration(DEFAULT_IDLE_TIMEOUT)}.",
    ),
    Setting(
        "provider", "--provider", ("DRAIN_PROVIDER",), Choice(PROVIDERS), None,
        "Use a platform's suspend rule: sets T and prints the rule.",
    ),
    Setting("tz", *_TZ, "Time zone of the schedules and the days."),
    Setting(
        "window", "--window", ("DRAIN_WINDOW",), DURATION, DEFAULT_WINDOW,
        "How long a stretch to plan.",
    ),
    Setting(
        "start", "--start", ("DRAIN_START",), TEXT, None,
        "Start of the window (ISO 8601, read in --tz when it has no offset). Default: the "
        "next Monday 00:00.",
    ),
    Setting(
        "compute_units", "--compute-units", ("DRAIN_COMPUTE_UNITS",), NUMBER,
        DEFAULT_COMPUTE_UNITS,
        "Compute size, for compute-hours per month.",
    ),
    Setting(
        "trigger", "--trigger", ("DRAIN_TRIGGER",), Choice(TRIGGERS), None,
        "What starts the runs, to check its limits. Default: the --from file's kind.",
    ),
    Setting(
        "suggest", "--suggest", ("DRAIN_SUGGEST",), FLAG, False,
        "Propose schedules whose worst wait is within --max-wait, least awake first.",
    ),
    Setting(
        "max_wait", "--max-wait", ("DRAIN_MAX_WAIT",), DURATION, None,
        "The longest a job may wait for a run (needed by --suggest; else a warning).",
    ),
    Setting(
        "svg", "--svg", ("DRAIN_SVG",), TEXT, None,
        "Also draw the window's awake periods (each run plus T, merged) as an SVG file, one "
        "row per plan, the way drain report draws the runs that happened.",
        metavar="PATH",
    ),
    Setting(
        "dsn", "--dsn", ("DRAIN_DSN",), TEXT, None,
        "Take d from the runs recorded in this database (the 95th percentile). DATABASE_URL "
        "alone does not turn this on.",
        panel=CONNECTION_PANEL,
    ),
    Setting(
        "history_days", "--history-days", ("DRAIN_HISTORY_DAYS",), NUMBER,
        DEFAULT_HISTORY_DAYS,
        "With --dsn: days of runs to read.",
        panel=CONNECTION_PANEL,
    ),
    Setting(
        "schedules_from_db", "--schedules-from-db", ("DRAIN_SCHEDULES_FROM_DB",), FLAG, False,
        "With --dsn: read the table's recurring jobs (drain_schedules) and say, per job, the "
        "worst and median delay from a fire to the start of the drain run that picks it up "
        "under these schedules. --dsn alone does not read them.",
        panel=CONNECTION_PANEL,
    ),
    SCHEMA,
    TABLE,
    CONNECT_TIMEOUT,
    Setting(
        "queue_rates", "--queue-rate", ("DRAIN_QUEUE_RATE",), RATES, (),
        "A rate the runs are given (repeatable): say how many jobs of that queue a run "
        "and a day can start, and how long a backlog takes.",
    ),
    *OUTPUT,
)

STATUS: tuple[Setting, ...] = (
    Setting(
        "idle_timeout", "--idle-timeout", ("DRAIN_IDLE_TIMEOUT",), DURATION,
        DEFAULT_IDLE_TIMEOUT,
        "How long after its last activity a session keeps the compute awake.",
    ),
    Setting(
        "max_transaction_age", "--max-transaction-age", ("DRAIN_MAX_TRANSACTION_AGE",),
        DURATION, DEFAULT_MAX_TRANSACTION_AGE,
        "A transaction holding vacuum back longer than this needs attention.",
    ),
    Setting(
        "fail_on", "--fail-on", ("DRAIN_FAIL_ON",), TEXT, DEFAULT_FAIL_ON,
        "What makes status exit 1, comma separated: failed-since=DURATION, failed (any "
        "failed job), ready-older-than=DURATION, expired-leases, old-transaction (over "
        "--max-transaction-age), schema; or none.",
    ),
    Setting(
        "errors", "--errors", ("DRAIN_STATUS_ERRORS",), INTEGER, DEFAULT_STATUS_ERRORS,
        "How many failed jobs and expired leases to list.",
    ),
    Setting(
        "runs", "--runs", ("DRAIN_STATUS_RUNS",), INTEGER, DEFAULT_STATUS_RUNS,
        "How many recent runs to list.",
    ),
    *CONNECTION,
    *OUTPUT,
)

REPORT: tuple[Setting, ...] = (
    Setting(
        "html", "--html", ("DRAIN_HTML",), TEXT, None,
        "The HTML file to write (replaced atomically).",
        metavar="PATH", required=True,
    ),
    REPORT_DAYS,
    REPORT_IDLE_TIMEOUT,
    *CONNECTION,
    VERBOSE,
)

CANCEL: tuple[Setting, ...] = (
    Setting(
        "queue", "--queue", ("DRAIN_CANCEL_QUEUE",), TEXT, None,
        "Cancel this queue's queued and running jobs instead of jobs by id.",
        short="-q",
    ),
    Setting(
        "older_than", "--older-than", ("DRAIN_CANCEL_OLDER_THAN",), DURATION, 0.0,
        "With --queue: only jobs created at least this long ago (e.g. 1d).",
    ),
    Setting(
        "dry_run", "--dry-run", ("DRAIN_CANCEL_DRY_RUN",), FLAG, False,
        "Say what would be cancelled, and change nothing.",
    ),
    *CONNECTION,
    *OUTPUT,
)

RETRY: tuple[Setting, ...] = (
    Setting(
        "queues", "--queue", ("DRAIN_QUEUE",), NAMES, (),
        "Only this queue (repeatable).",
        short="-q",
    ),
    Setting("ids", "--id", ("DRAIN_RETRY_ID",), IDS, (), "Only this job (repeatable)."),
    Setting(
        "error_contains", "--error-contains", ("DRAIN_ERROR_CONTAINS",), TEXT, None,
        "Only jobs whose last error contains this text (case-insensitive).",
    ),
    Setting("all_jobs", "--all", ("DRAIN_RETRY_ALL",), FLAG, False, "Every failed job, no filter."),
    Setting("dry_run", *_DRY_RUN, "Show what would be retried; change nothing."),
    *CONNECTION,
    *OUTPUT,
)

ARCHIVE: tuple[Setting, ...] = (
    RUN["archive_after"]._replace(panel=None),
    Setting(
        "archive_mode", "--archive-mode", ("DRAIN_ARCHIVE_MODE",), Choice(ARCHIVE_MODES),
        DEFAULT_ARCHIVE_MODE,
        "move: into <table>_archive; delete: drop them.",
    ),
    RUN["archive_batch"]._replace(panel=None),
    Setting(
        "failed_after", "--failed-after", ("DRAIN_FAILED_AFTER",), DURATION, None,
        "Also archive failed jobs whose last attempt was due longer ago than this (off "
        "unless given).",
    ),
    *CONNECTION,
    *OUTPUT,
)

PURGE: tuple[Setting, ...] = (
    Setting(
        "archive_older_than", "--archive-older-than", ("DRAIN_ARCHIVE_OLDER_THAN",),
        DURATION, None,
        "Delete the archive rows archived longer ago than this (required).",
    ),
    RUN["archive_batch"]._replace(panel=None),
    Setting("dry_run", *_DRY_RUN, "Count what would go; change nothing."),
    *CONNECTION,
    *OUTPUT,
)

JOBS: tuple[Setting, ...] = (
    Setting(
        "queue", "--queue", ("DRAIN_JOBS_QUEUE",), TEXT, None, "Only this queue.", short="-q",
    ),
    Setting(
        "status", "--status", ("DRAIN_JOBS_STATUS",), Choice(JOB_STATUSES), None,
        "Only jobs in this status: queued, running, done or failed.",
        short="-s",
    ),
    Setting(
        "limit", "--limit", ("DRAIN_JOBS_LIMIT",), INTEGER, DEFAULT_JOBS_LIMIT,
        "At most this many jobs.",
        short="-n",
    ),
    *CONNECTION,
    *OUTPUT,
)

JOBS_SHOW: tuple[Setting, ...] = (*CONNECTION, *OUTPUT)

SCHEDULE_ADD: tuple[Setting, ...] = (
    Setting("tz", *_TZ, "IANA time zone the cron is read in."),
    Setting(
        "catch_up", "--catch-up", ("DRAIN_CATCH_UP",), Choice(CATCH_UP_MODES),
        DEFAULT_CATCH_UP,
        "After fires were missed (no run for a while): latest enqueues the most recent one, "
        "all every one (up to --catch-up-limit), none only one due within the usual gap "
        "between runs.",
    ),
    Setting(
        "catch_up_limit", "--catch-up-limit", ("DRAIN_CATCH_UP_LIMIT",), INTEGER,
        DEFAULT_CATCH_UP_LIMIT,
        "With --catch-up all: enqueue at most this many missed fires, the latest ones.",
    ),
    Setting("max_attempts", *_MAX_ATTEMPTS, "Each job's attempts."),
    *CONNECTION,
    *OUTPUT,
)

SCHEDULE_LIST: tuple[Setting, ...] = (*CONNECTION, *OUTPUT)
SCHEDULE_REMOVE: tuple[Setting, ...] = (*CONNECTION, *OUTPUT)

DEMO: tuple[Setting, ...] = (
    Setting(
        "jobs", "--jobs", ("DRAIN_DEMO_JOBS",), INTEGER, DEFAULT_DEMO_JOBS,
        "How many jobs to enqueue.",
    ),
    Setting(
        "runners", "--runners", ("DRAIN_DEMO_RUNNERS",), INTEGER, DEFAULT_DEMO_RUNNERS,
        "drain run processes started at once.",
    ),
    Setting(
        "naive", "--naive", ("DRAIN_DEMO_NAIVE",), FLAG, False,
        "Also run the obvious WHERE id = (SELECT ... LIMIT 1) claim, side by side.",
    ),
    Setting(
        "naive_workers", "--naive-workers", ("DRAIN_DEMO_NAIVE_WORKERS",), INTEGER,
        DEFAULT_NAIVE_WORKERS,
        "Concurrent connections running the naive claim.",
    ),
    Setting(
        "keep", "--keep", ("DRAIN_DEMO_KEEP",), FLAG, False,
        "Leave the server running at the end, with the demo's jobs and runs; "
        "prints its DSN and the command that stops it.",
    ),
    Setting(
        "stop", "--stop", ("DRAIN_DEMO_STOP",), TEXT, None,
        "Stop the server a demo --keep left running in DIRECTORY, remove its files.",
        metavar="DIRECTORY",
    ),
    JSON,
    VERBOSE,
)
# fmt: on

# manage.py drain_run: drain run's options, and the Django database alias to drain
# (its DSN, from settings.DATABASES, goes to the run as DRAIN_DSN).
DJANGO_DATABASE = Setting(
    "database",
    "--database",
    ("DRAIN_DATABASE",),
    TEXT,
    "default",
    "The settings.DATABASES alias whose database to drain (its DSN becomes DRAIN_DSN; an "
    "explicit --dsn still wins).",
    panel=CONNECTION_PANEL,
)
DJANGO_RUN: tuple[Setting, ...] = (
    *(setting for setting in RUN_SETTINGS if setting.panel != CONNECTION_PANEL),
    DJANGO_DATABASE,
    *(setting for setting in RUN_SETTINGS if setting.panel == CONNECTION_PANEL),
)
