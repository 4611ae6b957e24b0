"""What ``drain report`` reads: one snapshot of the queue table and its recorded runs.

Everything is read in one read-only REPEATABLE READ transaction, so the queues,
the failures and the runs are one snapshot and every age comes from one
``now()`` on the database clock, which the page shows as its "as of". The
reading is :func:`drain.ops.status.read`'s, inside that snapshot, so the report
and ``drain status`` can never count differently. The awake periods are each
run's span plus the idle timeout, merged where they touch: ``drain plan``'s
model (:mod:`drain.planning.drawing`), so a plan and a week that happened compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drain.core.errors import EXIT_OK, EXIT_WORK_LEFT, UsageError
from drain.core.settings import DEFAULT_IDLE_TIMEOUT
from drain.core.settings.defaults import DEFAULT_REPORT_DAYS
from drain.core.table import JobTable
from drain.observe.words import reason_text
from drain.ops import status
from drain.planning import drawing, plan

if TYPE_CHECKING:
    import psycopg

MAX_DAYS = 366.0
# Runs read from drain_runs, newest first: a week of runs every minute is 10,080.
MAX_RUNS = 50_000
FAILED_SHOWN = 20
# The table of recent runs: enough to see a pattern, few enough to read.
RECENT_RUNS = 20
APPLICATION_NAME = "drain report"


@dataclass(frozen=True)
class RunSpan:
    """One recorded run in the window, on the database clock (POSIX seconds)."""

    record: status.RunRecord
    start: float
    end: float

    @property
    def processed(self) -> int:
        return self.record.done + self.record.retried + self.record.failed

    @property
    def jobs_per_second(self) -> float:
        seconds = self.record.seconds
        return self.processed / seconds if seconds > 0 else 0.0

    @property
    def kind(self) -> str:
        """How the run ended, as :data:`drain.planning.drawing.KINDS` names it.

        Exit 0 drained (or had nothing of its own to do); exit 3 left ready work
        behind (the budget ran out, a signal, a full cap), which a scheduler's
        next run takes up; anything else failed, and someone should look.
        """
        if self.record.exit_code == EXIT_OK:
            return ""
        return "left" if self.record.exit_code == EXIT_WORK_LEFT else "failed"

    @property
    def failed(self) -> bool:
        return self.kind == "failed"

    @property
    def ended(self) -> str:
        """The run's end in words, as the summary line says it: ``stopped at its time budget``."""
        reason = self.record.exit_reason
        return reason_text(reason)


@dataclass(frozen=True)
class Report:
    """What the page shows: the status snapshot, and the runs of the window oldest first.

    ``awake`` holds the merged awake periods, clipped to the window; ``runs`` the
    runs that started in it, as ``drain plan --dsn`` counts a window's runs;
    ``last_run`` and ``last_success`` the newest run and the newest that drained,
    looked for among every run read, inside the window or not.
    """

    status: status.Status
    days: float
    idle_timeout: float
    runs: tuple[RunSpan, ...]
    awake: tuple[tuple[float, float], ...]
    # drain_runs held more runs than were read: the oldest of the window may be missing
    truncated: bool = False
    last_run: RunSpan | None = None
    last_success: RunSpan | None = None

    @property
    def end(self) -> float:
        return self.status.database_time.timestamp()

    @property
    def begin(self) -> float:
        return self.end - self.days * plan.DAY

    @property
    def awake_seconds(self) -> float:
        return sum(b - a for a, b in self.awake)


def read(
    conn: psycopg.Connection[Any],
    table: JobTable,
    *,
    days: float = DEFAULT_REPORT_DAYS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
) -> Report:
    """Read the report of ``table`` over the last ``days``, in one read-only snapshot.

    Raises :class:`~drain.core.errors.SchemaError` when the queue table does not
    exist, as ``drain status`` does.
    """
    check_days(days)
    with conn.transaction():
        # The isolation level must come before any statement of the transaction;
        # status.read's own transaction is then a savepoint inside this snapshot.
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        found = status.read(
            conn, table, idle_timeout=idle_timeout, errors=FAILED_SHOWN, runs=MAX_RUNS
        )
    return assemble(found, days, idle_timeout)


def assemble(found: status.Status, days: float, idle_timeout: float) -> Report:
    """The report of a status snapshot: its runs placed on the database clock and merged."""
    now = found.database_time.timestamp()
    begin = now - days * plan.DAY
    spans = [
        RunSpan(record, record.started_at.timestamp(), now - record.finished_seconds_ago)
        for record in reversed(found.runs or [])
    ]
    awake = drawing.awake_spans(((run.start, run.end) for run in spans), idle_timeout)
    return Report(
        status=found,
        days=days,
        idle_timeout=idle_timeout,
        runs=tuple(run for run in spans if run.start >= begin),
        awake=tuple(drawing.clip(awake, begin, now)),
        truncated=len(spans) >= MAX_RUNS and spans[0].start >= begin,
        last_run=spans[-1] if spans else None,
        last_success=next((run for run in reversed(spans) if run.kind == ""), None),
    )


def check_days(days: float, option: str = "--days") -> None:
    """A window of a positive number of days, at most a year (as drain plan's)."""
    if not 0 < days <= MAX_DAYS:
        raise UsageError(f"{option} must be above 0 and at most {MAX_DAYS:g}")
