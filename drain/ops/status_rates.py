"""The flow part of ``drain status``: ready jobs by priority, and each rated queue's rate.

Both say how the ready jobs will leave rather than how many there are, and both
exist only where the table has what they need (the ``priority`` column, rows in
``drain_rates``), so they are read and turned into JSON apart from the counts
the rest of :mod:`drain.ops.status` reads; the report holds them as they are read.
"""

from __future__ import annotations

from typing import Any

import psycopg

from drain.core.table import JobTable
from drain.store.rates import QueueRate
from drain.store.sqlfiles import statement_for

# Ready jobs by queue, each as (priority, ready) pairs, highest priority first.
Priorities = dict[str, list[tuple[int, int]]]


def read_priorities(conn: psycopg.Connection[Any], table: JobTable) -> Priorities:
    """Each queue's ready jobs by priority, highest first (sql/status_priorities.sql)."""
    found: Priorities = {}
    rows = conn.execute(statement_for(table, "status_priorities"), {}).fetchall()
    for queue, priority, ready in rows:
        found.setdefault(str(queue), []).append((int(priority), int(ready)))
    return found


def priorities_data(priorities: Priorities | None) -> dict[str, list[dict[str, int]]] | None:
    """The priorities as JSON: None where the table has no priority column."""
    if priorities is None:
        return None
    return {
        queue: [{"priority": priority, "ready": ready} for priority, ready in counts]
        for queue, counts in priorities.items()
    }


def rates_data(found: list[QueueRate]) -> list[dict[str, Any]]:
    """Each rated queue as JSON, with how long its ready jobs take at its rate."""
    return [
        {
            "queue": entry.queue,
            "rate": entry.rate.text,
            "ready": entry.ready,
            "seconds_for_ready": entry.rate.seconds_for(entry.ready),
        }
        for entry in found
    ]
