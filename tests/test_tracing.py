"""Traces of real runs, received by a real OTLP/HTTP endpoint the test starts.

Each test starts an HTTP server on a loopback port that accepts what an OTLP
collector accepts (``POST /v1/traces``, protobuf, gzip or not), decodes every
request with the protocol's own classes (``opentelemetry-proto``) and keeps the
spans; a real ``drain run`` subprocess is pointed at it with the standard
``OTEL_EXPORTER_OTLP_ENDPOINT``. The batch processor's schedule is set far out
(``OTEL_BSP_SCHEDULE_DELAY``), so every span received was sent by the flush at
the end of the run.

The protocol's classes are imported inside the tests, never at collection:
tests/test_observers.py checks that a plain run leaves ``opentelemetry`` out of
``sys.modules``, in the same process.
"""

from __future__ import annotations

import gzip
import http.server
import os
import signal
import socket
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from tests.support import REPO, add_jobs, drain_cli, start_cli, statuses, summary_of, with_dbname

PASSWORD = "Hunter2-not-for-traces"
LEAKY_TEXT = f"could not reach postgresql://app:{PASSWORD}@db.internal:5432/app"
RUN = ("run", "--handler", "trace_handlers:work")
# Nothing leaves before the end of the run: what arrives came with the final flush.
ONLY_THE_FINAL_FLUSH = {"OTEL_BSP_SCHEDULE_DELAY": "600000"}


def _proto() -> Any:
    """The OTLP protocol classes, imported when a test first needs them."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    return SimpleNamespace(
        Request=trace_service_pb2.ExportTraceServiceRequest,
        Response=trace_service_pb2.ExportTraceServiceResponse,
        CONSUMER=trace_pb2.Span.SPAN_KIND_CONSUMER,
        ERROR=trace_pb2.Status.STATUS_CODE_ERROR,
    )


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass
class Received:
    """One span as the collector got it, with its resource's attributes."""

    span: Any  # opentelemetry.proto.trace.v1.trace_pb2.Span
    resource: dict[str, Any]
    attributes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.attributes = {kv.key: _value(kv.value) for kv in self.span.attributes}

    @property
    def name(self) -> str:
        return self.span.name


class Collector:
    """A loopback OTLP/HTTP traces endpoint: decodes each export and keeps its spans."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.requests: list[str] = []  # the path and content encoding of each request
        self.lock = threading.Lock()
        collector = self
        proto = _proto()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                with collector.lock:
                    collector.requests.append(f"{self.path} {encoding or 'identity'}")
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                collector.keep(proto.Request.FromString(body))
                reply = proto.Response().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def keep(self, request: Any) -> None:
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                with self.lock:
                    self.spans += [Received(span, resource) for span in scope_spans.spans]

    def named(self, name: str) -> list[Received]:
        with self.lock:
            return [span for span in self.spans if span.name == name]


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def _env(collector: Collector, **more: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, **ONLY_THE_FINAL_FLUSH, **more}


def test_a_run_is_one_span_and_each_job_a_child_span_with_messaging_attributes(
    dsn: str, conn: psycopg.Connection[Any], collector: Collector
) -> None:
    done = add_jobs(conn, 3, queue="emails")
    (retried,) = add_jobs(conn, 1, queue="emails", payload={"raise": LEAKY_TEXT})
    (failed,) = add_jobs(conn, 1, queue="reports", payload={"fail": "the template is gone"})
    (snoozed,) = add_jobs(conn, 1, queue="reports", payload={"snooze": 3600})

    result = drain_cli(*RUN, "--queue", "emails,reports", "--json", dsn=dsn, env=_env(collector))
    summary = summary_of(result)
    assert (summary["done"], summary["retried"], summary["failed"]) == (3, 1, 1), result.stderr
    assert "traces:" not in result.stderr  # nothing to say when they all went out

    (run,) = collector.named("drain run")
    assert run.resource["service.name"] == "drain"
    assert run.attributes["drain.table"] == "public.jobs"
    assert run.attributes["drain.queues"] == ["emails", "reports"]
    assert run.attributes["drain.run.budget_seconds"] > 0
    assert run.attributes["drain.run.done"] == 3
    assert run.attributes["drain.run.retried"] == 1
    assert run.attributes["drain.run.failed"] == 1
    assert run.attributes["drain.run.claimed"] == 6
    assert run.attributes["drain.run.exit_code"] == summary["exit_code"] == 0
    assert run.attributes["drain.run.exit_reason"] == "drained"
    assert run.span.status.code != _proto().ERROR
    assert run.span.parent_span_id == b""

    jobs = {
        int(span.attributes["messaging.message.id"]): span
        for name in ("process emails", "process reports")
        for span in collector.named(name)
    }
    assert sorted(jobs) == sorted([*done, retried, failed, snoozed])
    for job_id, span in jobs.items():
        queue = "emails" if job_id in [*done, retried] else "reports"
        assert span.name == f"process {queue}"
        assert span.span.kind == _proto().CONSUMER
        assert span.span.trace_id == run.span.trace_id
        assert span.span.parent_span_id == run.span.span_id
        assert span.attributes["messaging.system"] == "drain"
        assert span.attributes["messaging.destination.name"] == queue
        assert span.attributes["messaging.operation.type"] == "process"
        assert span.attributes["drain.job.attempt"] == 1
        assert "payload" not in str(span.attributes)
    outcomes = {job_id: span.attributes["drain.job.outcome"] for job_id, span in jobs.items()}
    assert outcomes == {
        **dict.fromkeys(done, "done"),
        retried: "retry",
        failed: "fail",
        snoozed: "snooze",
    }
    for job_id in [*done, snoozed]:
        assert jobs[job_id].span.status.code != _proto().ERROR

    error = jobs[retried]
    assert error.span.status.code == _proto().ERROR
    assert "postgresql://app:********@db.internal" in error.span.status.message
    assert error.attributes["error.type"] == "ConnectionError"
    (event,) = error.span.events
    event_attributes = {kv.key: _value(kv.value) for kv in event.attributes}
    assert event.name == "exception"
    assert event_attributes["exception.type"] == "ConnectionError"
    assert "********" in event_attributes["exception.message"]
    assert PASSWORD not in str([span.span for span in collector.spans])
    # the same text last_error got
    stored = conn.execute("SELECT last_error FROM jobs WHERE id = %s", (retried,)).fetchone()
    assert stored is not None and stored[0] == error.span.status.message

    assert jobs[failed].span.status.code == _proto().ERROR
    assert "the template is gone" in jobs[failed].span.status.message


def test_a_run_stopped_by_sigterm_mid_batch_still_sends_its_spans(
    dsn: str, conn: psycopg.Connection[Any], collector: Collector
) -> None:
    add_jobs(conn, 12, payload={"sleep": 1.0})
    process = start_cli(*RUN, "--concurrency", "2", "--json", dsn=dsn, env=_env(collector))
    try:
        _wait_until_done(conn, at_least=2, process=process)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 3, stderr

    (run,) = collector.named("drain run")
    assert run.attributes["drain.run.exit_reason"] == "signal"
    assert run.attributes["drain.run.exit_code"] == 3
    done_ids = {
        row[0] for row in conn.execute("SELECT id FROM jobs WHERE status = 'done'").fetchall()
    }
    left = statuses(conn).get("queued", 0)
    assert len(done_ids) >= 2 and left > 0  # stopped mid-batch: some done, some given back
    jobs = collector.named("process default")
    finished = {
        int(span.attributes["messaging.message.id"])
        for span in jobs
        if span.attributes["drain.job.outcome"] == "done"
    }
    assert finished == done_ids
    assert run.attributes["drain.run.done"] == len(done_ids)
    assert all(span.span.parent_span_id == run.span.span_id for span in jobs)


def _wait_until_done(
    conn: psycopg.Connection[Any], *, at_least: int, process: Any, patience: float = 60.0
) -> None:
    import time

    deadline = time.monotonic() + patience
    while statuses(conn).get("done", 0) < at_least:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never finished its first jobs"
        time.sleep(0.05)


def test_a_run_that_cannot_start_still_sends_a_failed_run_span(
    server_dsn: str, collector: Collector
) -> None:
    missing = with_dbname(server_dsn, "no_such_database_for_traces")
    result = drain_cli(*RUN, dsn=missing, env=_env(collector))
    assert result.returncode == 1, result.stderr
    (run,) = collector.named("drain run")
    assert run.span.status.code == _proto().ERROR
    assert "no_such_database_for_traces" in run.span.status.message
    assert run.attributes["drain.run.exit_code"] == 1
    assert run.attributes["drain.run.exit_reason"] == "error"


def test_the_standard_variables_apply(
    dsn: str, conn: psycopg.Connection[Any], collector: Collector
) -> None:
    """The traces endpoint variable, gzip, the service name and resource attributes."""
    add_jobs(conn, 2)
    env = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{collector.endpoint}/v1/traces",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_SERVICE_NAME": "nightly-mailer",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=staging",
        **ONLY_THE_FINAL_FLUSH,
    }
    result = drain_cli(*RUN, "--json", dsn=dsn, env=env)
    assert summary_of(result)["done"] == 2
    assert collector.requests and all(r == "/v1/traces gzip" for r in collector.requests)
    (run,) = collector.named("drain run")
    assert run.resource["service.name"] == "nightly-mailer"
    assert run.resource["deployment.environment.name"] == "staging"
    assert len(collector.named("process default")) == 2


def test_a_tracing_backend_that_is_down_costs_one_warning_and_not_the_run(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 3)
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", **ONLY_THE_FINAL_FLUSH}
    result = drain_cli(*RUN, "--otel", "--json", dsn=dsn, env=env)
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 3
    warnings = [line for line in result.stderr.splitlines() if "traces:" in line]
    assert len(warnings) == 1, result.stderr
    assert f"127.0.0.1:{port}/v1/traces" in warnings[0]
    assert "the run's outcome does not change" in warnings[0]
    assert "Traceback" not in result.stderr and "Transient error" not in result.stderr


def test_an_endpoint_that_is_not_a_url_is_refused_before_the_run(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    (job_id,) = add_jobs(conn, 1)
    result = drain_cli(*RUN, dsn=dsn, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "drain: error: OTEL_EXPORTER_OTLP_ENDPOINT is not an http(s) URL: 'collector:4318' "
        "(give one such as http://collector:4318)"
    ]
    assert statuses(conn) == {"queued": 1}, f"job {job_id} was touched"


def test_without_the_extra_the_run_says_what_to_install(dsn: str, tmp_path: Path) -> None:
    """A stand-in ``opentelemetry`` package that cannot import, ahead on the path."""
    blocked = tmp_path / "opentelemetry"
    blocked.mkdir()
    (blocked / "__init__.py").write_text(
        'raise ImportError("not installed", name="opentelemetry")\n'
    )
    path = os.pathsep.join([str(tmp_path), str(REPO / "tests" / "apps"), str(REPO)])
    for env in ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}):
        args = (*RUN, "--otel") if not env else RUN
        result = drain_cli(*args, dsn=dsn, env={"PYTHONPATH": path, **env})
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("drain: error: ")
        assert "pip install 'pg-drain[otel]'" in line
        assert ("--otel needs" in line) == (not env)


def test_otel_sdk_disabled_turns_the_traces_off(
    dsn: str, conn: psycopg.Connection[Any], collector: Collector
) -> None:
    add_jobs(conn, 1)
    result = drain_cli(
        *RUN, "--otel", "--json", dsn=dsn, env=_env(collector, OTEL_SDK_DISABLED="true")
    )
    assert summary_of(result)["done"] == 1
    assert collector.requests == []


def test_a_password_in_the_endpoint_is_not_shown(dsn: str) -> None:
    result = drain_cli(
        *RUN,
        dsn=dsn,
        env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"ftp://user:{PASSWORD}@collector/v1/traces"},
    )
    assert result.returncode == 2
    assert PASSWORD not in result.stderr and "'ftp://collector/v1/traces'" in result.stderr


def test_headers_that_cannot_be_read_are_refused_without_being_shown(dsn: str) -> None:
    token = "sk-live-0123456789abcdef"
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization Bearer {token}",
    }
    result = drain_cli(*RUN, dsn=dsn, env=env)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("drain: error: OTEL_EXPORTER_OTLP_HEADERS")
    assert token not in result.stderr


def test_a_setting_the_sdk_cannot_read_is_one_warning_and_the_traces_go_on(
    dsn: str, conn: psycopg.Connection[Any], collector: Collector
) -> None:
    add_jobs(conn, 2)
    env = _env(collector, OTEL_EXPORTER_OTLP_TIMEOUT="soon", OTEL_BSP_MAX_QUEUE_SIZE="lots")
    result = drain_cli(*RUN, "--json", dsn=dsn, env=env)
    assert summary_of(result)["done"] == 2
    warnings = [line for line in result.stderr.splitlines() if line.startswith("drain: traces:")]
    assert len(warnings) == 2, result.stderr
    assert any("'soon'" in line for line in warnings)
    assert any("OTEL_BSP_MAX_QUEUE_SIZE" in line for line in warnings)
    assert "Traceback" not in result.stderr
    assert len(collector.named("process default")) == 2


def test_batch_settings_that_cannot_work_are_refused_before_the_run(dsn: str) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_MAX_QUEUE_SIZE": "10"}
    result = drain_cli(*RUN, dsn=dsn, env=env)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("drain: error: traces: the OTEL_BSP_* settings cannot work")


OTLP_KEY = "OTLPKEY111zq"


class Refusing:
    """An OTLP/HTTP endpoint that answers every export 401, keeping the paths asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        paths = self.paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                paths.append(self.path)
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def refusing() -> Iterator[Refusing]:
    endpoint = Refusing()
    endpoint.thread.start()
    try:
        yield endpoint
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()


def test_a_query_in_the_endpoint_goes_after_the_signal_path_and_is_never_shown(
    dsn: str, conn: psycopg.Connection[Any], refusing: Refusing
) -> None:
    """The SDK put /v1/traces after the query (``/otlp?api_key=K/v1/traces``), and the
    warning printed the key; now the spans go to /otlp/v1/traces?api_key=K, and the
    warning names http://host:port/otlp/v1/traces."""
    add_jobs(conn, 2)
    base = f"{refusing.base}/otlp?api_key={OTLP_KEY}"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": base, **ONLY_THE_FINAL_FLUSH}
    result = drain_cli(*RUN, "--verbose", "--json", dsn=dsn, env=env)

    assert result.returncode == 0, result.stderr
    assert refusing.paths and set(refusing.paths) == {f"/otlp/v1/traces?api_key={OTLP_KEY}"}
    warnings = [line for line in result.stderr.splitlines() if "could not be sent" in line]
    assert len(warnings) == 1, result.stderr
    assert f"could not be sent to {refusing.base}/otlp/v1/traces (HTTP 401" in warnings[0]
    assert OTLP_KEY not in result.stdout + result.stderr


def test_a_closed_endpoint_with_a_key_in_its_query_is_named_without_it(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 1)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{port}/v1/traces?key={OTLP_KEY}",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{OTLP_KEY}x",
        **ONLY_THE_FINAL_FLUSH,
    }
    result = drain_cli(*RUN, "--otel", "--json", dsn=dsn, env=env)

    assert result.returncode == 0, result.stderr
    assert f"could not be sent to http://127.0.0.1:{port}/v1/traces (" in result.stderr
    assert OTLP_KEY not in result.stdout + result.stderr
