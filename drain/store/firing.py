"""A run's step that fires the recurring jobs come due: each fire enqueued once, by one run.

Every run fires what came due since the last one, right after it reaps and
before its first claim. Reading what is due is one cheap statement on the
schedule index (nothing is due on nearly every run, and croniter is not even
loaded then); firing is one more, :file:`sql/schedules_fire.sql`, which enqueues
the jobs and moves each schedule past them together, and only for a row still as
the run read it. Any number of runs racing therefore enqueue each fire exactly
once, and a schedule removed or changed meanwhile fires nothing stale. The
schedules themselves are kept through :mod:`drain.store.recurring`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg

from drain.core.table import JobTable
from drain.planning.cron import CatchUp, ScheduleError
from drain.store.params import Pending
from drain.store.sqlfiles import statement_for

if TYPE_CHECKING:
    from drain.planning.cron import DueFires

# A run-to-run gap shorter than this is not a schedule (runs fanned out at once, or
# re-triggered on exit 3): catch-up "none" accepts a fire at least this late.
MIN_CATCH_UP_WINDOW = 60.0


class Fired(NamedTuple):
    """What one run did for one due schedule."""

    name: str
    queue: str
    catch_up: str
    enqueued: int
    skipped: int  # due fires the catch-up policy skipped
    more_skipped: bool  # and more than that, past what was counted
    raced: bool  # another run (or an update) got to it first: nothing enqueued here
    refused: str | None = None  # why its stored cron or zone cannot be used: nothing fired


class Due(NamedTuple):
    """A row of ``schedules_due.sql``."""

    name: str
    cron: str
    time_zone: str
    queue: str
    catch_up: CatchUp
    catch_up_limit: int
    next_fire: datetime
    updated_at: datetime
    database_time: datetime


def send_due(conn: psycopg.Connection[Any], table: JobTable) -> Pending[list[Due]]:
    """Ask for the schedules whose next fire has come (sent now, read later).

    A run sends it in the same round trip as its reap: nothing is due on nearly
    every run, and then this is all recurring jobs cost it.
    """
    cursor = conn.execute(statement_for(table, "schedules_due"), {"jobs_table": table.qualified})
    return Pending(cursor, lambda cur: [Due(*row) for row in cur.fetchall()])


def fire_due(
    conn: psycopg.Connection[Any],
    table: JobTable,
    due: Sequence[Due] | None = None,
    *,
    runs_exist: bool = True,
) -> list[Fired]:
    """Enqueue every fire that has come due on the queue table's schedules.

    ``due`` is what :func:`send_due` read, if the caller has it already. The
    firing is one statement, atomic on its own, in autocommit or not.
    """
    if due is None:
        due = send_due(conn, table).result()
    if not due:
        return []
    window = _catch_up_window(conn, table, due) if runs_exist else MIN_CATCH_UP_WINDOW
    plans, refused = _plans(due, window)
    if not plans:
        return refused
    fired = dict(conn.execute(statement_for(table, "schedules_fire"), _fire_params(table, plans)))
    return refused + [_outcome(row, fires, fired.get(row.name)) for row, fires in plans]


def _catch_up_window(conn: psycopg.Connection[Any], table: JobTable, due: Sequence[Due]) -> float:
    """How late a fire may be for catch-up "none": the gap between runs, at least a minute."""
    if not any(row.catch_up == "none" for row in due):
        return MIN_CATCH_UP_WINDOW
    row = conn.execute(statement_for(table, "run_gap"), {"jobs_table": table.qualified}).fetchone()
    gap = None if row is None else row[0]
    return max(MIN_CATCH_UP_WINDOW, float(gap or 0.0))


def _plans(due: Sequence[Due], window: float) -> tuple[list[tuple[Due, DueFires]], list[Fired]]:
    """The fires of each due schedule, and the schedules whose stored cron or zone is refused."""
    from drain.planning import cron

    plans: list[tuple[Due, DueFires]] = []
    refused: list[Fired] = []
    for row in due:
        try:
            fires = cron.due_fires(
                row.cron,
                cron.zone(row.time_zone),
                first=row.next_fire.timestamp(),
                now=row.database_time.timestamp(),
                catch_up=row.catch_up,
                limit=row.catch_up_limit,
                window=window,
            )
        except ScheduleError as exc:
            # written by hand, or by another version of drain: report it, leave it alone
            refused.append(Fired(row.name, row.queue, row.catch_up, 0, 0, False, False, str(exc)))
            continue
        plans.append((row, fires))
    return plans, refused


def _outcome(row: Due, fires: DueFires, enqueued: int | None) -> Fired:
    """What firing did for ``row``: ``enqueued`` None when another run got to it first."""
    if enqueued is None:
        return Fired(row.name, row.queue, row.catch_up, 0, 0, False, raced=True)
    return Fired(
        row.name, row.queue, row.catch_up, enqueued, fires.skipped, fires.more_skipped, raced=False
    )


def _fire_params(table: JobTable, plans: Sequence[tuple[Due, DueFires]]) -> dict[str, Any]:
    """The arrays of ``schedules_fire.sql``: one entry per schedule, one per job to enqueue."""
    zone = plans[0][0].database_time.tzinfo

    def moment(stamp: float | None) -> datetime | None:
        return None if stamp is None else datetime.fromtimestamp(stamp, zone)

    fire_names, fire_times = [], []
    for row, fires in plans:
        fire_names += [row.name] * len(fires.fires)
        fire_times += [moment(stamp) for stamp in fires.fires]
    return {
        "jobs_table": table.qualified,
        "names": [row.name for row, _ in plans],
        "expected_next": [row.next_fire for row, _ in plans],
        "expected_updated": [row.updated_at for row, _ in plans],
        "new_last": [moment(fires.latest) for _, fires in plans],
        "new_next": [moment(fires.following) for _, fires in plans],
        "fire_names": fire_names,
        "fire_times": fire_times,
    }
