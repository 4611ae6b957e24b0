"""An application module as the README's examples name it: handlers for two queues."""

from __future__ import annotations

import drain


@drain.handler("emails")
def send_email(job: drain.Job) -> None:
    """Sends nothing: the tests count jobs, not mail."""


@drain.handler("reports")
def render_report(job: drain.Job) -> None:
    """Renders nothing either."""
