"""``drain status``: what the queue is doing, what is stuck, and what keeps the database awake.

Reading happens in :mod:`drain.ops.status`; this module renders the report and exits
0 when all is well or 1 when something ``--fail-on`` counts needs attention, so
the command can serve as a health check.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from drain.cli import common
from drain.core import rates
from drain.core.durations import format_duration
from drain.core.errors import UsageError
from drain.core.settings import commands
from drain.core.table import SCHEMA_VERSION
from drain.ops import attention, status

SESSION_GROUPS_SHOWN = 10

EXAMPLES = """\
Examples:

  drain status --dsn postgresql://app@db.example.com/app

  drain status --json | jq .totals

  drain status --idle-timeout 5m       # a Neon compute's suspend timeout

  drain status --verbose               # with the oldest transaction's query

  drain status --fail-on failed-since=15m,ready-older-than=30m,expired-leases

Exit codes: 0 healthy, 1 needs attention (what --fail-on counts; by default
a job failed in the last hour, a ready job waiting over an hour, an expired
lease, a transaction holding vacuum back too long, schema drift) or the
status could not be read, 2 usage error (no database given, a bad option).
"""


@common.command_of(commands.STATUS)
def status_command(
    *,
    idle_timeout: float,
    max_transaction_age: float,
    fail_on: str,
    errors: int,
    runs: int,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Show the queues, stuck and failed jobs, recent runs, and what keeps the compute awake.

    Per queue and state: ready and scheduled jobs, stuck and failed ones, the
    recent runs, table health and the oldest transaction holding vacuum back.

    Ages are read on the database clock. Which queues have a handler cannot be
    known here (handlers live in your code), so ready jobs are not called stuck.
    """
    common.configure_logging(verbose)
    target = common.target_of(connection)
    timeout, max_age = idle_timeout, max_transaction_age
    with common.errors_as_exit_codes(verbose):
        if errors < 0 or runs < 0:
            raise UsageError("--errors and --runs cannot be negative")
        try:
            conditions = attention.parse_fail_on(fail_on)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        session = common.session_of(connection, "drain status")
        try:
            report = session.call(
                lambda conn: status.read(
                    conn,
                    target,
                    idle_timeout=timeout,
                    max_transaction_age=max_age,
                    errors=errors,
                    runs=runs,
                    with_query=verbose,
                    fail_on=conditions,
                )
            )
        finally:
            session.close()
    if json:
        common.print_json(report.as_dict())
    else:
        typer.echo("\n".join(render(report)))
    raise typer.Exit(report.exit_code)


# -- rendering --------------------------------------------------------------------------


def render(report: status.Status) -> list[str]:
    """The report as lines of text, one section after another."""
    lines = [_title(report), ""]
    lines += _queues(report)
    lines += _priorities(report)
    lines += _rates(report)
    lines += _stuck(report)
    lines += _runs(report)
    lines += _schedules(report)
    lines += _health(report)
    lines += _awake(report)
    lines.append("")
    if report.attention:
        lines.append("needs attention:")
        lines += [f"  - {item}" for item in report.attention]
    else:
        lines.append(f"healthy: nothing that --fail-on {report.fail_on} counts")
    return lines


def _ago(seconds: float | None, never: str = "never") -> str:
    return never if seconds is None else f"{format_duration(round(max(seconds, 0.0)))} ago"


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(round(max(seconds, 0.0)))


def _size(count: int) -> str:
    value = float(count)
    for unit in ("bytes", "kB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _title(report: status.Status) -> str:
    version = report.schema_version
    if version is None:
        schema_text = "made by hand, no schema version recorded"
    elif version == SCHEMA_VERSION:
        schema_text = f"schema version {version}"
    else:
        schema_text = f"schema version {version}, expected {SCHEMA_VERSION}"
    if report.drift:
        schema_text += ", drift: " + "; ".join(report.drift)
    when = report.database_time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return (
        f"{report.table.qualified} ({schema_text}) on PostgreSQL {report.server_version}, "
        f"database time {when}"
    )


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def _queues(report: status.Status) -> list[str]:
    if not report.queues:
        return ["queues: none (the table is empty)"]
    header = ["queue", "ready", "scheduled", "running", "expired", "done", "failed"]
    header += ["oldest ready", "next due"]
    rows = [header]
    for q in report.queues:
        counts = [q.ready, q.scheduled, q.running, q.expired, q.done, q.failed]
        ages = [_age(q.oldest_ready_seconds), _age(q.next_scheduled_seconds)]
        rows.append([q.queue, *(f"{n:,}" for n in counts), *ages])
    if len(report.queues) > 1:
        totals = report.totals
        keys = ("ready", "scheduled", "running", "expired", "done", "failed")
        rows.append(
            ["(all)", *(f"{totals[k]:,}" for k in keys), _age(report.oldest_ready_seconds), ""]
        )
    return ["queues:", *_table(rows)]


def _priorities(report: status.Status) -> list[str]:
    """Ready jobs by priority, where the table has the column: ``emails: 10: 3, 0: 117``."""
    if report.priorities is None:
        return []
    if not report.priorities:
        return ["ready by priority: none ready"]
    lines = ["ready by priority (highest first):"]
    for queue, counts in report.priorities.items():
        shown = ", ".join(f"{priority}: {ready:,}" for priority, ready in counts)
        lines.append(f"  {queue}: {shown}")
    return lines


def _rates(report: status.Status) -> list[str]:
    """What each queue's rate (as its last run was given it) means for its ready jobs."""
    if not report.rates:
        return []
    lines = ["queue rates (as the last run given --queue-rate set them):"]
    lines += [
        f"  {rates.backlog_line(entry.queue, entry.rate, entry.ready)}" for entry in report.rates
    ]
    return lines


def _stuck(report: status.Status) -> list[str]:
    lines: list[str] = []
    totals = report.totals
    if report.expired:
        lines += ["", f"expired leases ({totals['expired']:,}, longest expired first):"]
        for lease in report.expired:
            when = (
                "no lease at all"
                if lease.expired_seconds is None
                else f"expired {_ago(lease.expired_seconds)}"
            )
            lines.append(
                f"  job {lease.id} ({lease.queue}), attempt {lease.attempts} of "
                f"{lease.max_attempts}, {when}"
            )
    if report.failed:
        lines += ["", f"failed jobs ({totals['failed']:,}, newest first):"]
        for job in report.failed:
            lines.append(
                f"  job {job.id} ({job.queue}) after {job.attempts} attempt(s): "
                f"{job.error or '(no error recorded)'}"
            )
    return lines


def _runs(report: status.Status) -> list[str]:
    if report.runs is None:
        return ["", "runs: no run table (drain init creates drain_runs)"]
    if not report.runs:
        return ["", "runs: none recorded yet"]
    lines = ["", "last runs (newest first):"]
    for run in report.runs:
        counts = (
            f"claimed {run.claimed:,}, done {run.done:,}, retried {run.retried:,}, "
            f"failed {run.failed:,}, lost {run.lost:,}, reaped {run.reaped:,}"
        )
        line = (
            f"  {_ago(run.finished_seconds_ago):>9}  {run.exit_reason} (exit {run.exit_code}) "
            f"in {run.seconds:.1f}s: {counts}"
        )
        if run.error:
            line += f"; error: {run.error}"
        lines.append(line)
    return lines


def _schedules(report: status.Status) -> list[str]:
    """The recurring jobs, when the table has drain_schedules; a fire waits for the next run."""
    if report.schedules is None:
        return []
    if not report.schedules:
        return ["", "recurring jobs: none (drain schedule add makes one)"]
    header = ["name", "cron", "zone", "queue", "last fire", "late", "next fire"]
    rows = [header]
    for job in report.schedules:
        late = "-" if job.late_seconds is None else format_duration(round(job.late_seconds))
        following = _fire_time(job.next_fire, job.time_zone)
        rows.append(
            [
                job.name,
                job.cron,
                job.time_zone,
                job.queue,
                _fire_time(job.last_fire, job.time_zone),
                late,
                f"{following}, due now" if job.due else following,
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    table = [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    due = sum(job.due for job in report.schedules)
    title = "recurring jobs (fire times on each job's clock; late: from a fire to the run that "
    title += "enqueued it)"
    lines = ["", f"{title}:", *table]
    if due:
        lines.append(f"  {due} due now: the next run to start enqueues them")
    return lines


def _fire_time(moment: datetime | None, time_zone: str) -> str:
    """A fire time on the job's own clock, the way its cron reads it."""
    if moment is None:
        return "-"
    # A zone written by hand that this machine lacks: the time as the database gave it.
    with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
        moment = moment.astimezone(ZoneInfo(time_zone))
    return moment.strftime("%Y-%m-%d %H:%M %Z")


def _health(report: status.Status) -> list[str]:
    h = report.health
    lines = [
        "",
        f"table health: {h.live_rows:,} live rows, {h.dead_rows:,} dead; "
        f"last autovacuum {_ago(h.last_autovacuum_seconds)}, "
        f"last vacuum {_ago(h.last_vacuum_seconds)}, "
        f"last analyze {_ago(h.last_analyze_seconds)}; "
        f"{_size(h.table_bytes)} table, {_size(h.index_bytes)} indexes",
    ]
    oldest = report.oldest_transaction
    if oldest is None:
        lines.append("oldest transaction holding vacuum back: none")
        return lines
    lines.append("oldest transaction holding vacuum back: " + _transaction(oldest))
    if oldest.query:
        lines.append(f"  its last statement: {oldest.query}")
    return lines


def _transaction(t: status.OpenTransaction) -> str:
    who = (
        f"prepared transaction {t.application_name!r}"
        if t.kind == "prepared transaction"
        else f"pid {t.pid} ({t.application_name or 'no application_name'}, {t.user})"
    )
    state = f" {t.state}" if t.state and t.kind == "session" else ""
    if t.transaction_seconds is None:
        age = ", its state and age hidden from this role"
    else:
        age = f", open for {_age(t.transaction_seconds)}"
    xids = f", its horizon {t.xmin_age:,} transaction ids old" if t.xmin_age is not None else ""
    return f"{who}{state}{age}{xids}"


def _awake(report: status.Status) -> list[str]:
    timeout = format_duration(report.idle_timeout)
    awake = report.awake_sessions
    lines = ["", f"keeping the compute awake (idle timeout {timeout}):"]
    if not awake:
        seen = " this role can see" if report.hidden_sessions else ""
        lines.append(
            f"  nothing{seen}: no other session is busy or was active in the last {timeout}"
        )
    for group in awake[:SESSION_GROUPS_SHOWN]:
        lines.append("  " + _group(group, report.idle_timeout))
    if len(awake) > SESSION_GROUPS_SHOWN:
        rest = awake[SESSION_GROUPS_SHOWN:]
        lines.append(
            f"  ... and {sum(g.sessions for g in rest):,} more session(s) in {len(rest)} "
            "group(s) (--json lists them all)"
        )
    idle = sum(g.sessions for g in report.sessions if not g.awake and not g.hidden)
    if idle:
        lines.append(
            f"  (plus {idle:,} idle connection(s) quiet for longer: they let a compute "
            "suspend, except on platforms that pause only with no connection at all)"
        )
    if report.hidden_sessions:
        lines.append(
            f"  {report.hidden_sessions:,} session(s) of other roles cannot be seen by this "
            "role (grant it pg_read_all_stats)"
        )
    lines.append("  " + _listening(report))
    return lines


def _group(group: status.SessionGroup, idle_timeout: float) -> str:
    name = group.application_name or "no application_name"
    who = f"{name} ({group.user}" + (f" on {group.database})" if group.database else ")")
    if group.backend_type not in (None, "client backend"):
        who = f"{group.backend_type} {who}"
    count = f"{group.sessions} session" + ("s" if group.sessions != 1 else "")
    if group.state == "idle":
        left = idle_timeout - (group.latest_change_seconds or 0.0)
        detail = (
            f"idle, last active {_ago(group.latest_change_seconds)} (awake for {_age(left)} more)"
        )
    else:
        detail = f"{group.state or 'state hidden'} for {_age(group.earliest_change_seconds)}"
    return f"{who}: {count} {detail}"


def _listening(report: status.Status) -> str:
    seen = report.listening
    queue_use = report.notification_queue_usage
    lagging = f"; the notification queue is {queue_use:.2%} full" if queue_use > 0 else ""
    if seen:
        return (
            f"listening: {seen} session(s) whose last statement was LISTEN{lagging} "
            "(a listener reconnecting after a suspend resumes the compute)"
        )
    return (
        f"listening: none seen{lagging} (only a session whose last statement was LISTEN "
        "shows as one)"
    )
