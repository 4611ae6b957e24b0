"""Opening a run: which queues it drains, the schema and server checks, the runner slot,
and the recurring jobs that came due.

The checks run on the first connection and again on every new one after a
lost connection: a server that came back read-only (a standby promoted) must
stop the run before anything is repeated on it, and the runner slot (a session
advisory lock) is gone with the old session.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg

from drain.core.config import RunConfig
from drain.core.errors import DatabaseError, SchemaError, UsageError
from drain.core.summary import Summary
from drain.core.table import JobTable
from drain.runner.handlers import HandlerFunc
from drain.store import fencing, firing, schema, upkeep
from drain.store.db import Session

log = logging.getLogger("drain")


def choose_queues(wanted: Sequence[str], handlers: Mapping[str, HandlerFunc]) -> list[str]:
    """The queues to drain: those asked for, or every queue with a handler by default.

    A queue asked for that no handler serves is a usage error, not a note: a typo
    in ``--queue`` (or ``queues=``) would otherwise exit 0 on every run a scheduler
    starts, for ever, while that queue's jobs wait.
    """
    if not wanted:
        return list(handlers)
    unserved = [name for name in wanted if name not in handlers]
    if unserved:
        raise UsageError(_unserved(unserved, handlers))
    return list(wanted)


def _unserved(names: Sequence[str], handlers: Mapping[str, HandlerFunc]) -> str:
    """One line: the queues no handler serves, a close name for each, the ones served."""
    shown = []
    for name in names:
        close = difflib.get_close_matches(name, list(handlers), n=1)
        shown.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    served = ", ".join(repr(name) for name in handlers) or "none"
    return f"no handler serves --queue {', '.join(shown)}; the queues with a handler: {served}"


def first_check(
    inspection: schema.Inspection, config: RunConfig, queues: Sequence[str], summary: Summary
) -> bool:
    """Whether the run goes on to work; when not, the summary says why (exit 0)."""
    inspection.check_runnable()
    max_runners, table = config.max_runners, config.table
    if max_runners and inspection.runner_slot is None:
        summary.exit_reason = "runners-busy"
        summary.note("runners_busy", runs=max_runners, table=table.qualified)
        return False
    if not queues:
        summary.exit_reason = "no-handlers"
        summary.note("no_handlers")
        return False
    return True


def recheck(
    table: JobTable, max_runners: int, slot_lost: Callable[[], None]
) -> Callable[[psycopg.Connection[Any]], None]:
    """The check a new connection mid-run gets before any statement is repeated on it.

    A read-only server raises; a runner slot another run took meanwhile calls
    ``slot_lost``, and the run leaves in order (exit reason runners-busy). Driver
    errors go back to the session, which retries a connection that broke while
    checked.
    """

    def check(conn: psycopg.Connection[Any]) -> None:
        inspection = schema.inspect(conn, table, max_runners=max_runners)
        inspection.check_runnable()
        if max_runners and inspection.runner_slot is None:
            log.warning("the runner slot was lost with the connection and is taken; stopping")
            slot_lost()

    return check


def reap_and_read_due(
    conn: psycopg.Connection[Any], table: JobTable, *, schedules: bool
) -> tuple[upkeep.ReapOutcome, list[firing.Due]]:
    """Reap expired leases and read the recurring jobs that came due, in one round trip."""
    if not schedules:
        return upkeep.reap(conn, table), []
    try:
        with conn.pipeline():
            reaped = upkeep.send_reap(conn, table)
            due = firing.send_due(conn, table)
        return reaped.result(), due.result()
    except psycopg.Error as exc:
        if not fencing.is_row_refusal(exc):
            raise
    # the table refused a row of the reap: reaped apart, the refused row failed alone
    return upkeep.reap_apart(conn, table), firing.send_due(conn, table).result()


def fire_schedules(
    session: Session,
    inspection: schema.Inspection,
    due: Sequence[firing.Due],
    queues: Sequence[str],
    summary: Summary,
) -> None:
    """Enqueue the recurring jobs that came due, and say what was fired in the summary.

    A schedule whose queue this run does not serve is fired all the same (another
    run may serve it) and named in a note, as is a schedule whose stored cron or
    zone cannot be used (written by hand, or by an older drain: ``*/61`` in the
    minutes), which is not fired. A statement that fails here (a role
    without the grants, a timeout) is noted and the run goes on to its work: the
    next run fires what this one could not.
    """
    try:
        fired = session.call(
            lambda conn: firing.fire_due(
                conn, inspection.table, due, runs_exist=inspection.runs_exists
            )
        )
    except (DatabaseError, SchemaError) as exc:
        summary.note("recurring_not_fired", error=str(exc))
        log.warning("recurring jobs not fired: %s", exc)
        return
    for entry in fired:
        if entry.refused is not None:
            summary.note("schedule_not_fired", schedule=entry.name, error=entry.refused)
            continue
        summary.fired += entry.enqueued
        if entry.skipped:
            summary.note(
                "fires_skipped",
                schedule=entry.name,
                skipped=entry.skipped,
                more=entry.more_skipped,
                catch_up=entry.catch_up,
            )
        if entry.enqueued and entry.queue not in queues:
            summary.note(
                "schedule_queue_unhandled",
                schedule=entry.name,
                enqueued=entry.enqueued,
                queue=entry.queue,
            )
