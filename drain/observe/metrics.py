"""The run's metrics for Prometheus: a textfile for node_exporter, or a push to a Pushgateway.

A run lives for seconds and is gone before any scrape, so it hands over what it
knows as it exits: ``--metrics-textfile`` writes a ``.prom`` file that
node_exporter's textfile collector serves until the next run replaces it, and
``--pushgateway`` pushes the same metrics to a Prometheus Pushgateway. Both are
built by :mod:`drain.observe.observers` only when their option is given, and import
``prometheus_client`` (the ``metrics`` extra) only then, so a plain run never
loads it. Each uses a registry of its own, never the library's global one: a
``drain.run`` inside an application must not mix its metrics into the
application's.

The metrics (see the README's "Observing runs" for the table):

- when the last run started and ended, its duration and exit code, and when a
  run last succeeded (exit 0, or 3: the budget ran out as designed);
- the jobs the run claimed, lost and released (run-wide, from its summary), and
  the attempts it finished per queue: done, retried, failed, snoozed (counted as
  each worker saw the attempt end);
- the ready jobs and the age of the oldest per queue at the end, read while the
  database is awake anyway;
- the schema version this drain reads and writes.

Counters are the run's own: a run is a process, and its counters start at zero
as a restarted exporter's do.

Nothing here changes how a run ends: a file that cannot be written or a gateway
that is down is one warning line, and the exit code is the run's. Options that
cannot work (a directory that does not exist, a URL that is not one) are
refused up front, with exit 2, before the run connects.
"""

from __future__ import annotations

import http.client
import logging
import os
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from drain.core.credentials import remember, safe_endpoint
from drain.core.errors import EXIT_OK, EXIT_WORK_LEFT, UsageError
from drain.core.summary import Backlog
from drain.core.table import SCHEMA_VERSION
from drain.observe.observers import JobResult, Observer, RunEnd, RunStart

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

    from drain.core.config import RunConfig
    from drain.core.jobs import Job
    from drain.core.summary import Summary

log = logging.getLogger("drain")

# The exit codes that count as a success: drained, or stopped by its budget with
# work left for the next run (exit 3 is the design, not a failure).
SUCCESS_CODES = (EXIT_OK, EXIT_WORK_LEFT)
# The Pushgateway's grouping key: job="drain" and the table, no instance label, so
# each table's last run replaces its own group whichever host ran it.
JOB = "drain"
# Seconds a push may take before it is given up (with a warning): the process is
# about to exit, and a scheduler's timeout covers this wait too.
PUSH_TIMEOUT = 5.0
TEXTFILE_SUFFIX = ".prom"
LAST_SUCCESS = "drain_last_success_timestamp_seconds"

# Counted per queue from each finished attempt, by the summary's word for it.
PER_QUEUE = ("done", "retried", "failed", "snoozed")
# Counted run-wide from the summary: the observer never sees these per job.
RUN_WIDE = ("claimed", "lost", "released")

# name, help text
_RUN_GAUGES = (
    ("drain_last_run_start_timestamp_seconds", "When the last run started (POSIX seconds)."),
    ("drain_last_run_end_timestamp_seconds", "When the last run ended (POSIX seconds)."),
    ("drain_last_run_duration_seconds", "How long the last run took, start to end."),
    ("drain_last_run_exit_code", "The last run's exit code: 0 drained, 3 work left, 1 failed."),
)
_HELP = {
    "claimed": "Jobs the last run claimed.",
    "lost": "Attempts the last run lost mid-run (its lease was taken; no result recorded).",
    "released": "Jobs the last run claimed and gave back unstarted.",
    "done": "Attempts the last run finished as done, by queue.",
    "retried": "Attempts the last run finished as failed, to be retried, by queue.",
    "failed": "Attempts the last run finished as failed for good, by queue.",
    "snoozed": "Attempts the last run finished by snoozing the job, by queue.",
}


def outcome(job: Job, result: JobResult) -> str:
    """The summary's word for how an attempt ended, as ``sql/fail.sql`` will record it:
    a retry on the job's last attempt fails it for good."""
    if result.kind == "retry":
        return "failed" if job.attempt >= max(job.max_attempts, 1) else "retried"
    return {"done": "done", "fail": "failed", "snooze": "snoozed"}.get(result.kind, result.kind)


class RunMetrics(Observer):
    """Counts the run's attempts per queue; at its end, hands the metrics to :meth:`publish`."""

    wants_backlog = True

    def __init__(self, table: str, queues: Sequence[str] = ()) -> None:
        self.table = table
        self.queues = list(queues)
        self.counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def run_started(self, start: RunStart) -> None:
        self.table, self.queues = start.table, list(start.queues)

    def job_finished(self, job: Job, token: object | None, result: JobResult) -> None:
        word = outcome(job, result)
        with self._lock:
            self.counts[(job.queue, word)] += 1

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        self.publish(summary, end)

    def publish(self, summary: Summary, end: RunEnd) -> None:
        """Write or send the metrics; a failure is a warning, never an exception."""
        raise NotImplementedError

    def families(self, summary: Summary, end: RunEnd, last_success: float | None) -> list[Metric]:
        """The metric families of this run; ``last_success`` None leaves that one out."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        table = [self.table]
        values = (end.started_at, end.ended_at, end.ended_at - end.started_at, summary.exit_code)
        found: list[Metric] = []
        for (name, text), value in zip(_RUN_GAUGES, values, strict=True):
            gauge = GaugeMetricFamily(name, text, labels=["table"])
            gauge.add_metric(table, float(value))
            found.append(gauge)
        if last_success is not None:
            success = GaugeMetricFamily(
                LAST_SUCCESS, "When a run last ended with exit 0 or 3.", labels=["table"]
            )
            success.add_metric(table, last_success)
            found.append(success)
        for word in RUN_WIDE:
            family = CounterMetricFamily(f"drain_jobs_{word}", _HELP[word], labels=["table"])
            family.add_metric(table, float(getattr(summary, word)))
            found.append(family)
        with self._lock:
            counts = dict(self.counts)
        queues = sorted({*self.queues, *(queue for queue, _ in counts), *end.backlog})
        for word in PER_QUEUE:
            family = CounterMetricFamily(
                f"drain_jobs_{word}", _HELP[word], labels=["table", "queue"]
            )
            for queue in queues:
                family.add_metric([self.table, queue], float(counts.get((queue, word), 0)))
            found.append(family)
        found += self._backlog(end.backlog, queues)
        schema = GaugeMetricFamily(
            "drain_schema_version", "The queue table schema version drain reads and writes.",
            labels=["table"],
        )  # fmt: skip
        schema.add_metric(table, float(SCHEMA_VERSION))
        found.append(schema)
        return found

    def _backlog(self, backlog: Mapping[str, Backlog], queues: Sequence[str]) -> list[Metric]:
        """Ready jobs per queue at the end; none when the run did not read them (it
        failed, or left the table to enough other runs): zeros there would be made up."""
        from prometheus_client.core import GaugeMetricFamily

        if not backlog:
            return []
        ready = GaugeMetricFamily(
            "drain_queue_ready_jobs", "Jobs ready to run at the end of the last run, by queue.",
            labels=["table", "queue"],
        )  # fmt: skip
        oldest = GaugeMetricFamily(
            "drain_queue_oldest_ready_age_seconds",
            "Age of the oldest ready job (by its run_at) at the end of the last run; 0 if none.",
            labels=["table", "queue"],
        )
        for queue in queues:
            left = backlog.get(queue, Backlog(0, None))
            ready.add_metric([self.table, queue], float(left.ready))
            oldest.add_metric([self.table, queue], float(left.oldest_seconds or 0.0))
        return [ready, oldest]

    def registry(
        self, summary: Summary, end: RunEnd, last_success: float | None
    ) -> CollectorRegistry:
        """A registry of this run's metrics alone (never the global one)."""
        from prometheus_client.registry import Collector, CollectorRegistry

        families = self.families(summary, end, last_success)

        class Fixed(Collector):
            def collect(self) -> Iterable[Metric]:
                return families

        registry = CollectorRegistry(auto_describe=False)
        registry.register(Fixed())
        return registry


class TextfileObserver(RunMetrics):
    """Writes the metrics to a ``.prom`` file at the end of the run, atomically.

    ``write_to_textfile`` writes a file beside it and renames it over the old one,
    so node_exporter never reads half a file. The last success survives a failed
    run: it is read back from the file the previous run left.
    """

    def __init__(self, path: Path, table: str, queues: Sequence[str] = ()) -> None:
        super().__init__(table, queues)
        self.path = path

    def publish(self, summary: Summary, end: RunEnd) -> None:
        from prometheus_client import write_to_textfile

        from drain.core.redact import describe

        ok = summary.exit_code in SUCCESS_CODES
        last_success = end.ended_at if ok else self.previous_success()
        try:
            write_to_textfile(str(self.path), self.registry(summary, end, last_success))
        except OSError as exc:
            log.warning(
                "could not write the run's metrics to %s (%s); the run's outcome stands",
                self.path,
                describe(exc),
            )

    def previous_success(self) -> float | None:
        """The last success the file already holds for this table, if it can be read."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            text = self.path.read_text(encoding="utf-8")
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name == LAST_SUCCESS and sample.labels.get("table") == self.table:
                        return float(sample.value)
        except (OSError, ValueError) as exc:
            log.debug("no last success read back from %s: %s", self.path, exc)
        return None


class PushgatewayObserver(RunMetrics):
    """Pushes the metrics to a Pushgateway at the end of the run.

    One POST (``pushadd``) to the group job="drain", table=<schema.table>: it
    replaces the metrics of the same names in that group and keeps the others,
    so a failed run, which leaves ``drain_last_success_timestamp_seconds`` out of
    its push, leaves the last success where the previous successful run put it.
    A gateway that is down, slow or refusing is one warning line; the run's exit
    code stays the run's.
    """

    def __init__(self, url: str, table: str, queues: Sequence[str] = ()) -> None:
        super().__init__(table, queues)
        self.url = url

    def publish(self, summary: Summary, end: RunEnd) -> None:
        from prometheus_client import pushadd_to_gateway

        from drain.core.redact import describe

        last_success = end.ended_at if summary.exit_code in SUCCESS_CODES else None
        registry = self.registry(summary, end, last_success)
        try:
            pushadd_to_gateway(
                self.url,
                job=JOB,
                registry=registry,
                grouping_key={"table": self.table},
                timeout=PUSH_TIMEOUT,
            )
        except (OSError, http.client.HTTPException) as exc:
            # URLError and HTTPError are OSErrors: refused, unreachable, timed out,
            # or the gateway said no. None of it is the run's business.
            reason = getattr(exc, "reason", None)
            cause = reason if isinstance(reason, BaseException) else exc
            log.warning(
                "could not push the run's metrics to the Pushgateway at %s (%s); "
                "the run's outcome stands",
                safe_endpoint(self.url),
                describe(cause),
            )


def _need_prometheus(option: str) -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise UsageError(
            f"{option} needs prometheus-client: pip install 'pg-drain[metrics]'"
        ) from None


def textfile_path(value: str) -> Path:
    """The ``--metrics-textfile`` path, refused up front if it can never be written."""
    if not value.strip():
        raise UsageError("--metrics-textfile is empty: give the .prom file to write")
    path = Path(value)
    if not path.name.endswith(TEXTFILE_SUFFIX):
        raise UsageError(
            f"--metrics-textfile {value!r} must end in {TEXTFILE_SUFFIX}: "
            "node_exporter's textfile collector reads only those"
        )
    directory = path.parent
    if not directory.is_dir():
        raise UsageError(f"--metrics-textfile: the directory {str(directory)!r} does not exist")
    if path.is_dir():
        raise UsageError(f"--metrics-textfile {value!r} is a directory, not a file")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"--metrics-textfile: cannot write in {str(directory)!r}")
    return path


def gateway_url(value: str) -> str:
    """The ``--pushgateway`` URL (``host:port`` means http), refused up front if it is not one."""
    text = value.strip()
    if not text:
        raise UsageError("--pushgateway is empty: give the Pushgateway's URL")
    url = text if "://" in text else f"http://{text}"
    # The value is not echoed: a URL may carry a token, and drain shows none (a
    # message shows drain.core.credentials.safe_endpoint of it).
    wrong = UsageError("--pushgateway must be an http(s) URL such as http://pushgateway:9091")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise wrong from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        raise wrong
    if parts.username is not None or parts.password is not None:
        raise UsageError("--pushgateway: credentials in the URL are not supported")
    if parts.query or parts.fragment:
        raise wrong
    # A path may carry a token (a hosted gateway's): masked wherever drain prints.
    remember(url)
    return url


def textfile_observer(value: str, config: RunConfig, environ: Mapping[str, str]) -> Observer:
    """``--metrics-textfile PATH``: the observer that writes the run's metrics there."""
    _need_prometheus("--metrics-textfile")
    path = textfile_path(value)
    return TextfileObserver(path, config.table.qualified, config.queues)


def pushgateway_observer(value: str, config: RunConfig, environ: Mapping[str, str]) -> Observer:
    """``--pushgateway URL``: the observer that pushes the run's metrics there."""
    _need_prometheus("--pushgateway")
    url = gateway_url(value)
    return PushgatewayObserver(url, config.table.qualified, config.queues)
