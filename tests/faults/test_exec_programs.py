"""Exec programs: ``--exec`` programs owned as process groups, with bounded output and
an environment without drain's credentials (issue 12, items 2 and 9).

Each program is a real ``/bin/sh -c`` started by a real ``drain run``. Programs
leave their traces in files under the test's directory (their pids, a heartbeat
every 0.1 s), so the test can tell whether anything a program started outlived
its run, and whether two executions of one job ever ran at the same time.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from tests.faults.conftest import Figures
from tests.faults.support.processes import Run, Runs, wait_until
from tests.support import add_jobs, job

pytestmark = pytest.mark.faults

SCENARIO = "exec programs"
EXIT_WORK_LEFT = 3
MASK = "********"


def exec_run(command: str) -> tuple[str, ...]:
    return ("run", "--exec", command, "--json")


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie has stopped running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def pids(directory: Path, pattern: str) -> list[int]:
    """The pids programs wrote to files matching ``pattern`` (a file still empty is skipped)."""
    found = (path.read_text().split() for path in sorted(directory.glob(pattern)))
    return [int(words[0]) for words in found if words]


@pytest.fixture
def traces(tmp_path: Path) -> Iterator[Path]:
    """Where programs write their traces; whatever they left running is killed at the end."""
    directory = tmp_path / "traces"
    directory.mkdir()
    try:
        yield directory
    finally:
        for pid in pids(directory, "pid.*"):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


class SessionRun(Run):
    """A run that leads a session of its own, so the test can signal its whole process
    group as a terminal's Ctrl-C, ``timeout`` or systemd's default ``KillMode`` do,
    without signalling the test itself."""

    def __init__(self, args: tuple[str, ...], *, dsn: str, directory: Path) -> None:
        super().__init__(args, dsn=dsn, ledger_dsn=dsn, directory=directory, new_session=True)


def heartbeat_script(traces: Path) -> Path:
    """A program that beats every 0.1 s: for 10 s on the job's first attempt, 1 s after."""
    script = traces / "work.sh"
    script.write_text(
        f"""\
trace={shlex.quote(str(traces))}
echo $$ > "$trace/pid.$DRAIN_JOB_ATTEMPT"
beats=10
[ "$DRAIN_JOB_ATTEMPT" = 1 ] && beats=100
i=0
while [ $i -lt $beats ]; do
    date +%s.%N >> "$trace/beats.$DRAIN_JOB_ATTEMPT"
    sleep 0.1
    i=$((i + 1))
done
"""
    )
    return script


def beats(traces: Path, attempt: int) -> list[float]:
    path = traces / f"beats.{attempt}"
    return [float(line) for line in path.read_text().split()] if path.exists() else []


def test_a_program_that_outlives_the_budget_is_stopped_with_everything_it_started(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, traces: Path, figures: Figures
) -> None:
    """`cat; sh work.sh`: work.sh is /bin/sh's child; stopping /bin/sh alone left it
    beating while the next run reaped the job and ran it again."""
    [job_id] = add_jobs(conn, 1)
    command = f"cat >/dev/null; sh {shlex.quote(str(heartbeat_script(traces)))}; echo over >&2"
    first = runs.run(
        "--max-seconds", "3", "--grace-seconds", "1", dsn=dsn, command=exec_run(command)
    )
    [grandchild] = pids(traces, "pid.1")
    left_running = alive(grandchild)
    second = runs.run(dsn=dsn, command=exec_run(command))
    # Let a survivor of the first run (the bug) beat on past the second, then stop it.
    if left_running:
        wait_until(lambda: not alive(grandchild), timeout=20, what="the first execution to end")
    first_beats, second_beats = beats(traces, 1), beats(traces, 2)
    overlap = max(
        0.0, min(first_beats[-1], second_beats[-1]) - max(first_beats[0], second_beats[0])
    )
    overlapping = sum(1 for beat in first_beats if beat >= second_beats[0])

    assert overlap == 0.0, f"two executions ran at once for {overlap:.1f}s"
    assert not left_running, "the program's child outlived its run"
    assert first.process.returncode == EXIT_WORK_LEFT, first.stderr
    first_summary = first.summary()
    assert first_summary["abandoned"] == 1, first_summary
    assert second.process.returncode == 0, second.stderr
    assert second.summary()["reaped"] == 1
    assert (job(conn, job_id)["status"], job(conn, job_id)["attempts"]) == ("done", 2)
    figures(
        SCENARIO,
        variant="grandchild past the budget",
        overlapping_executions=1 if overlapping else 0,
        overlap_s=round(overlap, 1),
        left_running=int(left_running),
    )


def test_a_program_that_ignores_sigterm_is_killed_after_the_kill_delay(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, traces: Path, figures: Figures
) -> None:
    add_jobs(conn, 1)
    command = (
        f"cat >/dev/null; trap '' TERM; sleep 60 & echo $! > {traces}/pid.sleep; "
        f"echo $$ > {traces}/pid.sh; wait; wait"
    )
    run = runs.run("--max-seconds", "2", "--grace-seconds", "1", dsn=dsn, command=exec_run(command))

    assert run.process.returncode == EXIT_WORK_LEFT, run.stderr
    assert run.seconds < 20, f"the run took {run.seconds:.1f}s to stop one program"
    assert run.summary()["abandoned"] == 1
    still = [pid for pid in pids(traces, "pid.*") if alive(pid)]
    assert not still, f"processes {still} of the program outlived the run"
    figures(SCENARIO, variant="ignores SIGTERM, 1 s grace", left_running=len(still))


def test_sigterm_to_the_whole_process_group_gives_programs_the_grace(
    dsn: str,
    conn: psycopg.Connection[Any],
    runs: Runs,
    traces: Path,
    tmp_path: Path,
    figures: Figures,
) -> None:
    """Ctrl-C, `timeout` and systemd signal the run's whole process group: the programs,
    in groups of their own, must not get it; drain stops in order and lets them finish."""
    ids = add_jobs(conn, 2)
    command = (
        f"cat >/dev/null; echo $$ > {traces}/pid.$DRAIN_JOB_ID; sleep 2; "
        f"echo finished > {traces}/finished.$DRAIN_JOB_ID"
    )
    run = SessionRun(
        (*exec_run(command), "--concurrency", "2", "--grace-seconds", "30"),
        dsn=dsn,
        directory=tmp_path,
    )
    runs.started.append(run)
    wait_until(lambda: len(pids(traces, "pid.*")) == 2, timeout=30, what="both programs to start")
    os.killpg(run.pid, signal.SIGTERM)
    code = run.wait(timeout=60)

    summary = run.summary()
    rows = [job(conn, job_id) for job_id in ids]
    failed_attempts = sum(1 for row in rows if row["last_error"] is not None)
    assert failed_attempts == 0, [row["last_error"] for row in rows]
    assert (summary["done"], summary["retried"], summary["failed"]) == (2, 0, 0), summary
    assert [row["status"] for row in rows] == ["done", "done"]
    assert len(list(traces.glob("finished.*"))) == 2
    assert summary["exit_reason"] == "signal" and code == EXIT_WORK_LEFT, run.stderr
    figures(SCENARIO, variant="SIGTERM to drain's process group", failed_attempts=failed_attempts)


def test_a_program_that_leaves_a_background_process_completes_at_once(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, traces: Path, figures: Figures
) -> None:
    """`sleep 30 & exit 0`: the program's outcome is its exit status; the leftover,
    holding stderr open, is stopped with its group, not waited for."""
    [job_id] = add_jobs(conn, 1)
    command = f"cat >/dev/null; sleep 30 & echo $! > {traces}/pid.sleep; exit 0"
    run = runs.run("--max-seconds", "60", dsn=dsn, timeout=20, command=exec_run(command))

    assert run.process.returncode == 0, run.stderr
    assert run.seconds < 12, f"the run took {run.seconds:.1f}s for one program that exits at once"
    assert run.summary()["done"] == 1
    assert job(conn, job_id)["status"] == "done"
    [leftover] = pids(traces, "pid.sleep")
    assert not alive(leftover), "the background process outlived the run"
    figures(SCENARIO, variant="sleep 30 & exit 0", run_s=round(run.seconds, 1))


def _peak_rss_mb(run: Run) -> float:
    """The run's own peak resident memory, from its rusage as it is reaped."""
    _, status, usage = os.wait4(run.pid, 0)
    run.process.returncode = os.waitstatus_to_exitcode(status)
    run.poll()
    return usage.ru_maxrss / 1024  # kB on Linux


def test_output_is_read_into_a_bounded_tail(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """A program writing 100 MB to stderr: drain's memory stays flat, the error keeps
    the last of it."""
    volume = 100_000_000
    [quiet] = add_jobs(conn, 1, max_attempts=1)
    baseline = _peak_rss_mb(runs.start(dsn=dsn, command=exec_run("cat >/dev/null")))
    assert job(conn, quiet)["status"] == "done"

    [loud] = add_jobs(conn, 1, max_attempts=1)
    command = (
        "cat >/dev/null; yes 'a line of output, again and again' | "
        f"head -c {volume} >&2; echo 'the last line' >&2; exit 1"
    )
    run = runs.start(dsn=dsn, command=exec_run(command))
    peak = _peak_rss_mb(run)
    grown = peak - baseline

    assert run.process.returncode == 0, run.stderr
    assert run.summary()["failed"] == 1
    error = job(conn, loud)["last_error"]
    assert error.startswith("ExecFailed: exit status 1: ") and error.endswith("the last line")
    assert len(error) <= 2000
    assert grown < 40, f"drain grew {grown:.0f} MB reading {volume // 1_000_000} MB of stderr"
    figures(
        SCENARIO,
        variant=f"{volume // 1_000_000} MB on stderr",
        peak_rss_mb=round(peak),
        baseline_rss_mb=round(baseline),
    )


SECRET = "exec-env-Pw-7781q"
OTHER_SECRET = "pgpassword-Zt-5520"
CREDENTIALS = ("DRAIN_DSN", "DATABASE_URL", "PGPASSWORD", "APP_DB_URL")


def _variables(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_programs_get_no_credentials_unless_kept_and_their_output_is_redacted(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, traces: Path, figures: Figures
) -> None:
    """The run's DSN carries a password (the server trusts the login, so it is not
    checked), PGPASSWORD holds another, and APP_DB_URL quotes the first."""
    dsn = conninfo.make_conninfo(dsn, password=SECRET)
    env = {
        "DATABASE_URL": dsn,
        "PGPASSFILE": str(traces / "pgpass"),
        "PGPASSWORD": OTHER_SECRET,
        "APP_DB_URL": f"postgresql://app:{SECRET}@db.example.com/app",
    }
    command = (
        f"cat >/dev/null; env > {traces}/env.$DRAIN_JOB_ID; env; "
        'echo "dsn=$DRAIN_DSN pw=$PGPASSWORD" >&2; exit 1'
    )
    passes: list[tuple[tuple[str, ...], dict[str, str], tuple[str, ...]]] = [
        ((), {}, ()),
        (
            ("--exec-keep-env", "DRAIN_DSN", "--exec-keep-env", "DATABASE_URL,PGPASSWORD"),
            {},
            ("DRAIN_DSN", "DATABASE_URL", "PGPASSWORD"),
        ),
        ((), {"DRAIN_EXEC_KEEP_ENV": "PGPASSWORD, APP_DB_URL"}, ("PGPASSWORD", "APP_DB_URL")),
    ]
    outputs: list[str] = []
    kept: dict[int, tuple[str, ...]] = {}
    for options, extra, names in passes:
        [job_id] = add_jobs(conn, 1, max_attempts=1)  # one job per pass: its run takes it
        kept[job_id] = names
        run = runs.run(*options, dsn=dsn, env={**env, **extra}, command=exec_run(command))
        assert run.process.returncode == 0, run.stderr
        assert run.summary()["failed"] == 1
        outputs += [run.stdout, run.stderr]

    for job_id, names in kept.items():
        seen = _variables(traces / f"env.{job_id}")
        assert seen["DRAIN_JOB_ID"] == str(job_id)
        assert sorted(name for name in CREDENTIALS if name in seen) == sorted(names), job_id
        assert "PGPASSFILE" not in seen
    bare = next(iter(kept))
    bare_env = (traces / f"env.{bare}").read_text()
    assert SECRET not in bare_env and OTHER_SECRET not in bare_env
    errors = [job(conn, job_id)["last_error"] for job_id in kept]
    hits = [text for text in outputs + errors if SECRET in text or OTHER_SECRET in text]
    assert not hits, "a password reached drain's output or last_error"
    assert MASK in errors[1], errors[1]
    figures(SCENARIO, variant="credentials in the environment", secret_hits=len(hits))


EXIT_USAGE = 2


@pytest.mark.parametrize(
    ("command", "status"),
    [("no-such-program --flag", 127), ("/", 126)],
    ids=["not found", "not executable"],
)
def test_a_command_that_cannot_run_stops_the_run_with_exit_2_and_spends_no_attempt(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, figures: Figures, command: str, status: int
) -> None:
    """A typo in --exec used to fail every job (`exit status 127`) and burn its
    attempts over hours while every run exited 0."""
    ids = add_jobs(conn, 4, max_attempts=3)
    run = runs.run("--concurrency", "2", dsn=dsn, timeout=60, command=exec_run(command))

    assert run.process.returncode == EXIT_USAGE, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("drain: error: "), run.stderr
    assert f"--exec {command!r} cannot run (exit status {status}" in lines[0]
    assert run.seconds < 20, f"the run took {run.seconds:.1f}s to stop"
    assert run.summary()["exit_reason"] == "usage"
    rows = [job(conn, job_id) for job_id in ids]
    assert {row["status"] for row in rows} == {"queued"}, rows
    assert all(row["last_error"] is None for row in rows), rows
    # the attempt a claim took is given back (release.sql raises max_attempts)
    assert all(row["max_attempts"] - row["attempts"] == 3 for row in rows), rows
    figures(
        SCENARIO,
        variant=f"--exec that cannot run ({status})",
        exit_code=run.process.returncode,
        attempts_spent=sum(3 - (row["max_attempts"] - row["attempts"]) for row in rows),
    )


def test_exit_127_after_a_success_is_an_ordinary_failure(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs
) -> None:
    """Once a program of the command has succeeded, the command can run: a later 127
    (a tool the program calls for some payloads only) fails that job alone."""
    first, second, third = add_jobs(conn, 3)
    command = f'cat >/dev/null; [ "$DRAIN_JOB_ID" = {second} ] && exit 127; exit 0'
    run = runs.run(dsn=dsn, timeout=60, command=exec_run(command))

    assert run.process.returncode == 0, run.stderr
    summary = run.summary()
    assert (summary["done"], summary["retried"]) == (2, 1), summary
    assert job(conn, first)["status"] == job(conn, third)["status"] == "done"
    row = job(conn, second)
    assert (row["status"], row["attempts"]) == ("queued", 1)
    assert row["last_error"] == "ExecFailed: exit status 127"
