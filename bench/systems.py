"""The systems under measurement: drain through its CLI, the direct-protocol loop, the floor.

A system owns a database of its own on the benchmark server. Before every timed
run it is reset and filled with fresh ready jobs (not timed), then it runs as
a process exactly as a user would start it, and afterwards the suite checks
that every job was done, so a figure never comes from a run that skipped work.
Two exceptions, each saying why: drain in the steady state keeps its table from
run to run, as a deployment does, and the server floor is a procedure called
over the suite's own connection, not a process. Peers (pgqueuer, procrastinate,
graphile-worker) follow the same shape in :mod:`bench.peers`.
"""

from __future__ import annotations

import contextlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql

import drain
from bench.measure import (
    PYTHON,
    REPO,
    BenchError,
    ProcessRun,
    clean_environment,
    run_process,
)
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
    #: Letters of filler in each payload, ``{"n": i, "blob": "xxx..."}``: megabytes to
    #: decode that compress to kilobytes on disk, built by the server so filling stays fast.
    blob_bytes = 0

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
            payload: sql.Composable = sql.SQL("jsonb_build_object('n', g)")
            if self.blob_bytes:
                payload = sql.SQL("jsonb_build_object('n', g, 'blob', repeat('x', {}))").format(
                    self.blob_bytes
                )
            conn.execute(
                sql.SQL(
                    "INSERT INTO jobs (payload) SELECT {} FROM generate_series(1, %s) AS g"
                ).format(payload),
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
        blob_bytes: int = 0,
    ) -> None:
        super().__init__(server)
        self.handler = handler
        self.options = list(options)
        self.key = key
        self.label = label
        self.blob_bytes = blob_bytes

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


class PriorityDrainCLI(DrainCLI):
    """``drain run`` with its defaults on a table with the priority column.

    The column and index the migration adds (``priority integer NOT NULL DEFAULT
    0``, ``jobs_priority_idx`` on (queue, priority DESC, run_at) WHERE status =
    'queued'), so the run claims by priority (sql/claim_priority.sql). The jobs
    are the plain table's, enqueued without a priority (all 0); with ``mixed``
    they spread over priorities 0 to 2 at random (a volatile default fills them
    as the same rows are inserted), so each claim's rows lie scattered over three
    times the heap pages: the cost of priorities themselves, not of the column.
    """

    def __init__(self, server: BenchServer, *, mixed: bool = False) -> None:
        key = "drain-priority-mixed" if mixed else "drain-priority"
        label = "drain run (defaults), priority table" + (", priorities 0 to 2" if mixed else "")
        super().__init__(server, key=key, label=label)
        self.mixed = mixed

    def setup(self) -> None:
        super().setup()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0"
            )
            conn.execute(
                "CREATE INDEX IF NOT EXISTS jobs_priority_idx "
                "ON jobs (queue, priority DESC, run_at) WHERE status = 'queued'"
            )
            if self.mixed:
                conn.execute(
                    "ALTER TABLE jobs ALTER COLUMN priority SET DEFAULT (random() * 2)::int"
                )


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


class SteadyDrain(DrainCLI):
    """``drain run`` on one long-lived table, as a deployment runs it, run after run.

    Nothing resets the table between runs: each timed run finds a burst enqueued
    (one ``COPY``) on top of what the previous run left, done jobs included (the
    default retention keeps them 7 days), and the planner statistics that run's
    own end-of-run ``VACUUM (ANALYZE)`` took while every job was done. The suite
    never vacuums or analyzes this table itself, and turns autovacuum off for it,
    so the embedded server (autovacuum on) and a machine's server (autovacuum off)
    measure the same state: a compute that suspends most of the day gives
    autovacuum no chance either.
    """

    def __init__(
        self,
        server: BenchServer,
        *,
        key: str = "drain-steady",
        label: str = "drain run (defaults), steady state: a burst on what its last run left",
    ) -> None:
        super().__init__(server, key=key, label=label)
        self.primed = False

    def setup(self) -> None:
        super().setup()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "ALTER TABLE jobs SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)"
            )

    def burst(self, count: int) -> None:
        """Enqueue ``count`` ready jobs with one COPY, as an application's bulk enqueue does."""
        with psycopg.connect(self.dsn) as conn:
            drain.enqueue_many(conn, ({"n": n} for n in range(count)))
            conn.commit()
        checkpoint(self.dsn)

    def fresh(self, count: int) -> None:
        """A burst with fresh statistics: ``VACUUM (ANALYZE)`` once it is queued.

        The state the suite's other scenarios start every run from, and the one
        a series on this table starts from.
        """
        self.burst(count)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            settle(conn, "jobs")
        self.primed = True

    def fill(self, count: int) -> None:
        """A burst on what the last run left; the first time, one untimed run leaves it."""
        if not self.primed:
            self.fresh(count)
            self.run(count)
        self.burst(count)

    def done_rows(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()
            return int(row[0]) if row else 0

    def analyzes(self) -> int:
        """How many times the table's statistics were taken, by anyone: the state's witness."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT analyze_count + autoanalyze_count FROM pg_stat_user_tables "
                "WHERE relid = 'jobs'::regclass"
            ).fetchone()
            return int(row[0]) if row else 0


FLOOR_SQL = REPO / "bench" / "sql" / "floor.sql"
FLOOR_CALL = "CALL drain_bench_floor({jobs}::regclass, %(queue)s, %(batch)s, %(lease)s, NULL)"
FLOOR_LEASE = timedelta(minutes=5)


def install_floor(conn: psycopg.Connection[Any]) -> None:
    """Create the floor's procedure (``bench/sql/floor.sql``) in the connection's database."""
    conn.execute(FLOOR_SQL.read_text(encoding="utf-8").encode())


def call_floor(conn: psycopg.Connection[Any], batch: int, queue: str = "default") -> int:
    """Drain ``queue`` of public.jobs with the procedure; returns the jobs it completed.

    The connection must be in autocommit: the procedure commits each round,
    which PostgreSQL allows only in a CALL outside a transaction block.
    """
    call = sql.SQL(FLOOR_CALL).format(jobs=sql.Literal("public.jobs"))
    row = conn.execute(call, {"queue": queue, "batch": batch, "lease": FLOOR_LEASE}).fetchone()
    return int(row[0]) if row else 0


class Floor(DrainTableSystem):
    """The server's own floor: the lease protocol as a procedure (``bench/sql/floor.sql``).

    No client takes part in the loop: the server claims 1,000 jobs, completes
    them fenced by attempt, commits and goes on until a claim comes back empty.
    That is the least time the statements themselves take, the limit a drainer
    on one connection can approach by overlapping its own work with the
    server's. It is timed by the wall clock around the one ``CALL``, over a
    connection opened before the clock starts, so unlike the other rows it
    carries no process start, no connection and no decoding: every figure over
    it is a fraction of what the server alone could do.
    """

    key = "floor"
    label = "server floor: the lease protocol in a procedure, claim 1,000 (one CALL)"

    def __init__(self, server: BenchServer, batch: int = 1000) -> None:
        super().__init__(server)
        self.batch = batch

    def setup(self) -> None:
        super().setup()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            install_floor(conn)

    def argv(self, dsn: str) -> list[str]:
        """None: the floor is a CALL timed over the suite's own connection, not a process."""
        raise NotImplementedError("the floor runs as a CALL, not as a process")

    def run(self, count: int, dsn: str | None = None) -> ProcessRun:
        """CALL the procedure, timed around the call; fail loudly unless every job was done."""
        with psycopg.connect(dsn or self.dsn, autocommit=True) as conn:
            started = time.perf_counter()
            done = call_floor(conn, self.batch)
            seconds = time.perf_counter() - started
        remaining = self.left()
        if remaining or done != count:
            raise BenchError(
                f"{self.label} completed {done} of {count} jobs, {remaining} left not done"
            )
        report = json.dumps({"jobs": done, "seconds": seconds})
        return ProcessRun(seconds, 0.0, 0, report, "")


def checkpoint(dsn: str) -> None:
    """Write dirty pages out before a timed run, so no checkpoint lands inside it."""
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        contextlib.suppress(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("CHECKPOINT")
