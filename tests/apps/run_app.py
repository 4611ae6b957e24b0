"""Handlers for the `drain run` tests, steered by each job's payload.

Every execution is written to the test's ledger table (job id, attempt, process)
through a connection of the handler's own, so a test can count what really ran. Payload
keys: ``sleep`` (seconds), ``marker`` (a file created once the handler is
running), ``raise`` (an exception message), ``permanent`` (raise PermanentError),
``exit`` ("system" raises SystemExit, "os" calls os._exit).
"""

from __future__ import annotations

import os
import pathlib
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


def behave(job: drain.Job) -> None:
    payload = job.payload if isinstance(job.payload, dict) else {}
    _ledger().execute(
        "INSERT INTO ledger (job_id, attempt, pid) VALUES (%s, %s, %s)",
        (job.id, job.attempt, os.getpid()),
    )
    if "marker" in payload:
        pathlib.Path(payload["marker"]).write_text(str(os.getpid()))
    if "sleep" in payload:
        time.sleep(float(payload["sleep"]))
    if payload.get("exit") == "system":
        raise SystemExit(3)
    if payload.get("exit") == "os":
        os._exit(7)
    if payload.get("permanent"):
        raise drain.PermanentError(payload["permanent"])
    if "raise" in payload:
        raise RuntimeError(payload["raise"])


async def behave_async(job: drain.Job) -> None:
    behave(job)


@drain.handler("default")
def default_queue(job: drain.Job) -> None:
    behave(job)


@drain.handler("async")
async def async_queue(job: drain.Job) -> None:
    behave(job)


def nothing(job: drain.Job) -> None:
    """Returns at once, writing nothing: jobs as fast as a handler can be, so the run
    claims ahead of its workers (the next claim goes out before the last is decoded)."""
