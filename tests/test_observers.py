"""The hooks a run reports through: heard on every stop path, and never in the way.

Metrics, traces and check-ins are each one observer (drain.observe.observers); these
tests hold the contract they rely on with an observer that only records.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import psycopg
import pytest

from drain.core.config import ConnectOptions, RunConfig
from drain.core.errors import DrainError
from drain.core.summary import Backlog, Summary
from drain.observe.observers import JobResult, Observer, Observers, RunEnd, RunStart
from drain.runner.runner import Runner
from tests.support import add_jobs, drain_cli, with_dbname


class Recorder(Observer):
    wants_backlog = True

    def __init__(self) -> None:
        self.started: list[RunStart] = []
        self.jobs: list[tuple[int, object, JobResult]] = []
        self.ended: list[tuple[Summary, RunEnd]] = []
        self.lock = threading.Lock()

    def run_started(self, start: RunStart) -> None:
        self.started.append(start)

    def job_started(self, job: Any) -> object:
        return ("token", job.id)

    def job_finished(self, job: Any, token: object, result: JobResult) -> None:
        with self.lock:
            self.jobs.append((job.id, token, result))

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        self.ended.append((summary, end))


class Broken(Observer):
    def job_started(self, job: Any) -> object:
        raise RuntimeError("the exporter is down")


def _run(dsn: str, handler: Any, observers: list[Observer], **settings: Any) -> Summary:
    config = RunConfig(connect=ConnectOptions(dsn=dsn, retry_for=0.5), **settings)
    return Runner(config, {"default": handler}, observers=Observers(observers)).run()


def test_every_job_and_the_run_are_heard_and_a_broken_observer_changes_nothing(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids = add_jobs(conn, 5)
    failing = add_jobs(conn, 1, payload={"fail": True})
    add_jobs(conn, 2, run_in=3600)  # not ready: not in the backlog

    def handler(job: Any) -> None:
        if job.payload.get("fail"):
            raise ValueError("no")

    recorder = Recorder()
    summary = _run(dsn, handler, [Broken(), recorder], concurrency=2)

    assert (summary.done, summary.retried) == (5, 1)
    assert recorder.started[0].table == "public.jobs"
    assert recorder.started[0].queues == ("default",)
    heard = {job_id: (token, result.kind) for job_id, token, result in recorder.jobs}
    assert heard == {
        **{i: (("token", i), "done") for i in ids},
        failing[0]: (("token", failing[0]), "retry"),
    }
    ((ended, end),) = recorder.ended
    assert ended is summary and end.ended_at >= end.started_at
    # the failed job is queued again, but for later (backoff): nothing is ready
    assert end.backlog == {"default": Backlog(0, None)}


def test_the_budget_and_the_backlog_are_reported(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_jobs(conn, 30)
    recorder = Recorder()
    summary = _run(dsn, lambda job: time.sleep(0.2), [recorder], max_seconds=1.5)
    assert summary.exit_reason == "budget"
    ((ended, end),) = recorder.ended
    assert ended.exit_code == 3
    left = end.backlog["default"]
    assert isinstance(left, Backlog) and left.ready == 30 - summary.done
    assert left.oldest_seconds is not None and left.oldest_seconds >= 0


def test_a_run_that_cannot_start_is_still_reported_as_an_error(server_dsn: str) -> None:
    recorder = Recorder()
    missing = with_dbname(server_dsn, "no_such_database_here")
    with pytest.raises(DrainError):
        _run(missing, lambda job: None, [recorder])
    assert recorder.started == []
    ((summary, _),) = recorder.ended
    assert summary.exit_reason == "error" and summary.exit_code == 1
    assert "no_such_database_here" in (summary.error or "")


def test_no_option_no_observer_and_no_import() -> None:
    """A plain run builds no observer and imports no integration's library (in a
    process of its own, so what other tests imported does not count)."""
    code = (
        "import sys\n"
        "from drain.core.config import ConnectOptions, RunConfig\n"
        "from drain.observe.observers import for_run\n"
        "assert not for_run(RunConfig(connect=ConnectOptions(dsn='')), environ={})\n"
        "heavy = {'prometheus_client', 'opentelemetry', 'sentry_sdk'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_drain_run_json_carries_the_ready_jobs_left_per_queue(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """What an autoscaler reads: the queues served, each with its ready jobs left."""
    add_jobs(conn, 12)
    add_jobs(conn, 2, queue="other")
    arguments = ["run", "--exec", "sleep 0.3", "--queue", "default,other"]
    arguments += ["--queue-order", "strict", "--max-seconds", "1.5", "--json"]
    result = drain_cli(*arguments, dsn=dsn)
    assert result.returncode == 3, result.stderr
    summary = json.loads(result.stdout)
    left = conn.execute(
        "SELECT queue, count(*) FROM jobs WHERE status = 'queued' GROUP BY queue"
    ).fetchall()
    assert {name: entry["ready"] for name, entry in summary["ready"].items()} == {
        "default": dict(left).get("default", 0),
        "other": dict(left).get("other", 0),
    }
    assert summary["ready"]["other"]["ready"] == 2
    assert summary["ready"]["other"]["oldest_ready_seconds"] >= 0
