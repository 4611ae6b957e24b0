"""Kick after enqueue: the app enqueues in its own transaction, then wakes the drain function.

The job commits together with the data it belongs to, or not at all: here a new
user and the welcome email to send them. Only after the commit does the app invoke
the drain function, asynchronously (``InvocationType="Event"``: the request does
not wait for the run). Kicking before the commit would start a run that cannot
see the job yet.

A kick is a hint, never the job itself. If it fails, nothing is lost: the job is
in the table and the next scheduled run picks it up. A burst of kicks does not
pile up runs either: the function's reserved concurrency and ``DRAIN_MAX_RUNNERS``
cap the runs working at once, and a run started beyond the cap exits at once.

In a request handler::

    import boto3, psycopg
    from kick import sign_up

    lambda_client = boto3.client("lambda")      # once per process, reused
    with psycopg.connect(dsn) as conn:
        sign_up(conn, lambda_client, os.environ["DRAIN_FUNCTION"], "ada@example.com")

The app's role needs ``lambda:InvokeFunction`` on the function (template.yaml
outputs its name and ARN).
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg import pq

import drain

log = logging.getLogger(__name__)


def sign_up(
    conn: psycopg.Connection[Any], lambda_client: Any, function_name: str, email: str
) -> int:
    """Create the user and enqueue their welcome email in one transaction, then kick."""
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        raise RuntimeError("call this outside a transaction: the kick must follow the commit")
    with conn.transaction():
        conn.execute("INSERT INTO users (email) VALUES (%s)", (email,))
        job_id = drain.enqueue(conn, {"to": email, "template": "welcome"}, queue="emails")
    kick(lambda_client, function_name)
    return job_id


def kick(lambda_client: Any, function_name: str) -> bool:
    """Ask the drain function to run now; on failure the scheduled run covers the job."""
    try:
        lambda_client.invoke(FunctionName=function_name, InvocationType="Event", Payload=b"{}")
    except Exception:
        log.warning(
            "could not kick %s; the next scheduled run will pick the job up",
            function_name,
            exc_info=True,
        )
        return False
    return True
