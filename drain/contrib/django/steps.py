"""drain's schema steps as Django migration operations, from the same ``sql/migrations/`` files.

``manage.py migrate`` creates and upgrades drain's tables in the project's
database: each of ``drain/contrib/django/migrations/`` is one step of
``sql/migrations/`` as a ``RunSQL`` of its statements, one by one, outside a
transaction (the migrations are not atomic: ``CREATE INDEX CONCURRENTLY``
cannot run inside one), each under a short ``lock_timeout`` so that a table
runs are draining is never held up behind it. Every statement is idempotent, so
a project whose table ``drain init`` made already migrates without a change.

Settings (all optional): ``DRAIN_SCHEMA`` and ``DRAIN_TABLE`` name the queue
table (``public.jobs``); ``DRAIN_EXTRAS`` lists the extras to add (default both,
``["dedupe", "priority"]``; ``[]`` for none). Undoing a step is refused: it
would drop the jobs.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings  # type: ignore[import-untyped]  # Django ships no types
from django.db import migrations  # type: ignore[import-untyped]

from drain.core.table import JobTable
from drain.store import migrations as drain_migrations
from drain.store import steps

# A statement waits at most this long for its lock; on a timeout the migration
# stops with the driver's error, and running it again goes on where it stopped.
LOCK_TIMEOUT = "5s"


def table() -> JobTable:
    return JobTable(
        getattr(settings, "DRAIN_SCHEMA", "public"), getattr(settings, "DRAIN_TABLE", "jobs")
    )


def extras() -> list[str]:
    chosen = getattr(settings, "DRAIN_EXTRAS", list(steps.extras()))
    return drain_migrations.check_extras(list(chosen))


def operations(name: str) -> list[Any]:
    """The ``RunSQL`` of step ``name`` (``0003_priority``); none for an extra not chosen."""
    (step,) = [s for s in steps.all_steps() if s.name == name]
    if step.extra is not None and step.extra not in extras():
        return []
    statements = [
        text.as_string(None) for text in (s.text for s in steps.statements(table(), step))
    ]
    return [
        migrations.RunSQL(
            [f"SET lock_timeout = '{LOCK_TIMEOUT}'", *statements, "RESET lock_timeout"],
            reverse_sql=None,  # irreversible: Django refuses to unapply it
            elidable=False,
        )
    ]
