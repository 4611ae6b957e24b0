"""drain.serverless: a function handler that drains within the invocation's remaining time."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

import drain
from drain import serverless
from drain.core.errors import DrainError, UsageError
from tests.support import add_jobs, statuses

FUNCTION_ARN = "arn:aws:lambda:eu-west-1:123456789012:function:drain"


class FakeContext:
    """A Lambda context whose remaining time runs down on the real clock."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.invoked_function_arn = FUNCTION_ARN

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


class Recorder:
    """A handler that records each job it ran and sleeps as long as the payload says."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ran: list[int] = []
        self.started = threading.Event()

    def __call__(self, job: drain.Job) -> None:
        self.started.set()
        with self.lock:
            self.ran.append(job.id)
        time.sleep(float(job.payload.get("sleep", 0)))


# -- the budget -------------------------------------------------------------------------


def test_budget_is_the_remaining_time_less_margin_and_grace() -> None:
    budget = serverless.budget_for(20.0, margin=5.0, grace=3.0)
    assert budget.seconds == 12.0
    assert "20s left - 5s margin - 3s grace" in budget.describe()
    assert serverless.budget_for(900.0, margin=10.0, grace=10.0, cap=300.0).seconds == 300.0


def test_too_little_time_left_is_refused_with_what_to_change() -> None:
    with pytest.raises(serverless.BudgetTooShort, match="raise the function's timeout"):
        serverless.budget_for(15.0, margin=10.0, grace=10.0)


def test_without_a_platform_deadline_the_cap_is_the_budget() -> None:
    assert serverless.budget_for(None, margin=10.0, grace=10.0, cap=60.0).seconds == 60.0
    with pytest.raises(UsageError, match="DRAIN_MAX_SECONDS"):
        serverless.budget_for(None, margin=10.0, grace=10.0)


def test_remaining_time_comes_from_the_context() -> None:
    remaining = serverless.remaining_seconds(FakeContext(20))
    assert remaining is not None and 19.0 < remaining <= 20.0
    assert serverless.remaining_seconds(None) is None


# -- settings from the environment --------------------------------------------------------


def test_settings_come_from_the_same_variables_as_drain_run() -> None:
    settings = serverless.settings_from_environment(
        {
            "DRAIN_APP": "myapp.jobs",
            "DRAIN_QUEUE": "emails, reports",
            "DRAIN_LEASE": "10m",
            "DRAIN_CONCURRENCY": "4",
            "DRAIN_MAX_RUNNERS": "2",
            "DRAIN_VACUUM": "off",
            "DRAIN_CONNECT_RETRY": "20s",
            "DRAIN_TABLE": "tasks",
            "DRAIN_NO_RECORD": "true",
            "HOME": "/root",
        }
    )
    assert settings == {
        "app": "myapp.jobs",
        "queues": ("emails", "reports"),
        "lease": 600.0,
        "concurrency": 4,
        "max_runners": 2,
        "vacuum": "off",
        "retry_for": 20.0,
        "table": drain.JobTable("public", "tasks"),
        "record": False,
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DRAIN_LEASE", "soon"),
        ("DRAIN_CONCURRENCY", "four"),
        ("DRAIN_VACUUM", "sometimes"),
        ("DRAIN_POOLER", "maybe"),
    ],
)
def test_a_malformed_variable_is_named_in_the_error(name: str, value: str) -> None:
    with pytest.raises(UsageError, match=name):
        serverless.settings_from_environment({name: value})


# -- the handler against a real database ---------------------------------------------------


def _handler(dsn: str, recorder: Recorder, **env: str) -> Any:
    return serverless.lambda_handler(
        dsn=dsn,
        handlers={"default": recorder},
        environ={"DRAIN_SAFETY_MARGIN": "8", "DRAIN_GRACE_SECONDS": "4", **env},
    )


def test_the_handler_drains_and_returns_the_summary(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 30)
    recorder = Recorder()
    result = _handler(dsn, recorder)({}, FakeContext(20))
    assert result["exit_reason"] == "drained"
    assert result["exit_code"] == 0
    assert result["done"] == 30
    assert result["invoked_again"] is False
    assert 7.0 < result["budget_seconds"] <= 8.0
    assert statuses(conn) == {"done": 30}
    assert sorted(recorder.ran) == sorted(set(recorder.ran))


def test_the_handler_stops_within_the_derived_budget_and_continues_once(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """20 s left, 8 s margin, 4 s grace: an 8 s budget; 12 s of work takes two invocations."""
    ids = add_jobs(conn, 24, payload={"sleep": 0.5})
    recorder = Recorder()
    kicks: list[tuple[dict[str, Any], Any]] = []
    handler = serverless.lambda_handler(
        dsn=dsn,
        handlers={"default": recorder},
        again=lambda event, context: kicks.append((event, context)),
        environ={"DRAIN_SAFETY_MARGIN": "8", "DRAIN_GRACE_SECONDS": "4"},
    )
    context = FakeContext(20)
    first = handler({"source": "schedule"}, context)

    assert first["exit_reason"] == "budget"
    assert first["budget_seconds"] <= 8.0
    assert first["seconds"] <= first["budget_seconds"] + 4.0
    assert context.get_remaining_time_in_millis() > 4000
    # Nothing is left running: what was not done is queued again (released, or never claimed).
    assert statuses(conn) == {"done": first["done"], "queued": 24 - first["done"]}
    given_back = conn.execute("SELECT max(attempts) FROM jobs WHERE status = 'queued'").fetchone()
    assert given_back == (0,)
    assert first["invoked_again"] is True
    assert [event for event, _ in kicks] == [{"source": "schedule", "drain_again": 1}]
    assert kicks[0][1] is context

    second = handler(kicks[0][0], FakeContext(20))
    assert second["exit_reason"] == "drained"
    assert second["invoked_again"] is False
    assert len(kicks) == 1
    assert statuses(conn) == {"done": 24}
    assert sorted(recorder.ran) == sorted(ids)


def test_a_continued_invocation_does_not_continue_again(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 10, payload={"sleep": 0.5})
    kicks: list[dict[str, Any]] = []
    handler = serverless.lambda_handler(
        dsn=dsn,
        handlers={"default": Recorder()},
        again=lambda event, context: kicks.append(event),
        environ={"DRAIN_MAX_SECONDS": "1", "DRAIN_GRACE_SECONDS": "1"},
    )
    result = handler({"drain_again": 1}, FakeContext(60))
    assert result["exit_reason"] == "budget"
    assert result["budget_seconds"] == 1.0
    assert result["invoked_again"] is False
    assert kicks == []


def test_a_full_queue_cap_does_not_invoke_again(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Other runs hold every place of the cap while jobs wait: exit 3 ``capped``, no kick.

    An invocation started at once would find the same full cap and kick again.
    """
    add_jobs(conn, 3, status="running", attempts=1, lease_left=3600)
    add_jobs(conn, 57)
    kicks: list[dict[str, Any]] = []
    handler = serverless.lambda_handler(
        dsn=dsn,
        handlers={"default": Recorder()},
        again=lambda event, context: kicks.append(event),
        environ={"DRAIN_QUEUE_CAP": "default=3", "DRAIN_MAX_SECONDS": "10"},
    )
    result = handler({}, FakeContext(60))
    assert (result["exit_reason"], result["exit_code"]) == ("capped", 3)
    assert (result["claimed"], result["invoked_again"]) == (0, False)
    assert kicks == []


def test_a_burst_of_kicks_beyond_max_runners_exits_at_once(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 6, payload={"sleep": 0.3})
    recorder = Recorder()
    handler = _handler(dsn, recorder, DRAIN_MAX_RUNNERS="1")
    results: list[dict[str, Any]] = []
    first = threading.Thread(target=lambda: results.append(handler({}, FakeContext(20))))
    first.start()
    try:
        assert recorder.started.wait(10), "the first invocation never started a job"
        busy = handler({}, FakeContext(20))
    finally:
        first.join(30)
    assert busy["exit_reason"] == "runners-busy"
    assert busy["claimed"] == 0
    assert busy["exit_code"] == 0
    assert results[0]["exit_reason"] == "drained"
    assert statuses(conn) == {"done": 6}
    assert len(recorder.ran) == 6


def test_a_run_that_cannot_start_raises_a_clear_error(empty_dsn: str) -> None:
    handler = serverless.lambda_handler(
        dsn=empty_dsn, handlers={"default": Recorder()}, environ={"DRAIN_GRACE_SECONDS": "1"}
    )
    with pytest.raises(DrainError) as raised:
        handler({}, FakeContext(20))
    assert "drain init" in str(raised.value)


def test_an_exec_command_that_cannot_run_fails_the_invocation(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """DRAIN_EXEC with a typo: the platform must count a failed invocation (a
    scheduler would otherwise repeat it for ever), and no attempt is spent."""
    [job_id] = add_jobs(conn, 1, max_attempts=3)
    handler = serverless.lambda_handler(
        dsn=dsn, environ={"DRAIN_EXEC": "no-such-program-here", "DRAIN_GRACE_SECONDS": "1"}
    )
    with pytest.raises(serverless.RunFailed, match="'no-such-program-here' cannot run"):
        handler({}, FakeContext(20))
    row = conn.execute(
        "SELECT status, max_attempts - attempts FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row == ("queued", 3)


# -- the handler source, checked as drain run checks it ------------------------------------


@pytest.mark.parametrize("program", ["   ", ""])
def test_a_blank_drain_exec_is_refused_and_no_job_is_touched(
    dsn: str, conn: psycopg.Connection[Any], program: str
) -> None:
    """An unset template variable: ``/bin/sh -c "   "`` exits 0 and would mark every job done."""
    add_jobs(conn, 5)
    handler = serverless.lambda_handler(
        dsn=dsn, environ={"DRAIN_EXEC": program, "DRAIN_GRACE_SECONDS": "1"}
    )
    with pytest.raises(UsageError) as refused:
        handler({}, FakeContext(20))
    assert str(refused.value) == "DRAIN_EXEC is empty: give the program to run for each job"
    attempts = conn.execute("SELECT status, attempts FROM jobs").fetchall()
    assert attempts == [("queued", 0)] * 5


def test_no_handler_source_names_the_variables() -> None:
    handler = serverless.lambda_handler(environ={"DRAIN_MAX_SECONDS": "5"})
    with pytest.raises(UsageError, match="DRAIN_APP, DRAIN_HANDLER or DRAIN_EXEC"):
        handler({}, FakeContext(20))


def test_a_blank_keyword_program_is_named_as_the_keyword() -> None:
    handler = serverless.lambda_handler(exec_command=" ", environ={"DRAIN_EXEC": "true"})
    with pytest.raises(UsageError, match=r"^exec_command= is empty"):
        handler({}, FakeContext(20))


def test_a_queue_no_handler_serves_is_refused_by_the_entry_point(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 5)
    handler = _handler(dsn, Recorder(), DRAIN_QUEUE="defualt")
    with pytest.raises(UsageError, match=r"--queue 'defualt' \(did you mean 'default'\?\)"):
        handler({}, FakeContext(20))
    with pytest.raises(UsageError, match="the queues with a handler: 'default'"):
        drain.run(dsn, handlers={"default": Recorder()}, queues=["emails"])
    assert conn.execute("SELECT status, attempts FROM jobs").fetchall() == [("queued", 0)] * 5
