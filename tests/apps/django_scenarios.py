"""Django scenarios for tests/test_contrib_django.py, one per process.

``python -m django_scenarios NAME`` sets Django up with django_site.settings,
runs the scenario and prints what it saw as one JSON object. A process per
scenario keeps Django's settings and connections from leaking between tests.
What is seen from outside the transaction is read on a second connection of
the scenario's own (psycopg, autocommit), the way another process would see it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import django
import psycopg

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_site.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402

from drain.contrib import django as jobs  # noqa: E402

OUTSIDE = psycopg.connect(os.environ["DRAIN_TEST_DJANGO_DSN"], autocommit=True)


class Rollback(Exception):
    """Raised inside atomic() to roll the block back."""


def jobs_seen_outside() -> int:
    row = OUTSIDE.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None
    return int(row[0])


def orm_write(note: str) -> None:
    """A write through Django's own cursor, in whatever transaction Django has open."""
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO notes (note) VALUES (%s)", [note])


def commit() -> dict[str, Any]:
    with transaction.atomic():
        orm_write("committed")
        job = jobs.enqueue({"order": 1}, queue="emails")
        inside = jobs_seen_outside()
    return {"id": job, "seen_inside": inside, "seen_after": jobs_seen_outside()}


def rollback() -> dict[str, Any]:
    try:
        with transaction.atomic():
            orm_write("rolled back")
            job = jobs.enqueue({"order": 2}, queue="emails")
            raise Rollback
    except Rollback:
        pass
    return {"id": job, "seen_after": jobs_seen_outside()}


def kick() -> dict[str, Any]:
    calls: list[int] = []
    with transaction.atomic():
        jobs.enqueue({"order": 3})
        jobs.kick_on_commit(lambda: calls.append(jobs_seen_outside()))
        before = list(calls)
    committed = list(calls)
    try:
        with transaction.atomic():
            jobs.enqueue({"order": 4})
            jobs.kick_on_commit(lambda: calls.append(-1))
            raise Rollback
    except Rollback:
        pass
    return {"before_commit": before, "after_commit": committed, "in_the_end": calls}


def many_and_keys() -> dict[str, Any]:
    with transaction.atomic():
        new = jobs.enqueue_many([{"n": n} for n in range(3)], queue="bulk")
        first = jobs.enqueue({"user": 42}, queue="reindex", key="user-42")
        second = jobs.enqueue({"user": 42}, queue="reindex", key="user-42")
    return {
        "many": new,
        "first": [first, first.duplicate],
        "second": [second, second.duplicate],
        "seen_after": jobs_seen_outside(),
    }


def dsn() -> dict[str, Any]:
    return {"dsn": psycopg.conninfo.conninfo_to_dict(jobs.dsn())}


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "commit": commit,
    "rollback": rollback,
    "kick": kick,
    "many_and_keys": many_and_keys,
    "dsn": dsn,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
