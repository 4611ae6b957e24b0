"""A handler that works until it is cancelled, for ``drain cancel``'s tests.

It notes (through a connection of its own, to the test's database) when it started
and when it first saw ``job.cancel_requested``, then returns; if no cancel comes
within the payload's ``patience`` seconds it raises, so a cancel that never
reaches the handler fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import time

import psycopg

import drain

_NOTE = """
INSERT INTO cancel_seen (job_id, attempt, what, at) VALUES (%s, %s, %s, clock_timestamp())
"""


def _note(job: drain.Job, what: str) -> None:
    with psycopg.connect(os.environ["CANCEL_NOTES_DSN"], autocommit=True) as conn:
        conn.execute(_NOTE, (job.id, job.attempt, what))


def until_cancelled(job: drain.Job) -> None:
    _note(job, "started")
    patience = float(job.payload.get("patience", 30))
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        if job.cancel_requested:
            _note(job, "cancel seen")
            if job.payload.get("then") == "raise":
                raise RuntimeError("stopped: cancelled")
            return
        time.sleep(0.02)
    raise RuntimeError("no cancel came")
