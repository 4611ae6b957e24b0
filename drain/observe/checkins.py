"""Sentry Crons check-ins: did the 3 a.m. run happen, and did it end well?

``--sentry-monitor SLUG`` sends ``in_progress`` as the run starts working and
``ok`` or ``error`` as it ends, through the real ``sentry-sdk`` (the ``sentry``
extra, imported only when the option is given). Exit 0 and exit 3 are ``ok``: a
run stopped by its budget with work left did what it was designed to do; exit 1
is ``error``. A run that fails before it can start (the database is down, the
table is missing) never sent ``in_progress``, and sends its ``error`` alone.

The client is drain's own, on a scope of its own, never the global one
``sentry_sdk.init`` would set: a ``drain.run`` inside an application that has
its own Sentry setup leaves that setup alone. Its default integrations are off,
so it patches nothing (no excepthook, no logging hook) and sends only check-ins.
It is closed, after flushing what it queued, before ``run_finished`` returns:
the process exits next.

Sentry upserts a monitor from a check-in only with a schedule in its
``monitor_config``, and Relay drops a check-in whose ``monitor_config`` has no
schedule. A run does not know the schedule that starts it (a cron line, a
systemd timer, a Kubernetes CronJob), so ``--sentry-schedule CRON`` says it;
without one no ``monitor_config`` is sent: create the monitor in Sentry with its
schedule, and give it the maximum runtime :func:`max_runtime` says (the budget
plus grace, in whole minutes, plus one). Given a schedule,
:class:`CheckinObserver` sends both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from drain.core.errors import EXIT_OK, EXIT_WORK_LEFT, UsageError
from drain.observe.observers import Observer, RunEnd, RunStart

if TYPE_CHECKING:
    import sentry_sdk

    from drain.core.config import RunConfig
    from drain.core.summary import Summary

DSN_VARIABLE = "SENTRY_DSN"
# Seconds the last check-in may take to leave before the process exits without it.
FLUSH_TIMEOUT = 5.0
# Relay keeps the first 50 characters of a slug: a longer one would check in to
# another monitor than the one named.
MAX_SLUG_LENGTH = 50
OK_CODES = (EXIT_OK, EXIT_WORK_LEFT)


def max_runtime(max_seconds: float, grace_seconds: float) -> int:
    """Minutes a run may stay ``in_progress`` before Sentry calls it timed out: the
    budget plus the grace to finish, rounded up to whole minutes, plus one for the
    start-up and the flush around them."""
    return math.ceil((max_seconds + grace_seconds) / 60) + 1


def monitor_config(schedule: str | None, max_seconds: float, grace_seconds: float) -> Any:
    """The ``monitor_config`` for a crontab ``schedule``; None without one (see above)."""
    if schedule is None:
        return None
    return {
        "schedule": {"type": "crontab", "value": schedule},
        "max_runtime": max_runtime(max_seconds, grace_seconds),
    }


class CheckinObserver(Observer):
    """Sends the run's check-ins to one Sentry monitor."""

    def __init__(self, client: sentry_sdk.Client, slug: str, config: Any = None) -> None:
        self.client, self.slug, self.config = client, slug, config
        self.check_in_id: str | None = None

    def run_started(self, start: RunStart) -> None:
        self.check_in_id = self._send("in_progress")

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        status = "ok" if summary.exit_code in OK_CODES else "error"
        try:
            self._send(status, duration=max(0.0, end.ended_at - end.started_at))
        finally:
            self.client.close(timeout=FLUSH_TIMEOUT)

    def _send(self, status: str, duration: float | None = None) -> str | None:
        import sentry_sdk
        from sentry_sdk.crons import capture_checkin

        with sentry_sdk.new_scope() as scope:
            scope.set_client(self.client)
            return capture_checkin(
                monitor_slug=self.slug,
                check_in_id=self.check_in_id,
                status=status,
                duration=duration,
                monitor_config=self.config,
            )


def _schedule(config: RunConfig) -> str | None:
    """``--sentry-schedule`` in the five-field form Sentry takes, or a usage error."""
    if config.sentry_schedule is None:
        return None
    from drain.planning import cron

    try:
        return cron.normalize(config.sentry_schedule)
    except UsageError as exc:
        raise UsageError(f"--sentry-schedule: {exc}") from None


def observer(value: str, config: RunConfig, environ: Mapping[str, str]) -> Observer:
    """``--sentry-monitor SLUG``: the observer that checks in to that monitor (SENTRY_DSN)."""
    slug = value.strip()
    if not slug:
        raise UsageError("--sentry-monitor is empty: give the slug of the Sentry cron monitor")
    if len(slug) > MAX_SLUG_LENGTH:
        raise UsageError(
            f"--sentry-monitor: a monitor slug has at most {MAX_SLUG_LENGTH} characters"
        )
    try:
        import sentry_sdk
        from sentry_sdk.utils import BadDsn
    except ImportError:
        raise UsageError(
            "--sentry-monitor needs sentry-sdk: pip install 'pg-drain[sentry]'"
        ) from None
    dsn = environ.get(DSN_VARIABLE, "").strip()
    if not dsn:
        raise UsageError(
            f"--sentry-monitor needs {DSN_VARIABLE}: set it to the DSN of the Sentry project "
            "the monitor belongs to"
        )
    options: dict[str, Any] = {
        "default_integrations": False,
        "auto_enabling_integrations": False,
    }
    for option, variable in (("environment", "SENTRY_ENVIRONMENT"), ("release", "SENTRY_RELEASE")):
        if environ.get(variable):
            options[option] = environ[variable]
    try:
        client = sentry_sdk.Client(dsn, **options)
    except BadDsn as exc:
        raise UsageError(f"{DSN_VARIABLE} is not a Sentry DSN ({exc})") from None
    return CheckinObserver(
        client, slug, monitor_config(_schedule(config), config.max_seconds, config.grace_seconds)
    )
