"""The handler of the live-migration test: one ledger row per execution, then a short pause.

The ledger is written through a connection of the handler's own, so the test
counts what really ran; the pause (``MIGRATE_HANDLER_SLEEP`` seconds) keeps the
run working while the migration is applied beside it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg

import drain

_local = threading.local()


def _ledger() -> psycopg.Connection[Any]:
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = psycopg.connect(os.environ["LEDGER_DSN"], autocommit=True)
        _local.conn = conn
    return conn


@drain.handler("live")
def live(job: drain.Job) -> None:
    _ledger().execute(
        "INSERT INTO ledger (job_id, attempt, pid) VALUES (%s, %s, %s)",
        (job.id, job.attempt, os.getpid()),
    )
    time.sleep(float(os.environ.get("MIGRATE_HANDLER_SLEEP", "0.01")))
