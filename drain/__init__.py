"""drain: a one-shot batch drainer for PostgreSQL job queues, built for databases that scale to zero.

The public API::

    import drain

    @drain.handler("emails")
    def send_email(job: drain.Job) -> None: ...

    with psycopg.connect(dsn) as conn:          # in your own transaction
        drain.enqueue(conn, {"to": "a@example.com"}, queue="emails")
        drain.enqueue(conn, {"user": 42}, queue="reindex", key="user-42").duplicate
        drain.schedule(conn, "digest", "0 7 * * *", "emails", tz="Europe/Berlin")

    async with await psycopg.AsyncConnection.connect(dsn) as aconn:
        await drain.enqueue_async(aconn, {"to": "b@example.com"}, queue="emails")

    summary = drain.run(dsn, app="myapp.jobs", max_seconds=60)
"""

import importlib
from typing import TYPE_CHECKING, Any

from drain.__about__ import __version__
from drain.core.errors import DedupeNotEnabled, DrainError, PriorityNotEnabled
from drain.core.jobs import Job, PermanentError, RetryLater
from drain.core.summary import Summary

if TYPE_CHECKING:
    from drain.core.config import RunConfig
    from drain.core.table import JobTable
    from drain.runner import run
    from drain.runner.handlers import Registry, handler, registry
    from drain.store.aio import enqueue_async, enqueue_many_async
    from drain.store.producer import Enqueued, cancel, enqueue, enqueue_many
    from drain.store.recurring import schedule, unschedule

# Names whose modules reach the database driver, loaded on first use: a command
# that never connects (``drain plan`` without --dsn) does not pay for psycopg.
_LAZY = {
    "RunConfig": "drain.core.config",
    "Registry": "drain.runner.handlers",
    "handler": "drain.runner.handlers",
    "registry": "drain.runner.handlers",
    "Enqueued": "drain.store.producer",
    "cancel": "drain.store.producer",
    "enqueue": "drain.store.producer",
    "enqueue_many": "drain.store.producer",
    "enqueue_async": "drain.store.aio",
    "enqueue_many_async": "drain.store.aio",
    "run": "drain.runner",
    "schedule": "drain.store.recurring",
    "unschedule": "drain.store.recurring",
    "JobTable": "drain.core.table",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'drain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DedupeNotEnabled",
    "DrainError",
    "Enqueued",
    "Job",
    "JobTable",
    "PermanentError",
    "PriorityNotEnabled",
    "Registry",
    "RetryLater",
    "RunConfig",
    "Summary",
    "__version__",
    "cancel",
    "enqueue",
    "enqueue_async",
    "enqueue_many",
    "enqueue_many_async",
    "handler",
    "registry",
    "run",
    "schedule",
    "unschedule",
]
