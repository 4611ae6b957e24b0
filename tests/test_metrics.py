"""The run's metrics as Prometheus reads them: a node_exporter textfile and a real Pushgateway.

Every value is read back with ``prometheus_client``'s own text parser and held
to what the run itself reported (its ``--json`` summary) and to what the
database holds afterwards. The Pushgateway is Debian's ``prometheus-pushgateway``
(``.ci/run`` installs it), started on a loopback port for each test that needs it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import REPO, add_jobs, drain_cli, programs, summary_of

# Succeeds for a payload with "ok" in it, fails (exit 1) for any other.
EXEC = ("--exec", "grep -q ok")
TABLE = "public.jobs"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


# prometheus_client's own text parser, run in a process of its own: this test
# process must not import prometheus_client (tests/test_observers.py checks that a
# plain run never does, in this same process).
PARSER = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
print(json.dumps([
    [sample.name, sample.labels, sample.value]
    for family in text_string_to_metric_families(sys.stdin.read())
    for sample in family.samples
]))
"""


def samples(text: str, **match: str) -> Samples:
    """Every sample whose labels include ``match``, by name and its other labels."""
    parsed = subprocess.run(
        [sys.executable, "-c", PARSER], input=text, capture_output=True, text=True, check=True
    )
    found: Samples = {}
    for name, labels, number in json.loads(parsed.stdout):
        if any(labels.pop(key, None) != value for key, value in match.items()):
            continue
        found[(name, tuple(sorted(labels.items())))] = float(number)
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def names(found: Samples) -> set[str]:
    return {name for name, _ in found}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def add_mixed_jobs(conn: psycopg.Connection[Any]) -> None:
    """Queue a: 3 done, 2 failing with attempts left (retried); queue b: 1 done, 1
    failing on its last attempt (failed for good); 2 in a not ready yet (untouched)."""
    add_jobs(conn, 3, queue="a", payload={"ok": 1})
    add_jobs(conn, 2, queue="a", payload={"no": 1})
    add_jobs(conn, 1, queue="b", payload={"ok": 1})
    add_jobs(conn, 1, queue="b", payload={"no": 1}, max_attempts=1)
    add_jobs(conn, 2, queue="a", payload={"ok": 1}, run_in=3600)


def check_run(found: Samples, summary: dict[str, Any], exit_code: int) -> None:
    """The run-wide metrics say what the run's own summary said."""
    start = value(found, "drain_last_run_start_timestamp_seconds")
    end = value(found, "drain_last_run_end_timestamp_seconds")
    assert start <= end
    assert value(found, "drain_last_run_duration_seconds") == pytest.approx(end - start)
    assert value(found, "drain_last_run_exit_code") == exit_code
    assert value(found, "drain_schema_version") == 1
    for word in ("claimed", "lost", "released"):
        assert value(found, f"drain_jobs_{word}_total") == summary[word], word


def check_per_queue(found: Samples) -> None:
    expected = {"a": (3, 2, 0, 0), "b": (1, 0, 1, 0)}
    for queue, counts in expected.items():
        for word, count in zip(("done", "retried", "failed", "snoozed"), counts, strict=True):
            assert value(found, f"drain_jobs_{word}_total", queue=queue) == count, (queue, word)
        assert value(found, "drain_queue_ready_jobs", queue=queue) == 0
        assert value(found, "drain_queue_oldest_ready_age_seconds", queue=queue) == 0


def test_the_textfile_holds_the_run_and_a_failed_run_keeps_the_last_success(
    conn: psycopg.Connection[Any], dsn: str, tmp_path: Path
) -> None:
    add_mixed_jobs(conn)
    path = tmp_path / "drain.prom"

    result = drain_cli(
        "run", *EXEC, "--queue", "a,b", "--metrics-textfile", str(path), "--json", dsn=dsn
    )
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert (summary["claimed"], summary["done"], summary["retried"]) == (7, 4, 2)
    found = samples(path.read_text(), table=TABLE)
    check_run(found, summary, 0)
    check_per_queue(found)
    success = value(found, "drain_last_success_timestamp_seconds")
    assert success == value(found, "drain_last_run_end_timestamp_seconds")
    assert [p.name for p in tmp_path.iterdir()] == ["drain.prom"]  # no temporary file left

    conn.execute("DROP TABLE jobs CASCADE")
    failed = drain_cli("run", *EXEC, "--queue", "a,b", "--metrics-textfile", str(path), dsn=dsn)
    assert failed.returncode == 1, failed.stderr
    after = samples(path.read_text(), table=TABLE)
    assert value(after, "drain_last_run_exit_code") == 1
    assert value(after, "drain_last_run_start_timestamp_seconds") > success
    # the last success is the first run's, read back from the file it wrote
    assert value(after, "drain_last_success_timestamp_seconds") == success
    # the backlog was never read: no made-up zeros
    assert not names(after) & {"drain_queue_ready_jobs", "drain_queue_oldest_ready_age_seconds"}


def test_a_run_stopped_by_its_budget_is_a_success_and_reports_what_is_left(
    conn: psycopg.Connection[Any], dsn: str, tmp_path: Path
) -> None:
    add_jobs(conn, 200, payload={"ok": 1}, run_in=-60)
    path = tmp_path / "drain.prom"
    result = drain_cli(
        "run", "--exec", "sleep 0.1", "--max-seconds", "1", "--grace-seconds", "1",
        "--metrics-textfile", str(path), "--json", dsn=dsn,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    summary = summary_of(result)
    found = samples(path.read_text(), table=TABLE)
    check_run(found, summary, 3)
    assert value(found, "drain_last_success_timestamp_seconds") == value(
        found, "drain_last_run_end_timestamp_seconds"
    )
    assert value(found, "drain_jobs_done_total", queue="default") == summary["done"]
    ready = conn.execute(
        "SELECT count(*) FROM jobs WHERE status = 'queued' AND run_at <= now()"
    ).fetchone()
    assert ready is not None and ready[0] == 200 - summary["done"] > 0
    assert value(found, "drain_queue_ready_jobs", queue="default") == ready[0]
    # every job left was ready since a minute before the run started
    assert value(found, "drain_queue_oldest_ready_age_seconds", queue="default") >= 60


class Gateway:
    """A real Pushgateway on a loopback port."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text: str = response.read().decode()
            return text


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    binary = programs.need("prometheus-pushgateway", package="prometheus-pushgateway")
    port = free_port()
    log = tmp_path / "pushgateway.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                binary,
                f"--web.listen-address=127.0.0.1:{port}",
                f"--persistence.file={tmp_path / 'pushgateway.data'}",
                "--log.level=warn",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    gateway = Gateway(port)
    try:
        for _ in range(200):
            if process.poll() is not None:
                pytest.fail(f"the Pushgateway exited: {log.read_text()!r}")
            try:
                with urllib.request.urlopen(f"{gateway.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("the Pushgateway did not become ready")
        yield gateway
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_pushgateway_receives_the_run_grouped_by_job_and_table(
    conn: psycopg.Connection[Any], dsn: str, gateway: Gateway
) -> None:
    add_mixed_jobs(conn)
    result = drain_cli(
        "run", *EXEC, "--queue", "a,b", "--pushgateway", gateway.url, "--json", dsn=dsn
    )
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)

    # grouped by job and table; the gateway's own empty instance, none from drain
    found = samples(gateway.metrics(), job="drain", table=TABLE, instance="")
    check_run(found, summary, 0)
    check_per_queue(found)
    success = value(found, "drain_last_success_timestamp_seconds")
    assert success == value(found, "drain_last_run_end_timestamp_seconds")
    pushed = value(found, "push_time_seconds")

    conn.execute("DROP TABLE jobs CASCADE")
    failed = drain_cli("run", *EXEC, "--queue", "a,b", "--pushgateway", gateway.url, dsn=dsn)
    assert failed.returncode == 1, failed.stderr
    after = samples(gateway.metrics(), job="drain", table=TABLE, instance="")
    assert value(after, "push_time_seconds") > pushed
    assert value(after, "drain_last_run_exit_code") == 1
    # the failed run left the last success out of its push: the gateway kept it
    assert value(after, "drain_last_success_timestamp_seconds") == success


def test_a_gateway_that_is_down_is_one_warning_and_the_run_still_exits_0(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    ids = add_jobs(conn, 3, payload={"ok": 1})
    closed = f"http://127.0.0.1:{free_port()}"
    result = drain_cli("run", *EXEC, "--pushgateway", closed, "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == len(ids)
    warnings = [line for line in result.stderr.splitlines() if "Pushgateway" in line]
    assert len(warnings) == 1, result.stderr
    assert closed in warnings[0] and "Connection refused" in warnings[0]
    assert "Traceback" not in result.stderr


GATEWAY_TOKEN = "PGWKEY7781zq"


@pytest.mark.parametrize("given", ["--pushgateway", "DRAIN_PUSHGATEWAY"])
def test_a_token_in_the_gateways_path_is_never_shown(
    conn: psycopg.Connection[Any], dsn: str, gateway: Gateway, given: str
) -> None:
    """A real Pushgateway refuses a push under a path it does not serve (404): the
    warning names the gateway with the token masked, as every other line does."""
    add_jobs(conn, 2, payload={"ok": 1})
    url = f"{gateway.url}/push/{GATEWAY_TOKEN}"
    option = ("--pushgateway", url) if given == "--pushgateway" else ()
    env = {"DRAIN_PUSHGATEWAY": url} if given == "DRAIN_PUSHGATEWAY" else {}
    result = drain_cli("run", *EXEC, *option, "--verbose", "--json", dsn=dsn, env=env)

    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "Pushgateway" in line]
    assert len(warnings) == 1, result.stderr
    assert f"at {gateway.url}/push/******** (HTTPError: HTTP Error 404" in warnings[0]
    assert GATEWAY_TOKEN not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--metrics-textfile", "/no/such/directory/drain.prom", "does not exist"),
        ("--metrics-textfile", "{tmp}/drain.txt", "must end in .prom"),
        ("--metrics-textfile", "{tmp}", "must end in .prom"),
        ("--metrics-textfile", "", "--metrics-textfile is empty"),
        ("--pushgateway", "", "--pushgateway is empty"),
        ("--pushgateway", "http://", "must be an http(s) URL"),
        ("--pushgateway", "ftp://gateway:9091", "must be an http(s) URL"),
        ("--pushgateway", "http://gateway:port", "must be an http(s) URL"),
    ],
)
def test_options_that_cannot_work_are_refused_before_the_run_connects(
    option: str, value: str, says: str, tmp_path: Path
) -> None:
    # Nothing listens on this database address: a run that tried to connect would
    # fail with exit 1; exit 2 says it was refused before it connected.
    unreachable = f"postgresql://drain@127.0.0.1:{free_port()}/nothing"
    result = drain_cli(
        "run", "--exec", "true", option, value.format(tmp=tmp_path), "--connect-retry", "0",
        dsn=unreachable,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr


def test_without_prometheus_client_the_option_says_what_to_install(tmp_path: Path) -> None:
    # sys.modules[name] = None is Python's own way to make an import fail.
    program = (
        "import sys; sys.modules['prometheus_client'] = None; "
        "sys.argv[0] = 'drain'; from drain.cli import main; main()"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    environment["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [
            sys.executable, "-c", program, "run", "--exec", "true",
            "--dsn", "postgresql://drain@127.0.0.1:1/nothing",
            "--metrics-textfile", str(tmp_path / "drain.prom"),
        ],
        capture_output=True, text=True, env=environment, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "drain: error: --metrics-textfile needs prometheus-client: pip install 'pg-drain[metrics]'"
    )


def test_a_textfile_that_cannot_be_written_at_the_end_is_one_warning(
    conn: psycopg.Connection[Any], dsn: str, tmp_path: Path
) -> None:
    directory = tmp_path / "textfile"
    directory.mkdir()
    add_jobs(conn, 1)
    # the job removes the directory: it was there when the run started, gone at its end
    result = drain_cli(
        "run", "--exec", f"rm -r {directory}", "--metrics-textfile", str(directory / "drain.prom"),
        "--json", dsn=dsn,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 1
    warnings = [line for line in result.stderr.splitlines() if "metrics" in line]
    assert len(warnings) == 1 and "could not write the run's metrics" in warnings[0], result.stderr
    assert not directory.exists()
