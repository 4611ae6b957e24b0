"""What ``drain status`` reads: the queue, its runs, its table's health, and the server.

Everything is read in one short read-only transaction, so every number comes
from the same snapshot and every age from the same ``now()`` on the database
clock, never from this machine's. The results are plain dataclasses; whether
something needs attention is decided here too, so ``--json``, the text report and
the exit code can never disagree.

What needs attention is the user's to say (:mod:`drain.ops.attention`, ``--fail-on``): failed
jobs are never archived, so "any failed job" would keep a monitor alarming long
after the one failure it already reported; the default counts failures of the
last hour instead.

When the table has recurring jobs (``drain_schedules``, made by ``drain init``),
status lists them with their last and next fire: on a scale-to-zero deployment a
fire waits for the next run to start, so "due now" is normal between runs, and is
shown, never counted as needing attention. A table made by hand without
``drain_schedules`` simply has no such section.

Some things status cannot know, and does not pretend to: which queues have a
handler (handlers live in the user's code), and which sessions are listening on a
channel (PostgreSQL shows only a session's last statement; see
:class:`SessionGroup`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg

from drain.core.errors import SchemaError
from drain.core.literals import replace_literals
from drain.core.redact import redact
from drain.core.settings import DEFAULT_IDLE_TIMEOUT
from drain.core.settings.defaults import DEFAULT_FAIL_ON, DEFAULT_MAX_TRANSACTION_AGE
from drain.core.settings.defaults import DEFAULT_STATUS_ERRORS as DEFAULT_ERRORS
from drain.core.settings.defaults import DEFAULT_STATUS_RUNS as DEFAULT_RUNS
from drain.core.table import SCHEMA_VERSION, JobTable
from drain.ops import status_rates
from drain.ops.attention import FailOn, attention, parse_fail_on
from drain.store import rates, recurring, schema
from drain.store.rates import QueueRate
from drain.store.sqlfiles import statement_for

ERROR_LENGTH = 200
QUERY_LENGTH = 200
# How much of a statement is read to replace its literals before it is cut to
# QUERY_LENGTH: pg_stat_activity keeps 1 kB unless track_activity_query_size says more.
QUERY_READ = 8192
TRANSACTIONS_SHOWN = 3


@dataclass(frozen=True)
class QueueCounts:
    """One queue's jobs by state; ages in seconds, None when there is no such job."""

    queue: str
    ready: int
    scheduled: int
    running: int
    expired: int
    done: int
    failed: int
    oldest_ready_seconds: float | None
    next_scheduled_seconds: float | None

    @property
    def total(self) -> int:
        return self.ready + self.scheduled + self.running + self.done + self.failed


@dataclass(frozen=True)
class ExpiredLease:
    """A running job whose lease ran out: its worker is gone or late; a run will reap it."""

    id: int
    queue: str
    attempts: int
    max_attempts: int
    expired_seconds: float | None


@dataclass(frozen=True)
class FailedJob:
    """A job that failed for good, with its last error (redacted, cut short)."""

    id: int
    queue: str
    attempts: int
    error: str | None
    due_seconds_ago: float | None


@dataclass(frozen=True)
class RunRecord:
    """One row of ``drain_runs``."""

    started_at: datetime
    finished_seconds_ago: float
    seconds: float
    claimed: int
    done: int
    retried: int
    failed: int
    lost: int
    reaped: int
    released: int
    archived: int
    exit_reason: str
    exit_code: int
    error: str | None


@dataclass(frozen=True)
class TableHealth:
    """The queue table as vacuum sees it; ``*_seconds`` are ages, None for never."""

    live_rows: int
    dead_rows: int
    last_autovacuum_seconds: float | None
    last_vacuum_seconds: float | None
    last_analyze_seconds: float | None
    table_bytes: int
    index_bytes: int


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction that keeps vacuum from removing dead rows in this database.

    ``kind`` is ``session`` or ``prepared transaction`` (whose ``application_name``
    is its gid). ``query`` is set only when asked for (``--verbose``). For another
    role's session, state and ages are None unless this role may read all
    statistics; its xmin is visible to everyone.
    """

    kind: str
    pid: int | None
    application_name: str
    user: str | None
    state: str | None
    transaction_seconds: float | None
    state_seconds: float | None
    xmin_age: int | None
    query: str | None


@dataclass(frozen=True)
class SessionGroup:
    """Other sessions on the server alike in database, application, role, kind and state.

    ``awake`` groups keep a scale-to-zero compute awake: not idle, or idle for
    less than the idle timeout. ``listening`` counts sessions whose last statement
    was ``LISTEN``; a listener that ran anything since cannot be told from any
    idle session, so it is a lower bound. ``hidden`` sessions belong to roles
    whose state this role may not read.
    """

    database: str | None
    application_name: str
    user: str | None
    backend_type: str | None
    state: str | None
    hidden: bool
    awake: bool
    sessions: int
    listening: int
    latest_change_seconds: float | None
    earliest_change_seconds: float | None


@dataclass(frozen=True)
class RecurringRow:
    """One recurring job of ``drain_schedules``, read in the status's snapshot.

    ``late_seconds`` is how long after its last fire time the run that enqueued
    it started (None before its first fire); ``due`` says its next fire is at or
    before the database's time, so the next run to start fires it.
    """

    name: str
    cron: str
    time_zone: str
    queue: str
    catch_up: str
    last_fire: datetime | None
    late_seconds: float | None
    next_fire: datetime
    due: bool

    @classmethod
    def of(cls, row: recurring.RecurringJob) -> RecurringRow:
        return cls(
            name=row.name,
            cron=row.cron,
            time_zone=row.time_zone,
            queue=row.queue,
            catch_up=row.catch_up,
            last_fire=row.last_fire,
            late_seconds=row.late,
            next_fire=row.next_fire,
            due=row.next_fire <= row.database_time,
        )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["last_fire"] = None if self.last_fire is None else self.last_fire.isoformat()
        data["next_fire"] = self.next_fire.isoformat()
        return data


@dataclass(frozen=True)
class Status:
    """All of ``drain status``, and what in it needs attention."""

    table: JobTable
    server_version: str
    database_time: datetime
    schema_version: int | None
    drift: list[str]
    queues: list[QueueCounts]
    expired: list[ExpiredLease]
    failed: list[FailedJob]
    runs: list[RunRecord] | None
    health: TableHealth
    transactions: list[OpenTransaction]
    sessions: list[SessionGroup]
    notification_queue_usage: float
    sees_all_sessions: bool
    idle_timeout: float
    max_transaction_age: float
    fail_on: FailOn = field(default_factory=FailOn)
    recent_failures: int | None = None
    attention: list[str] = field(default_factory=list)
    # None when the table has no drain_schedules beside it (made by hand, or before it existed)
    schedules: list[RecurringRow] | None = None
    # Ready jobs by queue and priority, highest first; None without the priority column.
    priorities: status_rates.Priorities | None = None
    # The rate each rated queue was last run with (--queue-rate), and its ready jobs.
    rates: list[QueueRate] = field(default_factory=list)

    @property
    def totals(self) -> dict[str, int]:
        keys = ("ready", "scheduled", "running", "expired", "done", "failed")
        return {key: sum(getattr(q, key) for q in self.queues) for key in keys}

    @property
    def oldest_ready_seconds(self) -> float | None:
        ages = [q.oldest_ready_seconds for q in self.queues if q.oldest_ready_seconds is not None]
        return max(ages) if ages else None

    @property
    def oldest_transaction(self) -> OpenTransaction | None:
        return self.transactions[0] if self.transactions else None

    @property
    def awake_sessions(self) -> list[SessionGroup]:
        return [group for group in self.sessions if group.awake]

    @property
    def listening(self) -> int:
        return sum(group.listening for group in self.sessions)

    @property
    def hidden_sessions(self) -> int:
        return sum(group.sessions for group in self.sessions if group.hidden)

    @property
    def exit_code(self) -> int:
        return 1 if self.attention else 0

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data, with the same numbers the text shows."""
        return {
            "table": self.table.qualified,
            "server_version": self.server_version,
            "database_time": self.database_time.isoformat(),
            "schema": {
                "version": self.schema_version,
                "expected_version": SCHEMA_VERSION,
                "drift": self.drift,
            },
            "totals": self.totals,
            "oldest_ready_seconds": self.oldest_ready_seconds,
            "queues": [asdict(q) for q in self.queues],
            "expired_leases": [asdict(e) for e in self.expired],
            "failed_jobs": [asdict(f) for f in self.failed],
            "runs": None if self.runs is None else [_run_dict(r) for r in self.runs],
            "schedules": (
                None if self.schedules is None else [job.as_dict() for job in self.schedules]
            ),
            "health": asdict(self.health),
            "oldest_transaction": (
                asdict(self.oldest_transaction) if self.oldest_transaction else None
            ),
            "open_transactions": [asdict(t) for t in self.transactions],
            "awake": {
                "idle_timeout_seconds": self.idle_timeout,
                "sessions": [asdict(g) for g in self.awake_sessions],
                "idle_sessions": sum(g.sessions for g in self.sessions if not g.awake),
                "listening": self.listening,
                "notification_queue_usage": self.notification_queue_usage,
                "hidden_sessions": self.hidden_sessions,
                "sees_all_sessions": self.sees_all_sessions,
            },
            "priorities": status_rates.priorities_data(self.priorities),
            "rates": status_rates.rates_data(self.rates),
            "fail_on": str(self.fail_on),
            "recent_failures": self.recent_failures,
            "attention": self.attention,
            "exit_code": self.exit_code,
        }


def _run_dict(run: RunRecord) -> dict[str, Any]:
    data = asdict(run)
    data["started_at"] = run.started_at.isoformat()
    return data


def read(
    conn: psycopg.Connection[Any],
    table: JobTable,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    max_transaction_age: float = DEFAULT_MAX_TRANSACTION_AGE,
    errors: int = DEFAULT_ERRORS,
    runs: int = DEFAULT_RUNS,
    with_query: bool = False,
    fail_on: FailOn | None = None,
) -> Status:
    """Read the whole status of ``table`` in one short read-only transaction.

    ``fail_on`` (the default conditions when None) decides what needs attention.

    Raises :class:`~drain.core.errors.SchemaError` when the queue table does not exist;
    drift and version differences are reported, not raised, since status is
    where a user goes to find them.
    """
    conditions = parse_fail_on(DEFAULT_FAIL_ON) if fail_on is None else fail_on
    limits = _Limits(idle_timeout, max_transaction_age, errors, runs, with_query)
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        status = _read_all(conn, table, limits, conditions)
    status.attention.extend(attention(status))
    return status


class _Limits(NamedTuple):
    idle_timeout: float
    max_transaction_age: float
    errors: int
    runs: int
    with_query: bool


def _read_all(
    conn: psycopg.Connection[Any], table: JobTable, limits: _Limits, conditions: FailOn
) -> Status:
    inspection = schema.inspect(conn, table)
    if not inspection.jobs_exists or inspection.table_oid is None:
        raise SchemaError(
            f"queue table {table.qualified} does not exist; create it with `drain init`"
        )
    server = _one(conn, table, "status_server", {})
    recent = None
    if conditions.failed_since is not None:
        recent = _recent_failures(
            conn, table, conditions.failed_since, runs_exist=inspection.runs_exists
        )
    sessions_params = {"idle_timeout": timedelta(seconds=limits.idle_timeout)}
    status = Status(
        table=table,
        server_version=server[0],
        database_time=server[1],
        schema_version=inspection.version,
        drift=inspection.drift(),
        queues=[QueueCounts(*row) for row in _all(conn, table, "status_queues", {})],
        expired=[
            ExpiredLease(*row)
            for row in _all(conn, table, "status_expired", {"limit": limits.errors})
        ],
        failed=_failed_jobs(conn, table, limits.errors),
        runs=_run_history(conn, table, limits.runs) if inspection.runs_exists else None,
        health=TableHealth(
            *_one(conn, table, "status_health", {"table_oid": inspection.table_oid})
        ),
        transactions=_open_transactions(conn, table, limits.with_query),
        sessions=[
            SessionGroup(*row) for row in _all(conn, table, "status_sessions", sessions_params)
        ],
        notification_queue_usage=float(server[2]),
        sees_all_sessions=bool(server[3]),
        idle_timeout=limits.idle_timeout,
        max_transaction_age=limits.max_transaction_age,
        fail_on=conditions,
        recent_failures=recent,
        schedules=(
            [RecurringRow.of(row) for row in recurring.schedules(conn, table=table)]
            if inspection.schedules_exists
            else None
        ),
        priorities=status_rates.read_priorities(conn, table) if inspection.has_priority else None,
        rates=rates.queue_rates(conn, table),
    )
    return status


def _failed_jobs(conn: psycopg.Connection[Any], table: JobTable, limit: int) -> list[FailedJob]:
    params = {"limit": limit, "error_length": ERROR_LENGTH}
    return [
        FailedJob(row[0], row[1], row[2], _clean(row[3]), row[4])
        for row in _all(conn, table, "status_failed", params)
    ]


def _run_history(conn: psycopg.Connection[Any], table: JobTable, limit: int) -> list[RunRecord]:
    params = {"jobs_table": table.qualified, "limit": limit}
    return [
        replace(record, error=_clean(record.error))
        for record in (RunRecord(*row) for row in _all(conn, table, "status_runs", params))
    ]


def _open_transactions(
    conn: psycopg.Connection[Any], table: JobTable, with_query: bool
) -> list[OpenTransaction]:
    params = {"with_query": with_query, "query_length": QUERY_READ, "limit": TRANSACTIONS_SHOWN}
    return [
        replace(found, query=shown_statement(found.query))
        for found in (
            OpenTransaction(*row) for row in _all(conn, table, "status_transactions", params)
        )
    ]


def _recent_failures(
    conn: psycopg.Connection[Any], table: JobTable, window: float, *, runs_exist: bool
) -> int:
    """Jobs failed for good within ``window`` seconds: a lower bound from two sources.

    The jobs table keeps no failure time and the run table misses a run killed
    before it recorded itself; each count is certain as far as it goes, so the
    larger one is the best the database can say.
    """
    interval = timedelta(seconds=window)
    in_table = int(_one(conn, table, "status_failed_since", {"window": interval})[0])
    if not runs_exist:
        return in_table
    params = {"jobs_table": table.qualified, "window": interval}
    by_runs = int(_one(conn, table, "status_runs_failed", params)[0])
    return max(in_table, by_runs)


def shown_statement(text: str | None) -> str | None:
    """Another session's statement as status shows it: every literal replaced, then cut.

    A literal may hold anything (a password, an API key given to ``set_config``),
    so none is shown, in any quoting form (:mod:`drain.core.literals`).
    """
    if text is None:
        return None
    shown = " ".join(replace_literals(text).split())
    if len(shown) > QUERY_LENGTH:
        shown = shown[:QUERY_LENGTH].rstrip() + "..."
    return redact(shown)


def _clean(text: str | None) -> str | None:
    """Error texts may quote a connection string: never show a password."""
    if text is None:
        return None
    return redact(" ".join(text.split()))


def _one(
    conn: psycopg.Connection[Any], table: JobTable, name: str, params: dict[str, Any]
) -> tuple[Any, ...]:
    row = conn.execute(statement_for(table, name), params).fetchone()
    assert row is not None
    return tuple(row)


def _all(
    conn: psycopg.Connection[Any], table: JobTable, name: str, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(statement_for(table, name), params).fetchall()]
