"""The systems under measurement: drain through its CLI, and the direct-protocol loop.

A system owns a database of its own on the benchmark server. Before every timed
run it is reset and filled with fresh ready jobs (not timed), then it runs as
a process exactly as a user would start it, and afterwards the suite checks
that every job was done, so a figure never comes from a run that skipped work.
Peers (pgqueuer, procrastinate, graphile-worker) follow the same shape in
:mod:`bench.peers`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from bench.measure import PYTHON, BenchError, ProcessRun, clean_environment, run_process
from bench.server import BenchServer, settle

NOOP = "bench.handlers:noop"
SLEEP_10MS = "bench.handlers:sleep_10ms"


class System(ABC):
    """One row of a table: something that drains a queue of no-op jobs."""

    key: str
    label: str
    #: Jobs for one run at most; slow systems drain fewer so a full suite stays in minutes.
    max_jobs: int | None = None

    def __init__(self, server: BenchServer) -> None:
        self.server = server
        self.dsn = ""

    @abstractmethod
    def setup(self) -> None:
        """Create this system's database and schema (once per scenario)."""

    @abstractmethod
    def fill(self, count: int) -> None:
        """Reset the queue and enqueue ``count`` ready no-op jobs, settled and checkpointed."""

    @abstractmethod
    def argv(self, dsn: str) -> list[str]:
        """The command that drains the queue at ``dsn`` once and exits."""

    @abstractmethod
    def left(self) -> int:
        """Jobs not yet finished (zero after a good run)."""

    def env(self, dsn: str) -> dict[str, str]:
        return clean_environment()

    def jobs_for(self, count: int) -> int:
        return min(count, self.max_jobs) if self.max_jobs else count

    def run(self, count: int, dsn: str | None = None) -> ProcessRun:
        """Drain the ``count`` jobs just filled; fail loudly unless every one was done."""
        target = dsn or self.dsn
        result = run_process(self.argv(target), env=self.env(target)).check(self.label)
        remaining = self.left()
        if remaining:
            raise BenchError(f"{self.label} exited with {remaining} of {count} jobs not done")
        return result


class DrainTableSystem(System):
    """A system that drains drain's own table (public.jobs): drain itself and the yardstick."""

    #: The last id of the done jobs kept under the queued ones (the history scenario sets it).
    history_until = 0

    def setup(self) -> None:
        self.dsn = self.server.drain_database(self.key.replace("-", "_"))

    def add_history(self, rows: int) -> None:
        """Put ``rows`` done jobs in the table, finished within the archive retention."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (payload, status, attempts, created_at, run_at) "
                "SELECT jsonb_build_object('n', g), 'done', 1, now() - interval '1 day', "
                "now() - interval '1 day' FROM generate_series(1, %s) AS g",
                (rows,),
            )
            row = conn.execute("SELECT max(id) FROM jobs").fetchone()
            self.history_until = int(row[0]) if row and row[0] else 0
            settle(conn, "jobs")

    def fill(self, count: int) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            if self.history_until:
                conn.execute("DELETE FROM jobs WHERE id > %s", (self.history_until,))
                conn.execute("TRUNCATE jobs_archive, drain_runs")
            else:
                conn.execute("TRUNCATE jobs, jobs_archive, drain_runs")
            conn.execute(
                "INSERT INTO jobs (payload) SELECT jsonb_build_object('n', g) "
                "FROM generate_series(1, %s) AS g",
                (count,),
            )
            settle(conn, "jobs")

    def left(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM jobs WHERE status <> 'done'").fetchone()
            return int(row[0]) if row else 0


class DrainCLI(DrainTableSystem):
    """``drain run`` as a user runs it: its defaults, a handler module, nothing else."""

    def __init__(
        self,
        server: BenchServer,
        *,
        handler: str = NOOP,
        options: Sequence[str] = (),
        key: str = "drain",
        label: str = "drain run (defaults)",
    ) -> None:
        super().__init__(server)
        self.handler = handler
        self.options = list(options)
        self.key = key
        self.label = label

    def argv(self, dsn: str) -> list[str]:
        return [
            PYTHON,
            "-m",
            "drain",
            "run",
            "--handler",
            self.handler,
            *self.options,
            "--dsn",
            dsn,
            "--json",
        ]

    @staticmethod
    def summary(result: ProcessRun) -> Mapping[str, Any]:
        """The JSON summary ``drain run --json`` printed."""
        data = json.loads(result.stdout)
        if not isinstance(data, dict):
            raise BenchError(f"drain printed no summary: {result.stdout[:200]!r}")
        return data


class ProtocolLoop(DrainTableSystem):
    """The yardstick (:mod:`bench.protocol`): claim N, run, one batched completion, repeat."""

    def __init__(self, server: BenchServer, claim: int = 100, *, prepare: bool = True) -> None:
        super().__init__(server)
        self.claim = claim
        self.prepare = prepare
        self.key = f"protocol-{claim}" + ("" if prepare else "-unprepared")
        self.label = (
            "protocol loop, one job per round trip"
            if claim == 1
            else f"protocol loop, claim {claim}"
        ) + ("" if prepare else ", no prepared statements")

    def argv(self, dsn: str) -> list[str]:
        argv = [PYTHON, "-m", "bench.protocol", "--dsn", dsn, "--claim", str(self.claim)]
        return argv if self.prepare else [*argv, "--no-prepare"]

    @staticmethod
    def report(result: ProcessRun) -> Mapping[str, Any]:
        """The JSON the loop printed: jobs, seconds, claim latency percentiles."""
        data = json.loads(result.stdout)
        if not isinstance(data, dict):
            raise BenchError(f"the protocol loop printed no report: {result.stdout[:200]!r}")
        return data
