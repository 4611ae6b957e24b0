"""``--exec`` programs without a database: environment, pipes, exit statuses, stopping."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from drain.errors import UsageError
from drain.jobs import Job
from drain.programs import (
    CUT,
    LINE_LIMIT,
    ExecFailed,
    ExecHandler,
    ExecNotStarted,
    check_variable_names,
    program_environment,
)


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


@pytest.mark.parametrize("name", ["", "A=B", "A\0"])
def test_a_kept_name_must_name_a_variable(name: str) -> None:
    with pytest.raises(UsageError, match="--exec-keep-env"):
        check_variable_names([name])


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
