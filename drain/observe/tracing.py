"""A trace of the run over OTLP/HTTP: one span for the run, one per job, flushed before exit.

A run is gone seconds after it ends, so its spans go out in its last moments:
:meth:`Tracing.run_finished` flushes and shuts the exporter down on every stop
path (drained, the budget, a signal, an error), bounded by :data:`FLUSH_SECONDS`
so a tracing backend that is down delays the exit by at most that, and never
changes the run's outcome. It uses a ``TracerProvider`` of its own rather than
the global one, so a handler's own tracing setup (or drain used as a library in
a traced application) is left as it is.

The standard ``OTEL_*`` variables apply because the SDK reads them itself: the
exporter its endpoint, headers, timeout, compression and certificates, the
resource ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the service is
``drain`` unless they name one), the provider ``OTEL_TRACES_SAMPLER``, the batch
processor ``OTEL_BSP_*``. ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` turn the traces off without importing anything.

Job spans follow the messaging semantic conventions for a consumer's
``process`` operation (``process <queue>``, kind ``CONSUMER``); drain is the
messaging system (``messaging.system = drain``: the registry has no value for a
queue kept in PostgreSQL tables, and ``postgresql`` names a database system).
An error is recorded with the text ``last_error`` gets, already redacted; it is
redacted once more here, as everything drain sends out is. The payload is never
put on a span.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from drain.core.credentials import safe_endpoint
from drain.core.errors import UsageError
from drain.core.redact import Redactor
from drain.observe.observers import OTEL_ENDPOINT_VARIABLES, JobResult, Observer, RunEnd, RunStart

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import Span, Tracer

    from drain.core.config import RunConfig
    from drain.core.jobs import Job
    from drain.core.summary import Summary

log = logging.getLogger("drain")

# How long the end of a run may wait for its spans to go out.
FLUSH_SECONDS = 5.0
# The batch processor's queue unless OTEL_BSP_MAX_QUEUE_SIZE says otherwise. The
# SDK's 2048 is sized for a service's steady trickle; a run makes its spans in a
# burst: 20,000 trivial jobs at 8,000 jobs/s against a loopback collector lost
# 2,210 of their spans with 2048, none with this (about 1 kB per queued span).
QUEUE_SIZE = 32768
TRACES_PATH = "v1/traces"
DEFAULT_TRACES_URL = "http://localhost:4318/" + TRACES_PATH
SERVICE_NAME = "drain"
MESSAGING_SYSTEM = "drain"
INSTALL_HINT = "pip install 'pg-drain[otel]'"
# The SDK's and the exporter's loggers all sit below this one: their retry,
# failure and "queue full" lines, some with a traceback,
# are gathered while traces are on and said as drain's own few lines.
OTEL_LOGGER = "opentelemetry"
HEADER_VARIABLES = "OTEL_EXPORTER_OTLP_HEADERS or OTEL_EXPORTER_OTLP_TRACES_HEADERS"
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
# Outcomes that end a job's span with status ERROR; a snooze is the handler's own choice.
ERROR_KINDS = frozenset({"retry", "fail"})
# The summary counters the run span carries at its end.
COUNTERS = (
    "claimed",
    "done",
    "retried",
    "failed",
    "snoozed",
    "cancelled",
    "lost",
    "reaped",
    "fired",
    "released",
    "abandoned",
    "archived",
)


def observer(value: object, config: RunConfig, environ: Mapping[str, str]) -> Observer:
    """The run's tracing observer (``--otel``, or an OTLP endpoint variable is set).

    Raises :class:`UsageError` (exit 2, before anything connects) when the
    packages are missing, an endpoint variable is not an http(s) URL, or the
    protocol asked for is one this exporter does not speak: each would
    otherwise lose every span silently, run after run.
    """
    if _disabled(environ):
        return Observer()
    why = "--otel" if config.otel else _set_variable(environ)
    endpoint = check_environment(environ)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as exc:
        off = "" if config.otel else " (or OTEL_TRACES_EXPORTER=none to leave traces off)"
        raise UsageError(
            f"{why} needs opentelemetry-sdk and its OTLP/HTTP exporter "
            f"(missing: {exc.name or exc}): {INSTALL_HINT}{off}"
        ) from None
    gathered = _Gathered.installed()
    redactor = Redactor(config.connect.dsn)
    try:
        exporter = _counting(OTLPSpanExporter(endpoint=traces_url(environ)))
        provider = TracerProvider(resource=_resource(environ), shutdown_on_exit=False)
        tracing = Tracing(provider, exporter, endpoint, redactor, gathered)
    except ValueError as exc:  # e.g. OTEL_BSP_MAX_EXPORT_BATCH_SIZE above the queue size
        gathered.remove()
        hint = (
            " (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 512, may not exceed "
            "OTEL_BSP_MAX_QUEUE_SIZE, default 2048)"
            if "max_queue_size" in str(exc)
            else ""
        )
        raise UsageError(f"traces: the OTEL_BSP_* settings cannot work: {exc}{hint}") from None
    _say_settings_ignored(gathered, redactor)
    return tracing


def _say_settings_ignored(gathered: _Gathered, redactor: Redactor) -> None:
    """What the SDK said while it read the ``OTEL_*`` variables, as drain's own lines.

    A value it cannot read it replaces with its default and says so (with a
    traceback for some): one warning line each here, and the run goes on. Headers
    are the exception: they carry the backend's token, so a malformed value is
    refused (exit 2) without echoing it, where the SDK would print it whole.
    """
    said, gathered.records = gathered.records, []
    if any(str(record.msg).startswith("Header format invalid") for record in said):
        gathered.remove()
        raise UsageError(
            f"{HEADER_VARIABLES} is not a comma-separated list of name=value pairs "
            "(values URL-encoded); not shown, as it may hold a token"
        )
    for message in dict.fromkeys(_message(record) for record in said):
        log.warning("traces: %s", redactor(message)[:300])


def check_environment(environ: Mapping[str, str]) -> str:
    """The traces endpoint as messages show it (:func:`~drain.core.credentials.safe_endpoint`);
    the variables checked first."""
    for name in PROTOCOL_VARIABLES:
        protocol = environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise UsageError(
                f"{name}={protocol}: drain exports traces over OTLP/HTTP with protobuf only "
                "(http/protobuf); point the endpoint at the collector's HTTP port (4318)"
            )
    for name in OTEL_ENDPOINT_VARIABLES:
        value = environ.get(name, "").strip()
        if value and not _is_http_url(value):
            raise UsageError(
                f"{name} is not an http(s) URL: {safe_endpoint(value)!r} "
                "(give one such as http://collector:4318)"
            )
    return safe_endpoint(traces_url(environ))


def traces_url(environ: Mapping[str, str]) -> str:
    """Where the spans go: the traces endpoint as given, or the base one's path plus ``/v1/traces``.

    The SDK appends the signal's path to the base endpoint's text, which put it
    after a query (``.../otlp?api_key=K/v1/traces``); here it goes at the end
    of the path, and the query stays the query.
    """
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not base:
        return DEFAULT_TRACES_URL
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + TRACES_PATH))


def _disabled(environ: Mapping[str, str]) -> bool:
    return (
        environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
        or environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none"
    )


def _set_variable(environ: Mapping[str, str]) -> str:
    name = next((n for n in OTEL_ENDPOINT_VARIABLES if environ.get(n)), "--otel")
    return f"{name} (set, so traces are on)" if name != "--otel" else name


def _is_http_url(value: str) -> bool:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _resource(environ: Mapping[str, str]) -> Any:
    """The SDK's resource from the environment, with ``service.name`` drain unless named."""
    from opentelemetry.sdk.resources import Resource

    from drain.__about__ import __version__

    given = environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    named = environ.get("OTEL_SERVICE_NAME", "").strip() or any(
        pair.split("=", 1)[0].strip() == "service.name" for pair in given.split(",")
    )
    attributes: dict[str, str] = {} if named else {"service.name": SERVICE_NAME}
    if not any(pair.split("=", 1)[0].strip() == "service.version" for pair in given.split(",")):
        attributes["service.version"] = __version__
    return Resource.create(attributes)


def _counting(inner: SpanExporter) -> Any:
    """The OTLP exporter, counting the spans that went out and those that did not.

    The class is made here, a subclass of the SDK's ``SpanExporter``, so that
    this module imports nothing from OpenTelemetry until traces are on.
    """
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class CountingExporter(SpanExporter):
        def __init__(self) -> None:
            self.sent = 0
            self.lost = 0
            self._closed = False
            self._lock = threading.Lock()

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            result = inner.export(spans)
            with self._lock:
                if result is SpanExportResult.SUCCESS:
                    self.sent += len(spans)
                else:
                    self.lost += len(spans)
            return result

        def shutdown(self) -> None:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return CountingExporter()


class _Gathered(logging.Handler):
    """Keeps the exporter's complaints, to say once at the end, short and redacted."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self._propagate = True
        self.queue_full = False

    @classmethod
    def installed(cls) -> _Gathered:
        """A handler on the SDK's loggers, which it keeps from any other handler."""
        handler = cls()
        logger = logging.getLogger(OTEL_LOGGER)
        handler._propagate = logger.propagate
        logger.addHandler(handler)
        logger.propagate = False
        return handler

    def remove(self) -> None:
        logger = logging.getLogger(OTEL_LOGGER)
        logger.removeHandler(self)
        logger.propagate = self._propagate

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Queue full"):  # said once by the SDK, however many
            self.queue_full = True
        elif len(self.records) < 100:
            self.records.append(record)

    def reason(self) -> str | None:
        """Why the export failed: the final failure's cause, else the first complaint."""
        final = [r for r in self.records if str(r.msg).startswith("Failed to export")]
        for record in final[::-1] + self.records:
            args = record.args if isinstance(record.args, tuple) else ()
            for arg in args:
                if isinstance(arg, BaseException):
                    return _short(str(arg))
            if len(args) >= 3 and isinstance(args[1], int):  # code: %s, reason: %s
                return f"HTTP {args[1]} {args[2]}"
        return None


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # a record that cannot format still says something
        return str(record.msg)


def _short(text: str) -> str:
    """``Connection refused`` out of the nested texts the HTTP library wraps it in."""
    found = re.search(r"\[Errno -?\d+\] ([^\"'()\]]+)", text)
    return found.group(1).strip() if found else text


class Tracing(Observer):
    """The run span and its job spans, from the SDK's own provider."""

    def __init__(
        self,
        provider: TracerProvider,
        exporter: Any,
        endpoint: str,
        redactor: Redactor,
        gathered: _Gathered,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from drain.__about__ import __version__

        self.provider = provider
        self.exporter = exporter
        self.endpoint = endpoint
        self.redactor = redactor
        self.flush_seconds = flush_seconds
        queue_size = None if os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") else QUEUE_SIZE
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue_size))
        self.tracer: Tracer = provider.get_tracer("drain", __version__)
        self.run_span: Span | None = None
        self._open: set[Span] = set()
        self._ended = 0  # spans ended and sampled: what should reach the backend
        self._lock = threading.Lock()
        self._gathered = gathered

    # -- the hooks ----------------------------------------------------------------------

    def run_started(self, start: RunStart) -> None:
        self.run_span = self._start_run(start.started_at, start.table, start.queues)
        self.run_span.set_attributes(
            {
                "drain.run.budget_seconds": start.max_seconds,
                "drain.run.grace_seconds": start.grace_seconds,
            }
        )

    def job_started(self, job: Job) -> object | None:
        from opentelemetry import trace

        if self.run_span is None:
            return None
        span = self.tracer.start_span(
            f"process {job.queue}",
            context=trace.set_span_in_context(self.run_span),
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": MESSAGING_SYSTEM,
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": job.queue,
                "messaging.message.id": str(job.id),
                "drain.job.attempt": job.attempt,
                "drain.job.max_attempts": job.max_attempts,
            },
        )
        with self._lock:
            self._open.add(span)
        return span

    def job_finished(self, job: Job, token: object | None, result: JobResult) -> None:
        from opentelemetry.trace import Span, Status, StatusCode

        if not isinstance(token, Span):
            return
        with self._lock:
            if token not in self._open:  # ended with the run already
                return
            self._open.discard(token)
        token.set_attribute("drain.job.outcome", result.kind)
        if result.kind in ERROR_KINDS:
            text = self.redactor(result.error or result.kind)
            error_type = _error_type(text)
            token.set_attribute("error.type", error_type)
            token.add_event("exception", {"exception.type": error_type, "exception.message": text})
            token.set_status(Status(StatusCode.ERROR, text))
        self._end(token)

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        try:
            self._end_run(summary, end)
        finally:
            self._flush()

    # -- the end ------------------------------------------------------------------------

    def _start_run(self, started_at: float, table: str, queues: Sequence[str]) -> Span:
        return self.tracer.start_span(
            "drain run",
            start_time=int(started_at * 1e9),
            attributes={"drain.table": table, "drain.queues": list(queues)},
        )

    def _end_run(self, summary: Summary, end: RunEnd) -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self.run_span
        if span is None:  # the run failed before it could start: still one span saying so
            span = self._start_run(end.started_at, summary.table, ())
        with self._lock:
            unfinished, self._open = list(self._open), set()
        for job_span in unfinished:  # still running when the run ended (given back, or cut)
            job_span.set_attribute("drain.job.outcome", "unfinished")
            self._end(job_span, end.ended_at)
        attributes: dict[str, Any] = {
            f"drain.run.{name}": getattr(summary, name) for name in COUNTERS
        }
        attributes.update(
            {
                "drain.run.seconds": round(summary.seconds, 3),
                "drain.run.jobs_per_second": round(summary.jobs_per_second, 1),
                "drain.run.exit_code": summary.exit_code,
                "drain.run.exit_reason": summary.exit_reason,
            }
        )
        span.set_attributes(attributes)
        if summary.exit_code == 1:
            text = self.redactor(summary.error or summary.exit_reason)
            span.set_attribute("error.type", summary.exit_reason)
            span.set_status(Status(StatusCode.ERROR, text))
        self._end(span, end.ended_at)

    def _end(self, span: Span, at: float | None = None) -> None:
        if span.is_recording():  # a span the sampler left out is never exported
            with self._lock:
                self._ended += 1
        span.end(None if at is None else int(at * 1e9))

    def _flush(self) -> None:
        """Send what is left, within :attr:`flush_seconds`; say once if it did not all go."""
        failures: list[str] = []

        def flush() -> None:
            try:
                self.provider.force_flush()
                self.provider.shutdown()
            except Exception as exc:  # reported below with the rest, never a traceback
                from drain.core.redact import describe

                failures.append(describe(exc))

        flusher = threading.Thread(target=flush, name="drain-otel-flush", daemon=True)
        flusher.start()
        flusher.join(self.flush_seconds)
        late = flusher.is_alive()
        if late:
            # Stops the exporter's retries; the thread ends soon, still logging into
            # the gathering handler, which stays for that reason.
            self.exporter.shutdown()
        else:
            self._gathered.remove()
        unsent = self._ended - self.exporter.sent
        if unsent > 0 or failures:
            reason = (
                self._gathered.reason()
                or (failures[0] if failures else None)
                or (f"not sent within {self.flush_seconds:g}s" if late else None)
                or "more than the export queue holds: raise OTEL_BSP_MAX_QUEUE_SIZE"
            )
            if self._gathered.queue_full and "OTEL_BSP_MAX_QUEUE_SIZE" not in reason:
                reason += "; some dropped, more than the export queue holds"
            log.warning(
                "traces: %s of %s could not be sent to %s (%s); the run's outcome does not change",
                f"{max(unsent, 0):,}",
                _spans(self._ended),
                self.endpoint,
                self.redactor(reason)[:300],
            )


def _spans(count: int) -> str:
    return f"{count:,} span" + ("" if count == 1 else "s")


def _error_type(text: str) -> str:
    """The exception's class name from ``Type: message``, as ``error.type`` wants it."""
    head = text.split(":", 1)[0].strip()
    return head if head.replace(".", "").replace("_", "").isalnum() else "_OTHER"
