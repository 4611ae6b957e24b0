"""Recurring jobs kept in the database: the public API to add, replace, remove and list them.

A scale-to-zero deployment has no process alive at 07:00 to notice that the
digest is due, so the schedule lives in ``drain_schedules`` beside the queue
table, and every run fires what came due since the last one, right after it
reaps and before its first claim. Reading what is due is one cheap statement on
the schedule index (nothing is due on nearly every run, and croniter is not even
loaded then); firing is one more, :file:`sql/schedules_fire.sql`, which enqueues
the jobs and moves each schedule past them together, and only for a row still as
the run read it. Any number of runs racing therefore enqueue each fire exactly
once, and a schedule removed or changed meanwhile fires nothing stale.

A fire that comes due while a run is working is left to the next run: a run
checks once, before its first claim, so that a run never ends later because of
a schedule, and a run's work is what it found when it started.

Firing what came due is a run's step, apart in :mod:`drain.store.firing`. The
fire times themselves (the time zone, daylight-saving days, catch-up after a
long sleep) are :mod:`drain.planning.cron`'s arithmetic, which ``drain plan`` shares.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg

from drain.core.errors import SchemaError
from drain.core.settings.defaults import DEFAULT_CATCH_UP_LIMIT, DEFAULT_MAX_ATTEMPTS, MAX_ATTEMPTS
from drain.core.table import JobTable
from drain.planning.cron import (
    CATCH_UP_POLICIES,
    DEFAULT_CATCH_UP,
    CatchUp,
    ScheduleError,
)
from drain.store.producer import payload_text
from drain.store.sqlfiles import statement_for

MAX_CATCH_UP_LIMIT = 100_000


class RecurringJob(NamedTuple):
    """One recurring job as ``drain_schedules`` holds it."""

    name: str
    cron: str
    time_zone: str
    queue: str
    payload: str  # the JSON text, shown as stored
    max_attempts: int
    catch_up: str
    catch_up_limit: int
    next_fire: datetime
    last_fire: datetime | None
    fired_at: datetime | None
    created_at: datetime
    updated_at: datetime
    database_time: datetime

    @property
    def late(self) -> float | None:
        """Seconds from the last fire time to the run that enqueued it, if it fired."""
        if self.last_fire is None or self.fired_at is None:
            return None
        return max(0.0, (self.fired_at - self.last_fire).total_seconds())


def checked(
    name: str,
    cron_expression: str,
    queue: str,
    *,
    tz: str,
    catch_up: str,
    catch_up_limit: int,
    max_attempts: int,
) -> str:
    """The five-field cron expression, after every check that needs no database.

    Raises :class:`~drain.planning.cron.ScheduleError` (a usage error: exit 2) with one line
    for a bad name, cron, zone, policy or bound, and for a cron that never fires.
    """
    from drain.planning import cron

    if not name.strip():
        raise ScheduleError("the schedule's NAME is empty")
    if not queue.strip():
        raise ScheduleError("QUEUE is empty: name the queue the schedule's jobs go to")
    if catch_up not in CATCH_UP_POLICIES:
        raise ScheduleError(
            f"--catch-up must be one of {', '.join(CATCH_UP_POLICIES)}, not {catch_up!r}"
        )
    if not 1 <= catch_up_limit <= MAX_CATCH_UP_LIMIT:
        raise ScheduleError(f"--catch-up-limit must be between 1 and {MAX_CATCH_UP_LIMIT:,}")
    if not 1 <= max_attempts <= MAX_ATTEMPTS:
        raise ScheduleError(f"--max-attempts must be between 1 and {MAX_ATTEMPTS:,}")
    expression = cron.normalize(cron_expression)
    where = cron.zone(tz)
    cron.next_fire(expression, where, 0.0)  # raises for a cron that never fires
    return expression


def schedule(
    conn: psycopg.Connection[Any],
    name: str,
    cron: str,
    queue: str,
    payload: Any = None,
    *,
    tz: str = "UTC",
    catch_up: CatchUp = DEFAULT_CATCH_UP,
    catch_up_limit: int = DEFAULT_CATCH_UP_LIMIT,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
) -> bool:
    """Add the schedule ``name``, or replace it, in the caller's transaction.

    Returns True when it was added, False when it replaced one of that name.
    Like :func:`drain.enqueue`, nothing is committed here. A replaced schedule
    starts afresh: its next fire is the first after now on the database's clock.
    ``payload`` None is ``{}``.
    """
    from drain.planning import cron as cron_times

    target = table or JobTable()
    expression = checked(
        name,
        cron,
        queue,
        tz=tz,
        catch_up=catch_up,
        catch_up_limit=catch_up_limit,
        max_attempts=max_attempts,
    )
    text = payload_text({} if payload is None else payload)
    _require_tables(conn, target)
    now = _database_now(conn, target)
    following = cron_times.next_fire(expression, cron_times.zone(tz), now.timestamp())
    params = {
        "jobs_table": target.qualified,
        "name": name,
        "cron": expression,
        "time_zone": tz,
        "queue": queue,
        "payload": text,
        "max_attempts": max_attempts,
        "catch_up": catch_up,
        "catch_up_limit": catch_up_limit,
        "next_fire": datetime.fromtimestamp(following, now.tzinfo),
    }
    created = _one(conn.execute(statement_for(target, "schedule_upsert"), params))[0]
    return bool(created)


def unschedule(conn: psycopg.Connection[Any], name: str, *, table: JobTable | None = None) -> bool:
    """Remove the schedule ``name`` in the caller's transaction; False if there was none.

    Jobs it already enqueued stay queued.
    """
    target = table or JobTable()
    _require_tables(conn, target)
    cursor = conn.execute(
        statement_for(target, "schedule_delete"), {"jobs_table": target.qualified, "name": name}
    )
    return cursor.fetchone() is not None


def schedules(
    conn: psycopg.Connection[Any], *, table: JobTable | None = None
) -> list[RecurringJob]:
    """Every schedule of the queue table, by name."""
    target = table or JobTable()
    _require_tables(conn, target)
    cursor = conn.execute(statement_for(target, "schedule_list"), {"jobs_table": target.qualified})
    return [RecurringJob(*row) for row in cursor]


def _require_tables(conn: psycopg.Connection[Any], table: JobTable) -> None:
    """A schedule belongs to a queue table a run drains: one for a table that does not
    exist (a mistyped --table) would never fire, so it is an error, as in every command."""
    from drain.store import schema

    inspection = schema.inspect(conn, table)
    if not inspection.schedules_exists:
        raise SchemaError(
            f"there is no {table.schema}.{table.schedules_name} table; create it with `drain init`"
        )
    if not inspection.jobs_exists:
        raise SchemaError(
            f"queue table {table.qualified} does not exist; create it with `drain init`"
        )


def _database_now(conn: psycopg.Connection[Any], table: JobTable) -> datetime:
    """now() on the database's clock: a schedule's next fire counts from it, not from ours."""
    params = {"run_at": None, "delay": timedelta(0)}
    now: datetime = _one(conn.execute(statement_for(table, "database_time"), params))[0]
    return now


def _one(cursor: psycopg.Cursor[Any]) -> Any:
    row = cursor.fetchone()
    assert row is not None
    return row
