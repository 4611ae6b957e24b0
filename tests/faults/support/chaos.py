"""Scenario 2's chaos: runs racing on one table while SIGKILLs take them down.

A supervisor starts a run every ``period`` seconds while fewer than ``slots`` are
alive and work is left, the way a scheduler starting runs on a timer would (a run
reaps expired leases when it starts, so the period bounds how long a killed run's
jobs wait once their lease is over). Kills come two ways: from the test, which
SIGKILLs a random run that is working each time the count of done jobs passes
one of a set of random thresholds (so kills are spread over the whole drain, and
the drain cannot finish before the kills do), and from the handlers, which kill
their own run in the middle of a job or a few milliseconds after returning it
(around the completion). When the kills are done, no new run starts until the
survivors have finished and one lease has gone by; then exactly one more run
must finish everything.
"""

from __future__ import annotations

import itertools
import random
import signal
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from tests.faults.support import ledger_audit
from tests.faults.support.processes import Run, Runs

POLL_SECONDS = 0.02
# Jobs that kill their own run sit in this first share of the queue; the test's
# last kill comes when most of the queue is done (thresholds up to 90 %).
SELF_KILLS_WITHIN = 0.4
# Kill times are taken on this process's clock, ledger times on the server's (the
# same machine): allow for the two readings of one clock being taken apart.
KILL_CLOCK_SLACK = 0.05


@dataclass
class ChaosResult:
    """What happened, for the assertions and the figures."""

    jobs: int
    kills_by_test: int = 0
    kills_by_handler: int = 0
    kill_times: dict[int, float] = field(default_factory=dict)
    exit_codes: list[int] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    run_starts: list[float] = field(default_factory=list)
    final_run: Run | None = None

    @property
    def kills(self) -> int:
        return self.kills_by_test + self.kills_by_handler


def chaos_payloads(
    rng: random.Random, jobs: int, in_handler: int, after_return: int
) -> list[dict[str, Any]]:
    """Plain jobs, with a few that kill their run in a handler or right after returning.

    Those sit in the first part of the queue, so they run while the test is still
    killing runs, never in the one run that must finish the work afterwards.
    """
    payloads: list[dict[str, Any]] = [{"n": n} for n in range(jobs)]
    chosen = rng.sample(range(int(jobs * SELF_KILLS_WITHIN)), in_handler + after_return)
    for index in chosen[:in_handler]:
        payloads[index].update(fault="kill", fault_on=[1])
    for index in chosen[in_handler:]:
        payloads[index].update(kill_after=rng.uniform(0.0, 0.02), kill_on=[1])
    return payloads


class Chaos:
    def __init__(
        self,
        runs: Runs,
        dsn: str,
        conn: psycopg.Connection[Any],
        *,
        rng: random.Random,
        jobs: int,
        slots: int,
        lease: float,
        period: float,
        kills_by_test: int,
        options: Sequence[str],
    ) -> None:
        self.runs = runs
        self.dsn = dsn
        self.conn = conn
        self.rng = rng
        self.slots = slots
        self.lease = lease
        self.period = period
        self.options = [*options, "--lease", f"{lease}s"]
        self.live: list[Run] = []
        self.ended: list[Run] = []
        self.killed_by_test: set[int] = set()
        self.result = ChaosResult(jobs=jobs)
        low, high = int(jobs * 0.05), int(jobs * 0.9)
        self.thresholds = sorted(rng.randint(low, high) for _ in range(kills_by_test))
        self.kills_wanted = kills_by_test

    # -- phase 1: racing runs and kills ----------------------------------------------

    def storm(self, timeout: float) -> None:
        """Keep runs going and kill them until every kill is done (or the work is)."""
        deadline = time.monotonic() + timeout
        while len(self.killed_by_test) < self.kills_wanted and self._work_left():
            if time.monotonic() > deadline:
                raise AssertionError(f"chaos still going after {timeout}s")
            self._collect()
            self._top_up()
            if not self.thresholds or self._done() >= self.thresholds[0]:
                victim = self._working_victim()
                if victim is not None and victim.send(signal.SIGKILL):
                    self.killed_by_test.add(victim.pid)
                    self.result.kill_times[victim.pid] = time.time()
                    if self.thresholds:
                        self.thresholds.pop(0)
            time.sleep(POLL_SECONDS)

    # -- phase 2: survivors, one lease, one more run ----------------------------------

    def finish(self, timeout: float) -> Run:
        """Let the survivors end, wait one lease after the last kill, then run once more."""
        for run in list(self.live):
            run.wait(timeout)
        self._collect()
        last_kill = max(self.result.kill_times.values(), default=time.time())
        time.sleep(max(0.0, last_kill + self.lease + 0.5 - time.time()))
        final = self.runs.start(*self.options, dsn=self.dsn)
        self.result.run_starts.append(time.time())
        final.wait(timeout)
        self.result.final_run = final
        self.result.exit_codes.append(final.process.returncode)
        self.result.summaries.append(final.summary())
        return final

    # -- helpers ----------------------------------------------------------------------

    def _scalar(self, statement: str, params: Any = None) -> Any:
        row = self.conn.execute(statement, params).fetchone()
        assert row is not None
        return row[0]

    def _work_left(self) -> bool:
        return bool(self._scalar("SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')"))

    def _done(self) -> int:
        return int(self._scalar("SELECT count(*) FROM jobs WHERE status = 'done'"))

    def _top_up(self) -> None:
        """Start a run when a slot is free, at most one per period (after the first wave)."""
        now = time.time()
        starts = self.result.run_starts
        while len(self.live) < self.slots and (
            len(starts) < self.slots or now - starts[-1] >= self.period
        ):
            self.live.append(self.runs.start(*self.options, dsn=self.dsn))
            starts.append(now)

    def _collect(self) -> None:
        for run in list(self.live):
            code = run.poll()
            if code is None:
                continue
            self.live.remove(run)
            self.ended.append(run)
            self.result.exit_codes.append(code)
            if code == -signal.SIGKILL:
                if run.pid in self.killed_by_test:
                    self.result.kills_by_test += 1
                else:
                    self.result.kills_by_handler += 1
                    self.result.kill_times[run.pid] = time.time()
            elif code in (0, 1):  # 1: a run that lost jobs (exit reason lost) says so too
                self.result.summaries.append(run.summary())

    def _working_victim(self) -> Run | None:
        """A live run that has started at least one handler (so it has claimed work)."""
        pids = [run.pid for run in self.live if run.poll() is None]
        if not pids:
            return None
        working = {
            row[0]
            for row in self.conn.execute(
                "SELECT DISTINCT pid FROM fault_ledger WHERE pid = ANY(%s)", (pids,)
            ).fetchall()
        }
        candidates = [run for run in self.live if run.pid in working]
        return self.rng.choice(candidates) if candidates else None


@dataclass(frozen=True)
class KillAnalysis:
    """Why jobs ran more than once, and how long a killed job waited to run again."""

    killed_in_handler: int
    killed_after_return: int
    killed_before_handler: int
    unexplained_repeats: list[str]
    executed_more_than_once: int
    delays: list[float]

    def delay_figures(self) -> dict[str, float]:
        if not self.delays:
            return {}
        return {
            "min_s": round(min(self.delays), 2),
            "median_s": round(statistics.median(self.delays), 2),
            "max_s": round(max(self.delays), 2),
        }


def analyse(audit: ledger_audit.Audit, kill_times: dict[int, float]) -> KillAnalysis:
    """Classify every repeated execution by the ledger; a repeat with no kill is a bug."""
    unexplained: list[str] = []
    delays: list[float] = []
    in_handler = after_return = 0
    for job_id, executions in audit.executed_more_than_once.items():
        final = audit.jobs[job_id].attempts
        for earlier, later in itertools.pairwise(executions):
            if earlier.attempt == final:
                continue
            killed_at = kill_times.get(earlier.pid)
            if killed_at is None or killed_at > later.started_at.timestamp() + KILL_CLOCK_SLACK:
                unexplained.append(
                    f"job {job_id} attempt {earlier.attempt} (pid {earlier.pid}, started "
                    f"{earlier.started_at:%H:%M:%S.%f}, returned {earlier.returned_at}) ran "
                    f"again at {later.started_at:%H:%M:%S.%f} while its run was alive "
                    f"(killed at {killed_at})"
                )
                continue
            if earlier.returned_at is None:
                in_handler += 1
            else:
                after_return += 1
            delays.append(later.started_at.timestamp() - killed_at)
    gaps = sum(row.attempts - len(audit.executions.get(row.id, [])) for row in audit.jobs.values())
    return KillAnalysis(
        killed_in_handler=in_handler,
        killed_after_return=after_return,
        killed_before_handler=gaps,
        unexplained_repeats=unexplained,
        executed_more_than_once=len(audit.executed_more_than_once),
        delays=delays,
    )
