"""``--exec`` programs without a database: environment, pipes, exit statuses, stopping."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from drain.core.errors import UsageError
from drain.core.jobs import Job
from drain.runner.exec_handler import ExecCannotRun, ExecFailed, ExecHandler, ExecNotStarted
from drain.runner.program_env import check_variable_names, program_environment
from drain.runner.program_output import CUT, LINE_LIMIT
from drain.runner.supervision import Supervision, deadlines


def a_job(payload: Any = None, job_id: int = 7) -> Job:
    now = datetime.now(UTC)
    return Job(
        id=job_id,
        queue="default",
        payload=payload if payload is not None else {"n": 1},
        attempt=1,
        max_attempts=5,
        created_at=now,
        run_at=now,
    )


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_the_environment_loses_credentials_but_what_is_kept() -> None:
    environ = {
        "PATH": "/bin",
        "PGHOST": "db",
        "DRAIN_DSN": "host=db",
        "DATABASE_URL": "postgresql://u@db/app",
        "PGPASSWORD": "pw",
        "PGPASSFILE": "/etc/drain/pgpass",
        "APP_URL": "postgresql://app:s3cret-pw@db/app",
        "SHORT": "xy",
    }
    env = program_environment(environ, secrets=["s3cret-pw", "xy"])
    assert env == {"PATH": "/bin", "PGHOST": "db", "SHORT": "xy"}
    kept = program_environment(environ, keep={"PGPASSWORD", "APP_URL"}, secrets=["s3cret-pw"])
    assert kept.keys() == {"PATH", "PGHOST", "PGPASSWORD", "APP_URL", "SHORT"}


def test_the_environment_loses_drains_observability_tokens_too() -> None:
    environ = {
        "PATH": "/bin",
        "SENTRY_DSN": "https://0f1e2d3c4b5a69788796a5b4c3d2e1f0@o1.ingest.sentry.io/42",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20sk-live-5521",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces?api_key=K7",
        "DRAIN_PUSHGATEWAY": "http://gateway:9091",
        "MY_COPY": "key 0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "OTEL_SERVICE_NAME": "mailer",
    }
    assert program_environment(environ) == {"PATH": "/bin", "OTEL_SERVICE_NAME": "mailer"}
    kept = program_environment(environ, keep={"SENTRY_DSN"})
    assert kept.keys() == {"PATH", "OTEL_SERVICE_NAME", "SENTRY_DSN"}


@pytest.mark.parametrize("name", ["", " ", "A=B", "A\0", "1X", "A-B", "ÉTÉ", "A B"])
def test_a_kept_name_must_name_a_variable(name: str) -> None:
    with pytest.raises(UsageError, match="--exec-keep-env"):
        check_variable_names([name])


def test_a_variable_name_is_kept_as_given() -> None:
    assert check_variable_names(["PGPASSWORD", "_x1", "App_Url"]) == (
        "PGPASSWORD",
        "_x1",
        "App_Url",
    )


def test_a_large_payload_reaches_a_program_that_reads_it(tmp_path: Path) -> None:
    out = tmp_path / "size"
    payload = {"blob": "x" * 3_000_000}
    ExecHandler(f"wc -c > {out}")(a_job(payload))
    assert int(out.read_text()) == len('{"blob":""}') + 3_000_000


def test_a_program_that_never_reads_its_payload_is_not_waited_for() -> None:
    started = time.monotonic()
    ExecHandler("exit 0")(a_job({"blob": "x" * 3_000_000}))
    assert time.monotonic() - started < 5


def test_exit_statuses_and_signals_fail_the_job_with_the_tail() -> None:
    with pytest.raises(ExecFailed, match=r"^exit status 4: nope$"):
        ExecHandler("cat >/dev/null; echo nope >&2; exit 4")(a_job())
    with pytest.raises(ExecFailed, match=r"^killed by signal 9 \(SIGKILL\)$"):
        ExecHandler("cat >/dev/null; kill -9 $$")(a_job())


def test_stdout_lines_are_echoed_redacted_and_cut(capsys: pytest.CaptureFixture[str]) -> None:
    handler = ExecHandler(
        f"echo 'dsn postgresql://u:hunter22@db/app'; head -c {LINE_LIMIT * 3} /dev/zero | tr '\\0' a",
        dsn="postgresql://u:hunter22@db/app",
    )
    handler(a_job())
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "dsn postgresql://u:********@db/app"
    assert lines[1] == "a" * LINE_LIMIT + CUT


def test_terminate_all_stops_a_running_group_and_starts_no_more(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    handler = ExecHandler(f"cat >/dev/null; sleep 60 & echo $! > {pid_file}; wait", kill_delay=0.5)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            handler(a_job())
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the program did not start"
        time.sleep(0.02)
    sleeper = int(pid_file.read_text())
    assert handler.terminate_all() == set()
    thread.join(10)
    assert not thread.is_alive()
    assert not _running(sleeper)
    assert isinstance(failures[0], ExecFailed) and "SIGTERM" in str(failures[0])
    with pytest.raises(ExecNotStarted):
        handler(a_job())


def test_a_command_that_cannot_run_is_told_apart_until_one_program_succeeds() -> None:
    with pytest.raises(ExecCannotRun, match=r"^exit status 127: .*no-such-program-x.*not found"):
        ExecHandler("no-such-program-x")(a_job())
    flaky = ExecHandler('cat >/dev/null; [ "$DRAIN_JOB_ID" = 2 ] && exit 127; exit 0')
    with pytest.raises(ExecCannotRun):
        flaky(a_job(job_id=2))
    flaky(a_job(job_id=1))
    with pytest.raises(ExecFailed) as later:
        flaky(a_job(job_id=2))
    assert not isinstance(later.value, ExecCannotRun)


@pytest.mark.parametrize(
    ("lease", "expected"),
    [(300.0, (297.5, 299.5)), (3.0, (2.0, 2.75)), (1.0, (2 / 3, 11 / 12))],
)
def test_a_program_is_stopped_before_its_lease_can_run_out(
    lease: float, expected: tuple[float, float]
) -> None:
    """SIGTERM the kill delay (at most a quarter of the lease) before SIGKILL, and SIGKILL
    half a second (at most a twelfth) before the lease counted from when it was sent;
    never before two thirds of a lease, when the next renewal is long overdue."""
    term_at, kill_at = deadlines(100.0, lease, 2.0)
    assert (term_at - 100, kill_at - 100) == pytest.approx(expected)
    assert term_at - 100 >= lease * 2 / 3 - 1e-9


def _run_in_thread(handler: ExecHandler, job: Job) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def work() -> None:
        try:
            handler(job)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    return thread, failures


def test_the_supervisor_stops_a_program_whose_lease_was_not_renewed(tmp_path: Path) -> None:
    """Nothing renews: the supervisor stops the group at its deadline, and the
    attempt's error says why."""
    leased_at = time.monotonic()
    supervision = Supervision(1.2, lambda job_id: leased_at, time.monotonic, kill_delay=0.5)
    handler = ExecHandler("cat >/dev/null; sleep 30")
    handler.watch = supervision
    try:
        with pytest.raises(ExecFailed) as failed:
            handler(a_job())
    finally:
        supervision.close()
    waited = time.monotonic() - leased_at
    assert failed.value.stopped == "deadline"
    assert "stopped by drain (its lease could not be renewed in time)" in str(failed.value)
    assert waited < 1.2, f"the program ran {waited:.2f}s on a 1.2 s lease"


def test_renewals_move_the_deadline_and_a_stop_comes_at_once() -> None:
    clock = time.monotonic
    supervision = Supervision(1.2, lambda job_id: clock(), clock, kill_delay=0.5)
    handler = ExecHandler("cat >/dev/null; sleep 30")
    handler.watch = supervision
    job = a_job()
    thread, failures = _run_in_thread(handler, job)
    try:
        started = clock()
        while clock() - started < 2.0:  # past a 1.2 s lease, renewed every 0.3 s
            supervision.renewed([job], clock())
            time.sleep(0.3)
        assert thread.is_alive(), failures
        supervision.stop([job], "cancel")
        thread.join(5)
    finally:
        handler.terminate_all()
        supervision.close()
    assert not thread.is_alive()
    assert isinstance(failures[0], ExecFailed) and failures[0].stopped == "cancel"


def test_a_supervisor_whose_drain_is_gone_stops_every_program(tmp_path: Path) -> None:
    """drain's end of the pipe closes (drain killed): every group is stopped at once,
    and the supervisor leaves as soon as they have."""
    far = time.monotonic() + 3600
    supervision = Supervision(3600.0, lambda job_id: far, time.monotonic, kill_delay=0.5)
    handlers = [ExecHandler("cat >/dev/null; sleep 30") for _ in range(2)]
    threads = []
    for number, handler in enumerate(handlers):
        handler.watch = supervision
        threads.append(_run_in_thread(handler, a_job(job_id=number + 1)))
    deadline = time.monotonic() + 10
    while len(supervision._watched) < 2:
        assert time.monotonic() < deadline, "the programs did not start"
        time.sleep(0.02)
    process = supervision._process
    assert process is not None
    closed = time.monotonic()
    supervision.close()
    for thread, failures in threads:
        thread.join(5)
        assert not thread.is_alive()
        assert "SIGTERM" in str(failures[0])
    assert process.returncode == 0
    assert time.monotonic() - closed < 2.0


def test_a_supervisor_that_died_is_started_again_with_every_deadline() -> None:
    leased_at = time.monotonic()
    supervision = Supervision(1.2, lambda job_id: leased_at, time.monotonic, kill_delay=0.5)
    handler = ExecHandler("cat >/dev/null; sleep 30")
    handler.watch = supervision
    thread, failures = _run_in_thread(handler, a_job())
    try:
        deadline = time.monotonic() + 10
        while supervision._process is None:
            assert time.monotonic() < deadline, "the program did not start"
            time.sleep(0.02)
        first = supervision._process
        first.kill()
        first.wait()
        supervision.renewed([a_job()], leased_at)  # the next write finds it gone
        thread.join(10)
    finally:
        handler.terminate_all()
        supervision.close()
    assert not thread.is_alive()
    assert isinstance(failures[0], ExecFailed) and failures[0].stopped == "deadline"
