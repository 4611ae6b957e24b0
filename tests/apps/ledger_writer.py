"""The side ledger the fault handlers write to: one row per executed attempt.

The ledger lives in the test's database, next to the queue table, but is written
through a connection of the handler's own (never the runner's), so what it records
is what really ran, whatever happened to the run. ``fault_ledger`` has
``UNIQUE (job_id, attempt)``; a second execution of the same attempt does not
fail the handler (that would change what is being measured) but lands in
``fault_repeats``, which every scenario expects to find empty.

Each call carries a token, so a statement repeated after a broken connection (the
server restarted, the backend was terminated) is never mistaken for a second
execution. The ledger connection turns ``default_transaction_read_only`` off for
itself, so a scenario can make the server read-only for drain and still see what
the handlers did.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

import psycopg

LEDGER_DSN_VARIABLE = "FAULT_LEDGER_DSN"
APPLICATION_NAME = "fault-ledger"
PATIENCE_SECONDS = 60.0

DDL = """
CREATE TABLE IF NOT EXISTS fault_ledger (
    job_id      bigint      NOT NULL,
    attempt     int         NOT NULL,
    pid         int         NOT NULL,
    token       text        NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    returned_at timestamptz,
    fault       text,
    UNIQUE (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS fault_repeats (
    job_id      bigint      NOT NULL,
    attempt     int         NOT NULL,
    pid         int         NOT NULL,
    token       text        NOT NULL UNIQUE,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

_START = """
WITH first AS (
    INSERT INTO fault_ledger (job_id, attempt, pid, token, returned_at)
    VALUES (%(job_id)s, %(attempt)s, %(pid)s, %(token)s,
            CASE WHEN %(returned)s THEN clock_timestamp() END)
    ON CONFLICT (job_id, attempt) DO NOTHING
    RETURNING 1
)
INSERT INTO fault_repeats (job_id, attempt, pid, token)
SELECT %(job_id)s, %(attempt)s, %(pid)s, %(token)s
WHERE NOT EXISTS (SELECT 1 FROM first)
  AND NOT EXISTS (
      SELECT 1 FROM fault_ledger
      WHERE job_id = %(job_id)s AND attempt = %(attempt)s AND token = %(token)s
  )
ON CONFLICT (token) DO NOTHING
"""


_local = threading.local()


def _connection() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(
            os.environ[LEDGER_DSN_VARIABLE],
            autocommit=True,
            application_name=APPLICATION_NAME,
            options="-c default_transaction_read_only=off",
            connect_timeout=5,
        )
        _local.conn = conn
    return conn


def execute(statement: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """Run one statement, waiting out a server that restarts or a backend that was killed."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        try:
            cursor = _connection().execute(statement.encode(), params)
            return cursor.fetchall() if cursor.description else []
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Entry:
    """One execution of one attempt, as the handler reports it."""

    def __init__(self, job_id: int, attempt: int) -> None:
        self.params = {
            "job_id": job_id,
            "attempt": attempt,
            "pid": os.getpid(),
            "token": uuid.uuid4().hex,
        }

    def started(self, *, returned: bool = False) -> None:
        """Record the execution; ``returned`` records a handler with nothing to do in one go."""
        execute(_START, {**self.params, "returned": returned})

    def fault(self, name: str) -> None:
        """Note the misbehaviour about to happen, before it can take the process down."""
        execute(
            "UPDATE fault_ledger SET fault = %(fault)s "
            "WHERE job_id = %(job_id)s AND attempt = %(attempt)s AND token = %(token)s",
            {**self.params, "fault": name},
        )

    def returned(self) -> None:
        execute(
            "UPDATE fault_ledger SET returned_at = clock_timestamp() "
            "WHERE job_id = %(job_id)s AND attempt = %(attempt)s AND token = %(token)s",
            self.params,
        )


def has_returned(job_id: int, attempt: int) -> bool:
    rows = execute(
        "SELECT 1 FROM fault_ledger WHERE job_id = %(job_id)s AND attempt = %(attempt)s "
        "AND returned_at IS NOT NULL",
        {"job_id": job_id, "attempt": attempt},
    )
    return bool(rows)
