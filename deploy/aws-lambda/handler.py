"""The Lambda entry point (``handler.handler`` in template.yaml): drain once, in time.

Everything comes from the function's environment, which template.yaml sets:
``DRAIN_DSN_SECRET_ID`` (the Secrets Manager secret holding the DSN, read at run
time: the DSN itself is never in the function's configuration, where
``GetFunctionConfiguration`` would show it, and a rotated secret is picked up by
the next run without a redeploy), ``DRAIN_APP`` (the module whose
``@drain.handler`` functions handle the queues), ``DRAIN_MAX_SECONDS``,
``DRAIN_GRACE_SECONDS``, ``DRAIN_SAFETY_MARGIN`` and ``DRAIN_MAX_RUNNERS``. The
budget is the invocation's remaining time minus the margin and the grace, capped
at ``DRAIN_MAX_SECONDS``, so the run stops cleanly before Lambda's timeout would
cut it off. The return value is drain's summary (claimed, done, retried, failed,
exit_reason, ...), which the console and the async destinations show; a run that
fails raises, so it counts as an error in the function's metrics.

With ``DRAIN_INVOKE_AGAIN=true``, a run that spends its budget with jobs still
ready invokes this function once more, asynchronously; the continued run does not
continue again, the next scheduled run does.
"""

from __future__ import annotations

import json
import os
from typing import Any

from drain import serverless


def invoke_again(event: dict[str, Any], context: Any) -> None:
    """Start one more invocation of this same function, without waiting for it."""
    import boto3  # part of the Lambda runtime; loaded only when a run ends with jobs left

    boto3.client("lambda").invoke(
        FunctionName=context.invoked_function_arn,
        InvocationType="Event",
        Payload=json.dumps(event).encode(),
    )


def database_dsn() -> str | None:
    """The DSN from the secret ``DRAIN_DSN_SECRET_ID`` names (its JSON key "dsn").

    Read on every invocation: one API call, and a rotated secret is used at once.
    Without the variable (a run outside Lambda) drain reads ``DRAIN_DSN`` as usual.
    """
    secret_id = os.environ.get("DRAIN_DSN_SECRET_ID")
    if not secret_id:
        return None
    import boto3  # part of the Lambda runtime

    secret = boto3.client("secretsmanager").get_secret_value(SecretId=secret_id)
    return str(json.loads(secret["SecretString"])["dsn"])


def handler(event: dict[str, Any] | None, context: Any) -> dict[str, Any]:
    drain_once = serverless.lambda_handler(
        again=invoke_again if serverless.flag("DRAIN_INVOKE_AGAIN") else None,
        dsn=database_dsn(),
    )
    return drain_once(event, context)
