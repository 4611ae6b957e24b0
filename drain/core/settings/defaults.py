"""Every command's defaults and limits, named once: the table, the run and the store read them.

The store, the planner and the serverless entry point take their defaults from
here as the command line does, so a default changed here changes everywhere.
"""

from __future__ import annotations

from typing import Literal, get_args

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


# A job's tries: the article's column default, and the most any command accepts
# (enqueue, schedule add, the recurring jobs a run fires).
DEFAULT_MAX_ATTEMPTS = 5
MAX_ATTEMPTS = 1_000_000
# drain init --print-scaler-query: the jobs one runner handles per run, and its role.
DEFAULT_PER_RUN = 100
# drain migrate: how long one statement waits for its lock, and how often it tries.
DEFAULT_LOCK_TIMEOUT = 2.0
DEFAULT_LOCK_ATTEMPTS = 20
MAX_LOCK_ATTEMPTS = 1000
DEFAULT_SCALER_ROLE = "drain_scaler"
# drain status: a transaction holding vacuum back this long needs attention.
DEFAULT_MAX_TRANSACTION_AGE = 15 * 60.0
DEFAULT_FAIL_ON = "failed-since=1h,ready-older-than=1h,expired-leases,old-transaction,schema"
DEFAULT_STATUS_ERRORS = 5
DEFAULT_STATUS_RUNS = 5
# drain report (and drain run --report): the days of recorded runs drawn.
DEFAULT_REPORT_DAYS = 7.0
# drain jobs: at most this many listed.
DEFAULT_JOBS_LIMIT = 50
JOB_STATUSES: tuple[str, ...] = ("queued", "running", "done", "failed")
# drain plan: the window planned and the compute's size.
DEFAULT_WINDOW = 7 * 86400.0
DEFAULT_COMPUTE_UNITS = 1.0
DEFAULT_HISTORY_DAYS = 7.0
DEFAULT_TZ = "UTC"
PROVIDERS: tuple[str, ...] = ("neon", "aurora", "article")
TRIGGERS: tuple[str, ...] = ("lambda", "github-actions", "kubernetes", "cron", "systemd")
# drain schedule add: what a schedule does after missed fires.
CATCH_UP_MODES: tuple[str, ...] = ("latest", "all", "none")
DEFAULT_CATCH_UP = "latest"
DEFAULT_CATCH_UP_LIMIT = 100
# drain demo: its jobs, its runs at once, and the naive claim's connections.
DEFAULT_DEMO_JOBS = 10_000
DEFAULT_DEMO_RUNNERS = 4
DEFAULT_NAIVE_WORKERS = 8
