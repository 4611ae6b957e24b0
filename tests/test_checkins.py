"""Sentry Crons check-ins sent by the real sentry-sdk, received by a loopback Sentry host.

The stand-in host is an HTTP server in a thread: ``SENTRY_DSN`` points the SDK at
it, and it decodes each envelope the SDK posts to ``/api/1/envelope/`` (gzip or
not), keeping every item, so a test also sees anything other than a check-in
that drain should not have sent.
"""

from __future__ import annotations

import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from drain.observe.checkins import max_runtime
from tests.support import REPO, add_jobs, drain_cli, summary_of


class SentryHost:
    """What the stand-in received: every envelope item, in order, as (type, payload)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()
        self.port = 0

    @property
    def dsn(self) -> str:
        return f"http://public@127.0.0.1:{self.port}/1"

    def checkins(self) -> list[dict[str, Any]]:
        with self.lock:
            return [payload for kind, payload in self.items if kind == "check_in"]

    def receive(self, path: str, body: bytes, encoding: str | None) -> None:
        if encoding == "gzip":
            body = gzip.decompress(body)
        else:
            assert encoding is None, f"an encoding the stand-in cannot read: {encoding}"
        lines = body.split(b"\n")
        json.loads(lines[0])  # the envelope header
        items, index = [], 1
        while index < len(lines) and lines[index].strip():
            header = json.loads(lines[index])
            payload = lines[index + 1]
            if "length" in header:
                joined = b"\n".join(lines[index + 1 :])
                payload = joined[: header["length"]]
                index += 2 + payload.count(b"\n")
            else:
                index += 2
            items.append((header["type"], json.loads(payload)))
        with self.lock:
            self.paths.append(path)
            self.items += items


@pytest.fixture
def sentry_host() -> Iterator[SentryHost]:
    host = SentryHost()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            host.receive(self.path, body, self.headers.get("Content-Encoding"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run_with_monitor(dsn: str, host: SentryHost, *args: str) -> Any:
    return drain_cli(
        "run", "--sentry-monitor", "nightly-drain", *args, "--json",
        dsn=dsn, env={"SENTRY_DSN": host.dsn},
    )  # fmt: skip


def test_a_drained_run_checks_in_in_progress_then_ok(
    conn: psycopg.Connection[Any], dsn: str, sentry_host: SentryHost
) -> None:
    add_jobs(conn, 3)
    result = run_with_monitor(dsn, sentry_host, "--exec", "true")
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 3

    started, ended = sentry_host.checkins()
    assert [c["monitor_slug"] for c in (started, ended)] == ["nightly-drain"] * 2
    assert [c["status"] for c in (started, ended)] == ["in_progress", "ok"]
    # one check-in, opened and closed: Sentry matches them by id
    assert started["check_in_id"] == ended["check_in_id"]
    assert ended["duration"] >= 0
    # no schedule is known, so no monitor_config: Relay drops one without a schedule
    assert "monitor_config" not in started and "monitor_config" not in ended
    # check-ins only: no events, sessions or transactions
    assert {kind for kind, _ in sentry_host.items} == {"check_in"}
    assert set(sentry_host.paths) == {"/api/1/envelope/"}


def test_with_the_runs_schedule_sentry_can_create_the_monitor(
    conn: psycopg.Connection[Any], dsn: str, sentry_host: SentryHost
) -> None:
    result = run_with_monitor(
        dsn, sentry_host, "--exec", "true", "--sentry-schedule", "@hourly",
        "--max-seconds", "300", "--grace-seconds", "30",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = {"schedule": {"type": "crontab", "value": "0 * * * *"}, "max_runtime": 7}
    assert all(c["monitor_config"] == expected for c in sentry_host.checkins())


def test_a_run_that_cannot_start_sends_error_alone(
    conn: psycopg.Connection[Any], dsn: str, sentry_host: SentryHost
) -> None:
    conn.execute("DROP TABLE jobs CASCADE")
    result = run_with_monitor(dsn, sentry_host, "--exec", "true")
    assert result.returncode == 1, result.stderr
    assert "drain init" in result.stderr
    (ended,) = sentry_host.checkins()
    assert (ended["monitor_slug"], ended["status"]) == ("nightly-drain", "error")


def test_a_run_stopped_by_its_budget_is_ok(
    conn: psycopg.Connection[Any], dsn: str, sentry_host: SentryHost
) -> None:
    add_jobs(conn, 200)
    result = run_with_monitor(
        dsn, sentry_host, "--exec", "sleep 0.1", "--max-seconds", "1", "--grace-seconds", "1"
    )
    assert result.returncode == 3, result.stderr
    assert [c["status"] for c in sentry_host.checkins()] == ["in_progress", "ok"]


def test_failed_jobs_do_not_make_the_run_an_error(
    conn: psycopg.Connection[Any], dsn: str, sentry_host: SentryHost
) -> None:
    add_jobs(conn, 2, max_attempts=1)
    result = run_with_monitor(dsn, sentry_host, "--exec", "exit 4")
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["failed"] == 2
    assert [c["status"] for c in sentry_host.checkins()] == ["in_progress", "ok"]


@pytest.mark.parametrize(
    ("slug", "env", "says"),
    [
        ("nightly", {}, "--sentry-monitor needs SENTRY_DSN"),
        ("nightly", {"SENTRY_DSN": "not a dsn"}, "SENTRY_DSN is not a Sentry DSN"),
        ("", {"SENTRY_DSN": "http://public@127.0.0.1:1/1"}, "--sentry-monitor is empty"),
        ("x" * 51, {"SENTRY_DSN": "http://public@127.0.0.1:1/1"}, "at most 50 characters"),
    ],
)
def test_a_monitor_that_cannot_check_in_is_refused_before_the_run(
    slug: str, env: dict[str, str], says: str, dsn: str, sentry_host: SentryHost
) -> None:
    result = drain_cli(
        "run", "--exec", "true", "--sentry-monitor", slug, dsn=dsn,
        env={"SENTRY_DSN": "", **env},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert sentry_host.checkins() == []


# Run in a process of its own: this test process never imports sentry_sdk, as a
# plain run must not (tests/test_observers.py checks that in this same process).
SCHEDULED_RUN = """
import sys, time
import sentry_sdk
from drain.observe.checkins import CheckinObserver, monitor_config
from drain.observe.observers import RunEnd, RunStart
from drain.core.summary import Summary

client = sentry_sdk.Client(sys.argv[1], default_integrations=False)
observer = CheckinObserver(client, "every-quarter", monitor_config("*/15 * * * *", 300, 30))
now = time.time()
observer.run_started(RunStart("public.jobs", ("default",), now, 300, 30))
observer.run_finished(Summary(exit_reason="budget"), RunEnd(now, now + 1, {}))
# the process-wide client is untouched: an application's own Sentry setup stays its own
print(sentry_sdk.get_client().is_active())
"""


def test_given_a_schedule_the_monitor_gets_the_budget_plus_grace_as_its_max_runtime(
    sentry_host: SentryHost,
) -> None:
    # 300 s of budget and 30 s of grace: 5.5 minutes, rounded up, plus one
    assert max_runtime(300, 30) == 7
    assert max_runtime(60, 0) == 2
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SENTRY_")}
    environment["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [sys.executable, "-c", SCHEDULED_RUN, sentry_host.dsn],
        capture_output=True, text=True, env=environment, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"

    started, ended = sentry_host.checkins()
    expected = {"schedule": {"type": "crontab", "value": "*/15 * * * *"}, "max_runtime": 7}
    assert started["monitor_config"] == expected and ended["monitor_config"] == expected
    assert [started["status"], ended["status"]] == ["in_progress", "ok"]
    assert ended["duration"] == pytest.approx(1)
