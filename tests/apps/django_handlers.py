"""A handler for ``manage.py drain_run`` that writes through Django's ORM connection.

It only works if the command set Django up before the run: the ledger row it
writes is the test's proof that handlers may use the ORM.
"""

from __future__ import annotations

import os

from django.db import connection

import drain


def record(job: drain.Job) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ledger (job_id, attempt, pid) VALUES (%s, %s, %s)",
            [job.id, job.attempt, os.getpid()],
        )
