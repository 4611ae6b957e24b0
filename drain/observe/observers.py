"""What a run tells the world before it exits: the hooks metrics, traces and check-ins use.

A run lives for seconds and is gone, so nothing can scrape it; whatever wants to
know about it must be told while it works and before it exits. An
:class:`Observer` hears the run start, each job start and finish (in the worker
that ran it), and the run end, on every stop path (the budget, a signal, an
error). Each integration is one observer in a module of its own, built by
:func:`for_run` only when its option is given, so a plain run imports none of
them. An observer that fails is logged and dropped: it never changes what the
run does or how it exits.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from drain.core.summary import Backlog

if TYPE_CHECKING:
    from drain.core.config import RunConfig
    from drain.core.jobs import Job
    from drain.core.summary import Summary

log = logging.getLogger("drain")


class RunStart(NamedTuple):
    """What a run is, as it starts."""

    table: str  # schema.table
    queues: tuple[str, ...]  # the queues it serves
    started_at: float  # POSIX seconds (wall clock)
    max_seconds: float
    grace_seconds: float


class JobResult(NamedTuple):
    """How one attempt ended, as the worker saw it."""

    kind: str  # done, retry, fail (for good) or snooze
    seconds: float
    error: str | None  # already redacted and short, as last_error gets it


class RunEnd(NamedTuple):
    """How the run ended, beside its summary."""

    started_at: float
    ended_at: float  # POSIX seconds
    backlog: Mapping[str, Backlog]  # by queue; empty unless an observer asked for it


class Observer:
    """A listener to one run. Every hook does nothing unless overridden.

    ``wants_backlog``: the run reads the ready jobs per queue at its end (one
    statement on the ready index) only if some observer asks.
    """

    wants_backlog = False

    def run_started(self, start: RunStart) -> None:
        """The run connected and is about to work (called on the main thread)."""

    def job_started(self, job: Job) -> object | None:
        """A worker is about to call the handler; what it returns comes back below."""
        return None

    def job_finished(self, job: Job, token: object | None, result: JobResult) -> None:
        """The handler returned or raised (called in the worker thread)."""

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        """The run is over: flush and send now, the process exits next."""


class Observers(Observer):
    """Several observers as one; each failure is logged once and that observer dropped."""

    def __init__(self, observers: Sequence[Observer] = ()) -> None:
        self.observers = list(observers)
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self.observers)

    @property
    def wants_backlog(self) -> bool:  # type: ignore[override]
        return any(observer.wants_backlog for observer in self.observers)

    def run_started(self, start: RunStart) -> None:
        self._each("run_started", lambda o: o.run_started(start))

    def job_started(self, job: Job) -> object | None:
        """Each observer's token, by observer (one dropped meanwhile is skipped later)."""
        return {
            id(observer): self._call(observer, "job_started", lambda o: o.job_started(job))
            for observer in list(self.observers)
        }

    def job_finished(self, job: Job, token: object | None, result: JobResult) -> None:
        tokens = token if isinstance(token, dict) else {}
        for observer in list(self.observers):
            self._call(observer, "job_finished", _finisher(job, tokens.get(id(observer)), result))

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        self._each("run_finished", lambda o: o.run_finished(summary, end))

    def _each(self, hook: str, call: Callable[[Observer], object]) -> None:
        for observer in list(self.observers):
            self._call(observer, hook, call)

    def _call(self, observer: Observer, hook: str, call: Callable[[Observer], Any]) -> Any:
        try:
            return call(observer)
        except Exception as exc:
            from drain.core.redact import describe, redact

            with self._lock:
                if observer in self.observers:
                    self.observers.remove(observer)
                    log.warning(
                        "%s stopped reporting (%s failed: %s); the run goes on",
                        type(observer).__name__,
                        hook,
                        redact(describe(exc)),
                    )
            return None


def _finisher(job: Job, token: object | None, result: JobResult) -> Callable[[Observer], None]:
    return lambda observer: observer.job_finished(job, token, result)


# Each integration's observer: the RunConfig field whose value turns it on, and the
# module and factory that build it. A factory takes the value, the RunConfig and
# the environment; its module (and the library it needs) is imported only then.
INTEGRATIONS: tuple[tuple[str, str, str], ...] = (
    ("metrics_textfile", "drain.observe.metrics", "textfile_observer"),
    ("pushgateway", "drain.observe.metrics", "pushgateway_observer"),
    ("otel", "drain.observe.tracing", "observer"),
    ("sentry_monitor", "drain.observe.checkins", "observer"),
    ("report", "drain.observe.report", "run_observer"),
)
# Set by GitHub Actions: a run there appends a Markdown table of its summary.
GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
OTEL_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def for_run(config: RunConfig, environ: Mapping[str, str] | None = None) -> Observers:
    """The observers the run's options (and environment) ask for, each imported only then.

    Traces are on with ``--otel`` or when an OTLP endpoint variable is set; the CI
    summary when ``GITHUB_STEP_SUMMARY`` is set.
    """
    import importlib

    env = os.environ if environ is None else environ
    wanted: list[tuple[str, str, Any]] = []
    for field, module, factory in INTEGRATIONS:
        value = getattr(config, field)
        if field == "otel" and not value:
            value = any(env.get(name) for name in OTEL_ENDPOINT_VARIABLES)
        # An empty text ("--sentry-monitor $UNSET") goes to its factory, which refuses
        # it: quietly reporting nothing is not what the option asked for.
        if value or value == "":
            wanted.append((module, factory, value))
    if env.get(GITHUB_STEP_SUMMARY):
        wanted.append(("drain.observe.ci_summary", "observer", env[GITHUB_STEP_SUMMARY]))
    built: list[Observer] = []
    for module, factory, value in wanted:
        built.append(getattr(importlib.import_module(module), factory)(value, config, env))
    return Observers(built)
