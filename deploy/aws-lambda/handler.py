"""The Lambda entry point (``handler.handler`` in template.yaml): drain once, in time.

Everything comes from the function's environment, which template.yaml sets:
``DRAIN_DSN`` (from Secrets Manager), ``DRAIN_APP`` (the module whose
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


handler = serverless.lambda_handler(
    again=invoke_again if serverless.flag("DRAIN_INVOKE_AGAIN") else None
)
