"""Running drain inside a serverless function: the budget from the time left, settings from the environment.

A function platform ends an invocation at its timeout, mid-statement if it must.
drain's orderly stop (release the jobs not started, give in-flight jobs their
grace, cut the leases of the rest) only helps if it finishes before that, so the
budget is not a fixed number: it is the invocation's remaining time minus a
safety margin and the grace period, capped by ``DRAIN_MAX_SECONDS`` when set.

Settings come from the same ``DRAIN_*`` variables ``drain run`` reads, through the
same table (:mod:`drain.core.settings`) and the same parsers, so one function can move
between a container and a function without new names or new meanings. Nothing
here imports a cloud SDK: the one platform call a handler may make (invoking
itself once more when the budget ran out with jobs left) is a callable the user
passes, for instance one that calls boto3's Lambda ``invoke``::

    import boto3, json
    from drain import serverless

    def invoke_again(event, context):
        boto3.client("lambda").invoke(
            FunctionName=context.invoked_function_arn,
            InvocationType="Event",
            Payload=json.dumps(event).encode(),
        )

    handler = serverless.lambda_handler(app="myapp.jobs", again=invoke_again)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drain.core import settings as run_settings
from drain.core.config import (
    HANDLER_SOURCES,
    check_handler_sources,
    handler_spelling,
    run_keywords,
)
from drain.core.durations import format_duration
from drain.core.errors import DrainError, UsageError
from drain.core.settings import DEFAULT_GRACE_SECONDS, DURATION, FLAG
from drain.core.summary import Summary
from drain.runner import run

log = logging.getLogger("drain")

DEFAULT_SAFETY_MARGIN = 10.0
# Below this a run could not even connect and claim one batch; refusing is clearer.
MIN_BUDGET = 1.0
# The event key that marks an invocation started by ``again``, and how many times
# one chain of invocations may continue itself by default ("once more").
AGAIN_KEY = "drain_again"
DEFAULT_MAX_AGAIN = 1

_HANDLER_SOURCES = (*HANDLER_SOURCES, "handlers")
# Read here only: how far before the platform's deadline the run must be done.
SAFETY_MARGIN_VARIABLE = "DRAIN_SAFETY_MARGIN"


Again = Callable[[dict[str, Any], Any], object]
"""``again(event, context)``: start one more invocation of this function, asynchronously."""


class BudgetTooShort(UsageError):
    """The invocation has too little time left for a run plus its margin and grace."""


class RunFailed(DrainError):
    """The run ended with an error; raised so the platform counts a failed invocation."""

    def __init__(self, summary: Summary) -> None:
        super().__init__(f"drain run failed: {summary.error or 'see the summary'}")
        self.summary = summary


@dataclass(frozen=True)
class Budget:
    """How long the run may work, and what it was derived from."""

    seconds: float
    remaining: float | None
    margin: float
    grace: float
    cap: float | None

    def describe(self) -> str:
        if self.remaining is None:
            return f"{format_duration(self.seconds)} (no platform deadline)"
        return (
            f"{format_duration(self.seconds)} = {format_duration(self.remaining)} left "
            f"- {format_duration(self.margin)} margin - {format_duration(self.grace)} grace"
            + (f", capped at {format_duration(self.cap)}" if self.cap is not None else "")
        )


def budget_for(
    remaining: float | None, *, margin: float, grace: float, cap: float | None = None
) -> Budget:
    """The run's budget: what is left of the invocation after the margin and the grace.

    The run may go on ``grace`` seconds past its budget for in-flight jobs, and
    then needs a few statements (cut leases, record the run, close); ``margin``
    is for those and for returning the result before the platform's deadline.
    Without a platform deadline (``remaining`` is None) the cap is the budget.
    """
    if margin < 0 or grace < 0:
        raise UsageError("the safety margin and the grace period cannot be negative")
    if remaining is None:
        if cap is None:
            raise UsageError(
                "no remaining time from the platform: set DRAIN_MAX_SECONDS for the budget"
            )
        return Budget(cap, None, margin, grace, cap)
    seconds = remaining - margin - grace
    if cap is not None:
        seconds = min(seconds, cap)
    if seconds < MIN_BUDGET:
        raise BudgetTooShort(
            f"only {remaining:.1f}s left in this invocation, and the run needs its budget "
            f"plus {margin:g}s margin and {grace:g}s grace: raise the function's timeout "
            "or lower DRAIN_SAFETY_MARGIN / DRAIN_GRACE_SECONDS"
        )
    return Budget(seconds, remaining, margin, grace, cap)


def remaining_seconds(context: object) -> float | None:
    """Seconds the platform leaves this invocation, if the context says (Lambda's does).

    Any object with ``get_remaining_time_in_millis()`` will do; ``None`` or another
    object means there is no platform deadline.
    """
    method = getattr(context, "get_remaining_time_in_millis", None)
    if method is None:
        return None
    return float(method()) / 1000.0


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """A yes/no environment variable, spelled as ``drain run`` takes its flags (unset is no)."""
    return FLAG.parse((os.environ if environ is None else environ).get(name, ""), name)


def settings_from_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``drain.run`` keywords from the ``DRAIN_*`` variables ``drain run`` also reads.

    Every setting of :data:`drain.core.settings.SETTINGS` but the command's own output
    (``--json``, ``--verbose``), parsed by the same parsers: the run's settings,
    the handler source (``DRAIN_APP``, ``DRAIN_HANDLER``, ``DRAIN_EXEC``), the
    queues, and ``dsn`` when ``DRAIN_DSN`` or ``DATABASE_URL`` is set. Unset and
    empty variables are left out; the budget is :func:`budget_for`'s. A malformed
    value is a usage error that names its variable.
    """
    env = os.environ if environ is None else environ
    return run_keywords(run_settings.from_environment(env))


def drain_invocation(
    event: Mapping[str, Any] | None,
    context: object,
    *,
    again: Again | None = None,
    max_again: int = DEFAULT_MAX_AGAIN,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Drain once within this invocation's time and return the summary as a dict.

    ``options`` are ``drain.run`` keywords (``dsn``, ``app``, ``handlers``,
    ``max_seconds`` as the cap, ``grace_seconds``, ``safety_margin``, ...) and win
    over the environment. When the run stops on its budget with ready jobs left and
    ``again`` is given, ``again(event, context)`` starts one more invocation, at
    most ``max_again`` times in a row (the event carries the count). A run that
    ends in an error raises :class:`RunFailed`, so the platform records a failure.
    """
    env = os.environ if environ is None else environ
    settings = settings_from_environment(env)
    keywords = [source for source in _HANDLER_SOURCES if options.get(source) is not None]
    if keywords:
        for source in _HANDLER_SOURCES:
            settings.pop(source, None)
    settings.update({key: value for key, value in options.items() if value is not None})
    # The same check as drain run's, naming DRAIN_EXEC (or the keyword) as given.
    spelled = handler_spelling(variables=HANDLER_SOURCES, keywords=keywords)
    check_handler_sources(settings, spelled, env)
    grace, margin, cap = _timing(settings, env)
    budget = budget_for(remaining_seconds(context), margin=margin, grace=grace, cap=cap)
    log.info("budget %s", budget.describe())
    dsn = settings.pop("dsn", None) or None
    summary = run(dsn, max_seconds=budget.seconds, grace_seconds=grace, **settings)
    if summary.exit_reason in ("error", "usage"):  # usage: an --exec that cannot run
        raise RunFailed(summary)
    result = summary.as_dict()
    result["budget_seconds"] = round(budget.seconds, 3)
    result["invoked_again"] = _continue(summary, event, context, again, max_again)
    return result


def _timing(settings: dict[str, Any], env: Mapping[str, str]) -> tuple[float, float, float | None]:
    """Grace, safety margin and budget cap: the settings (keywords over variables), else defaults."""
    grace = settings.pop("grace_seconds", None)
    margin = settings.pop("safety_margin", None)
    if margin is None and env.get(SAFETY_MARGIN_VARIABLE):
        margin = DURATION.parse(env[SAFETY_MARGIN_VARIABLE], SAFETY_MARGIN_VARIABLE)
    cap = settings.pop("max_seconds", None)
    return (
        DEFAULT_GRACE_SECONDS if grace is None else float(grace),
        DEFAULT_SAFETY_MARGIN if margin is None else float(margin),
        None if cap is None else float(cap),
    )


def _continue(
    summary: Summary,
    event: Mapping[str, Any] | None,
    context: object,
    again: Again | None,
    max_again: int,
) -> bool:
    """Start one more invocation when the budget ran out with jobs ready, if allowed.

    Only ``budget``: a run that ended ``capped`` (exit 3 too) left its jobs to
    the runs holding every place of the queue's cap, and an invocation started
    at once would find the same full cap, and start another, for ever.
    """
    if again is None or summary.exit_reason != "budget":
        return False
    count = _again_count(event)
    if count >= max_again:
        log.warning(
            "budget spent with jobs left after %d continuation(s); the next "
            "scheduled run carries on",
            count,
        )
        return False
    again({**(event or {}), AGAIN_KEY: count + 1}, context)
    return True


def _again_count(event: Mapping[str, Any] | None) -> int:
    value = (event or {}).get(AGAIN_KEY, 0)
    return value if isinstance(value, int) and value >= 0 else 0


def lambda_handler(
    *,
    again: Again | None = None,
    max_again: int = DEFAULT_MAX_AGAIN,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> Callable[[Mapping[str, Any] | None, Any], dict[str, Any]]:
    """A ``handler(event, context)`` for AWS Lambda (or any platform with that shape).

    Each call drains within the invocation's remaining time, as
    :func:`drain_invocation` describes, and returns the summary dict. Settings
    given here win over the ``DRAIN_*`` environment, which is read on each call.
    """

    def handler(event: Mapping[str, Any] | None, context: Any) -> dict[str, Any]:
        return drain_invocation(
            event, context, again=again, max_again=max_again, environ=environ, **options
        )

    return handler
