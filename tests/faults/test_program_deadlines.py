"""An ``--exec`` program never runs beside its job's next attempt (issue 23, item 1).

Run A's program works 15 s under a short lease while A is cut off from the
server (a proxy that forwards nothing for 8 s), frozen (SIGSTOP to its pid) or
killed (SIGKILL to its pid, what the OOM killer does). Once A's leases have run
out on the server, run B reaps the jobs and runs them again. Before the
supervisor, A's programs, in sessions of their own, went on working beside B's
(overlaps of 4 to 6 s); now the run's supervisor stops each program before its
lease can run out, whatever became of drain.

Each program writes a heartbeat every 0.1 s to a file of its attempt: the
first and last beats are when the execution really ran, whoever ended it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.faults.conftest import Figures
from tests.faults.support.processes import Run, Runs, wait_until
from tests.support import add_jobs, job
from tests.support.pgproxy import proxied

pytestmark = pytest.mark.faults

SCENARIO = "program deadlines"
FIRST_SECONDS = 15  # the first attempt's program works this long, if nothing stops it
LATER_SECONDS = 3  # later attempts: long enough that a survivor of A overlaps them
HOLD = 8.0  # how long the proxy forwards nothing


@dataclass(frozen=True)
class Execution:
    job_id: int
    attempt: int
    started: float  # wall clock: the first heartbeat
    ended: float  # the last heartbeat


@pytest.fixture
def traces(tmp_path: Path) -> Iterator[Path]:
    """Where programs write their heartbeats; what they left running is killed at the end."""
    directory = tmp_path / "traces"
    directory.mkdir()
    try:
        yield directory
    finally:
        for path in directory.glob("pid.*"):
            with contextlib.suppress(OSError, ValueError):
                os.killpg(int(path.read_text().split()[0]), signal.SIGKILL)


def beating_program(traces: Path) -> str:
    """A program that beats every 0.1 s: FIRST_SECONDS on attempt 1, LATER_SECONDS after."""
    script = traces / "work.sh"
    script.write_text(
        f"""\
trace={shlex.quote(str(traces))}
key="$DRAIN_JOB_ID.$DRAIN_JOB_ATTEMPT"
echo $$ > "$trace/pid.$key"
beats={LATER_SECONDS * 10}
[ "$DRAIN_JOB_ATTEMPT" = 1 ] && beats={FIRST_SECONDS * 10}
i=0
while [ $i -lt $beats ]; do
    date +%s.%N >> "$trace/beats.$key"
    sleep 0.1
    i=$((i + 1))
done
"""
    )
    return f"cat >/dev/null; sh {shlex.quote(str(script))}"


def executions(traces: Path) -> dict[int, list[Execution]]:
    found: dict[int, list[Execution]] = {}
    for path in sorted(traces.glob("beats.*")):
        beats = [float(line) for line in path.read_text().split()]
        if not beats:
            continue
        _, job_id, attempt = path.name.split(".")
        found.setdefault(int(job_id), []).append(
            Execution(int(job_id), int(attempt), beats[0], beats[-1])
        )
    return found


def overlap(a: Execution, b: Execution) -> float:
    return max(0.0, min(a.ended, b.ended) - max(a.started, b.started))


def overlaps(found: dict[int, list[Execution]]) -> dict[int, float]:
    """Per job, the longest time two of its executions ran at once (jobs that overlapped)."""
    worst = {
        job_id: max((overlap(a, b) for a, b in itertools.combinations(runs, 2)), default=0.0)
        for job_id, runs in found.items()
    }
    return {job_id: seconds for job_id, seconds in worst.items() if seconds > 0}


def started(traces: Path, ids: list[int], attempt: int = 1) -> bool:
    return all((traces / f"beats.{job_id}.{attempt}").exists() for job_id in ids)


def leases_expired(conn: psycopg.Connection[Any], ids: list[int]) -> bool:
    row = conn.execute(
        "SELECT bool_and(locked_until < now()) FROM jobs WHERE id = ANY(%s)", (ids,)
    ).fetchone()
    return bool(row and row[0])


def exec_run(command: str, lease: float, concurrency: int) -> tuple[str, ...]:
    return (
        "run",
        "--exec",
        command,
        "--lease",
        f"{lease:g}s",
        "--concurrency",
        str(concurrency),
        "--json",
    )


def run_b(runs: Runs, dsn: str, command: str, lease: float, count: int) -> Run:
    """The next run: it reaps A's jobs and does them again."""
    second = runs.run(dsn=dsn, command=exec_run(command, lease, count), timeout=90)
    assert second.process.returncode == 0, second.stderr
    summary = second.summary()
    assert (summary["reaped"], summary["done"]) == (count, count), summary
    return second


def check(
    conn: psycopg.Connection[Any],
    traces: Path,
    ids: list[int],
    figures: Figures,
    *,
    variant: str,
    before: str,
    stopped_at: float,
) -> None:
    """Every job done by its second execution, and no two executions of one job at once."""
    found = executions(traces)
    overlapped = overlaps(found)
    first_end = max(runs[0].ended for runs in found.values() if runs[0].attempt == 1)
    figures(
        SCENARIO,
        variant=variant,
        before=before,
        overlapping=f"{len(overlapped)} of {len(ids)}",
        overlap_s=round(max(overlapped.values(), default=0.0), 1),
        first_program_ran_on_s=round(max(0.0, first_end - stopped_at), 1),
    )
    assert overlapped == {}, f"executions of one job ran at once: {overlapped} s"
    for job_id in ids:
        # B runs reaped jobs alone (suspects), giving their batch-mates back
        # meanwhile, so a job's second execution may carry a later attempt than 2.
        row = job(conn, job_id)
        attempts = sorted(e.attempt for e in found[job_id])
        assert row["status"] == "done" and attempts == [1, row["attempts"]], (row, attempts)


def test_a_program_cut_off_with_its_run_stops_before_its_lease_can_run_out(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, traces: Path, figures: Figures
) -> None:
    """A's link forwards nothing for 8 s (its renewal stuck in it) while B takes the job."""
    lease = 3.0
    ids = add_jobs(conn, 1)
    command = beating_program(traces)
    with proxied(dsn) as (proxy, through):
        first = runs.start(dsn=through, command=exec_run(command, lease, 1))
        wait_until(lambda: started(traces, ids), what="A's program to start")
        proxy.blackhole(HOLD)
        cut_at = time.time()
        wait_until(lambda: leases_expired(conn, ids), timeout=30, what="A's lease to run out")
        run_b(runs, dsn, command, lease, 1)
        first.wait(timeout=60)
    assert first.summary()["lost"] == 1, first.stderr
    check(
        conn,
        traces,
        ids,
        figures,
        variant="link blackholed 8 s, lease 3 s",
        before="1 of 1 overlapping, 6.0 s",
        stopped_at=cut_at,
    )


@pytest.mark.parametrize(
    ("count", "lease", "before"),
    [(1, 3.0, "1 of 1 overlapping, 5.4 s"), (3, 4.0, "1 of 3 overlapping, 2.6 s")],
    ids=["one program", "three programs"],
)
def test_a_program_of_a_frozen_run_stops_before_its_lease_can_run_out(
    dsn: str,
    conn: psycopg.Connection[Any],
    runs: Runs,
    traces: Path,
    figures: Figures,
    count: int,
    lease: float,
    before: str,
) -> None:
    """SIGSTOP to drain's own pid: its programs, in sessions of their own, keep running
    unless something that is not frozen with drain stops them."""
    ids = add_jobs(conn, count)
    command = beating_program(traces)
    first = runs.start(dsn=dsn, command=exec_run(command, lease, count))
    wait_until(lambda: started(traces, ids), what="A's programs to start")
    first.send(signal.SIGSTOP)
    frozen_at = time.time()
    wait_until(lambda: leases_expired(conn, ids), timeout=30, what="A's leases to run out")
    run_b(runs, dsn, command, lease, count)
    first.send(signal.SIGCONT)
    first.wait(timeout=60)
    assert first.summary()["lost"] == count, first.stderr
    check(
        conn,
        traces,
        ids,
        figures,
        variant=f"SIGSTOP to drain, {count} program(s), lease {lease:g} s",
        before=before,
        stopped_at=frozen_at,
    )


def test_the_programs_of_a_killed_run_stop_with_it(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, traces: Path, figures: Figures
) -> None:
    """SIGKILL to drain's own pid (the OOM killer): the supervisor's end of the pipe
    closes, and it stops every program at once."""
    lease = 4.0
    ids = add_jobs(conn, 2)
    command = beating_program(traces)
    first = runs.start(dsn=dsn, command=exec_run(command, lease, 2))
    wait_until(lambda: started(traces, ids), what="A's programs to start")
    first.send(signal.SIGKILL)
    killed_at = time.time()
    first.wait(timeout=30)
    wait_until(lambda: leases_expired(conn, ids), timeout=30, what="A's leases to run out")
    run_b(runs, dsn, command, lease, 2)
    check(
        conn,
        traces,
        ids,
        figures,
        variant="SIGKILL to drain, 2 programs, lease 4 s",
        before="1 of 2 overlapping, 4.0 s",
        stopped_at=killed_at,
    )
