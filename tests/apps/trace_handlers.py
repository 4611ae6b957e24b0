"""A handler for the trace and CI summary tests, steered by each job's payload.

Use with ``drain run --handler trace_handlers:work``. Payload keys:

``sleep: S``
    sleep S seconds first (a slow job a signal can land in the middle of);
``raise: TEXT``
    raise ``ConnectionError(TEXT)``: the attempt is retried;
``fail: TEXT``
    raise ``drain.PermanentError(TEXT)``: the job fails for good;
``snooze: S``
    ask to run again in S seconds (not an error).
"""

from __future__ import annotations

import time

import drain


def work(job: drain.Job) -> None:
    payload = job.payload if isinstance(job.payload, dict) else {}
    if "sleep" in payload:
        time.sleep(float(payload["sleep"]))
    if "raise" in payload:
        raise ConnectionError(str(payload["raise"]))
    if "fail" in payload:
        raise drain.PermanentError(str(payload["fail"]))
    if "snooze" in payload:
        raise drain.RetryLater(float(payload["snooze"]))
