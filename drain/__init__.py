"""drain: a one-shot batch drainer for PostgreSQL job queues, built for databases that scale to zero.

The public API::

    import drain

    @drain.handler("emails")
    def send_email(job: drain.Job) -> None: ...

    with psycopg.connect(dsn) as conn:          # in your own transaction
        drain.enqueue(conn, {"to": "a@example.com"}, queue="emails")

    summary = drain.run(dsn, app="myapp.jobs", max_seconds=60)
"""

from drain.__about__ import __version__
from drain.config import RunConfig
from drain.errors import DrainError
from drain.handlers import Registry, handler, registry
from drain.jobs import Job, PermanentError, RetryLater
from drain.queue import enqueue, enqueue_many
from drain.runner import run
from drain.summary import Summary
from drain.table import JobTable

__all__ = [
    "DrainError",
    "Job",
    "JobTable",
    "PermanentError",
    "Registry",
    "RetryLater",
    "RunConfig",
    "Summary",
    "__version__",
    "enqueue",
    "enqueue_many",
    "handler",
    "registry",
    "run",
]
