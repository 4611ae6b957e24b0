"""Handlers for the operating-command tests (status, retry, archive).

Use with ``drain run --handler demo_handlers:ok`` (every job succeeds) or
``demo_handlers:broken`` (every job fails for good, with a recognisable error).
"""

from __future__ import annotations

import drain

BROKEN_ERROR = "SMTP 451: try again later"


def ok(job: drain.Job) -> None:
    """Succeed at once."""


def broken(job: drain.Job) -> None:
    """Fail for good, so the job ends as failed with BROKEN_ERROR as its last error."""
    raise drain.PermanentError(BROKEN_ERROR)
