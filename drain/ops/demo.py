"""``drain demo``: drain at work on a throwaway PostgreSQL, in well under a minute.

It starts an embedded server in a temporary directory, creates the schema,
enqueues jobs, and drains them with several ``drain run`` processes at once, as
a scheduler would start them. The demo handler (:func:`record`) writes one row per
execution into a table of its own, so "every job ran exactly once" is checked
from what actually ran. With ``naive=True`` it also runs the article's obvious
claim (``sql/naive_claim.sql``) from eight workers over the same number of jobs,
to show the double claims that ``FOR UPDATE SKIP LOCKED`` prevents. The server
and its files are removed at the end, also when the demo is interrupted, unless
``keep=True``: then the server is left running with the demo's jobs and runs, so
``drain status``, ``drain jobs`` and ``drain report`` have real data to show, and
:func:`drain.ops.kept.stop` stops it and removes its files later (``drain demo --stop``).
"""

from __future__ import annotations

import functools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import conninfo, sql

from drain.core.jobs import Job
from drain.core.settings import DEFAULT_IDLE_TIMEOUT
from drain.core.settings.defaults import (
    DEFAULT_DEMO_JOBS,
    DEFAULT_DEMO_RUNNERS,
    DEFAULT_NAIVE_WORKERS,
)
from drain.core.table import JobTable
from drain.ops import kept as kept_server
from drain.planning import plan
from drain.store import producer, schema, sqlfiles
from drain.store.sqlfiles import statement_for

DSN_VARIABLE = "DRAIN_DEMO_DSN"
DEMO_DATABASE = "drain_demo"
DEMO_QUEUE = "demo"
NAIVE_TABLE = JobTable("naive", "jobs")
RUN_BUDGET = "120"
# The demo handler waits on a round trip for each job, so each run works on a few
# jobs at once (drain run --concurrency) while its queue statements still share
# one connection.
RUN_CONCURRENCY = 4
STOP_WAIT = 15.0
SAMPLE_SCHEDULE = "*/30 * * * *"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SAMPLE_IDLE_TIMEOUT = DEFAULT_IDLE_TIMEOUT


# -- the demo handler, run inside each `drain run` process --------------------------------

_local = threading.local()


def record(job: Job) -> None:
    """The demo's handler: note that this job ran, in which attempt, in which process.

    Each worker thread keeps one connection of its own (the runner's connection
    is for queue statements only), opened on its first job.
    """
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None:
        conn = psycopg.connect(
            os.environ[DSN_VARIABLE], autocommit=True, application_name="drain demo handler"
        )
        _local.conn = conn
    params = {"job_id": job.id, "attempt": job.attempt, "runner_pid": os.getpid()}
    conn.execute(_statement("demo_record"), params)


@functools.cache
def _statement(name: str) -> bytes:
    return sqlfiles.compose(name).as_bytes(None)


# -- results -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunResult:
    """One ``drain run`` process: its exit code and what its JSON summary said."""

    pid: int
    exit_code: int
    done: int
    seconds: float
    error: str | None


@dataclass(frozen=True)
class ExactlyOnce:
    """The queue table's view and the handler's record of one drain."""

    jobs: int
    done: int
    executions: int
    jobs_executed: int
    most_executions: int
    executed_more_than_once: int
    span_seconds: float | None

    @property
    def holds(self) -> bool:
        """Every job done, and run exactly once by the handler's own record."""
        return (
            self.jobs == self.done == self.executions == self.jobs_executed
            and self.most_executions == 1
        )


@dataclass(frozen=True)
class NaiveResult:
    """What the naive claim did with as many claims as there were jobs."""

    workers: int
    claims: int
    jobs: int
    done: int
    most_claims: int
    claimed_more_than_once: int
    still_queued: int
    seconds: float


@dataclass(frozen=True)
class PlanVerdict:
    """``drain plan`` for a sample schedule, with the measured run time as ``d``."""

    schedule: str
    run_seconds: float
    idle_timeout: float
    suspends: bool
    verdict: str
    awake_share: float
    resumes_per_day: float


@dataclass
class Report:
    server_version: str
    jobs: int
    runners: int
    enqueue_seconds: float = 0.0
    drain_seconds: float = 0.0
    runs: list[RunResult] = field(default_factory=list)
    check: ExactlyOnce | None = None
    naive: NaiveResult | None = None
    plan: PlanVerdict | None = None
    kept: kept_server.Kept | None = None

    @property
    def jobs_per_second(self) -> float:
        return self.jobs / self.drain_seconds if self.drain_seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.check is not None and self.check.holds

    def as_dict(self) -> dict[str, Any]:
        check = self.check
        return {
            "server_version": self.server_version,
            "jobs": self.jobs,
            "runners": self.runners,
            "enqueue_seconds": round(self.enqueue_seconds, 3),
            "drain_seconds": round(self.drain_seconds, 3),
            "jobs_per_second": round(self.jobs_per_second, 1),
            "runs": [vars(run) for run in self.runs],
            "exactly_once": check.holds if check else False,
            "check": vars(check) if check else None,
            "naive": vars(self.naive) if self.naive else None,
            "plan": vars(self.plan) if self.plan else None,
            "kept": self.kept.as_dict() if self.kept else None,
        }


# -- the demo ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    jobs: int = DEFAULT_DEMO_JOBS
    runners: int = DEFAULT_DEMO_RUNNERS
    naive: bool = False
    naive_workers: int = DEFAULT_NAIVE_WORKERS
    keep: bool = False


def run(
    options: Options,
    *,
    started: Callable[[str, str], None] = lambda directory, version: None,
) -> Report:
    """Run the whole demo on a fresh embedded server and remove it afterwards.

    ``started`` is told the server's directory and version once it is up, so the
    caller can say where the files are while the demo works. With
    ``options.keep`` a demo that ran to its end leaves the server running (and
    says so in ``Report.kept``); an interrupted one is removed all the same.
    """
    from drain.ops.embedded import EmbeddedServer

    server = EmbeddedServer(durable=False)
    report: Report | None = None
    try:
        with _terminate_as_interrupt():
            server.start()
            started(str(server.directory), server.version)
            report = _demo(server.dsn(), options, server.version)
        if options.keep:
            report.kept = kept_server.keep(server.directory, server.dsn(DEMO_DATABASE))
        return report
    finally:
        if report is None or report.kept is None:
            with _signals_ignored():
                server.cleanup()


def demo_dsn(admin_dsn: str) -> str:
    """The DSN of the demo's database on a server whose administrative DSN is ``admin_dsn``."""
    return conninfo.make_conninfo(admin_dsn, dbname=DEMO_DATABASE)


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the demo the way Ctrl-C does, so the cleanup runs either way."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_ignored() -> Iterator[None]:
    """An impatient second Ctrl-C must not cut the cleanup short and leave a server behind."""
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _demo(admin_dsn: str, options: Options, version: str) -> Report:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DEMO_DATABASE)))
    dsn = demo_dsn(admin_dsn)
    report = Report(server_version=version, jobs=options.jobs, runners=options.runners)
    table = JobTable()
    with psycopg.connect(dsn, autocommit=True) as conn:
        schema.init(conn, table)
        conn.execute(_statement("demo_setup"))
        began = time.monotonic()
        with conn.transaction():
            producer.enqueue_many(conn, _payloads(options.jobs), queue=DEMO_QUEUE, table=table)
        report.enqueue_seconds = time.monotonic() - began
    began = time.monotonic()
    report.runs = _drain(dsn, options.runners)
    report.drain_seconds = time.monotonic() - began
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(statement_for(table, "demo_check"), {"queue": DEMO_QUEUE}).fetchone()
        assert row is not None
        report.check = ExactlyOnce(*row)
    if options.naive:
        report.naive = _naive(dsn, options.jobs, options.naive_workers)
    report.plan = sample_plan(max((run.seconds for run in report.runs), default=1.0))
    return report


def _payloads(count: int) -> Iterator[dict[str, int]]:
    return ({"n": n} for n in range(1, count + 1))


def _drain(dsn: str, runners: int) -> list[RunResult]:
    """Start ``runners`` ``drain run`` processes at once and wait for all of them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    env.pop("DATABASE_URL", None)
    env.update({"DRAIN_DSN": dsn, DSN_VARIABLE: dsn})
    command = [
        sys.executable,
        "-m",
        "drain",
        "run",
        "--handler",
        "drain.ops.demo:record",
        "--queue",
        DEMO_QUEUE,
        "--max-seconds",
        RUN_BUDGET,
        "--concurrency",
        str(RUN_CONCURRENCY),
        "--json",
    ]
    processes: list[subprocess.Popen[str]] = []
    try:
        for _ in range(runners):
            processes.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
        return [_result(process, *process.communicate()) for process in processes]
    finally:
        with _signals_ignored():
            _stop(processes)


def _result(process: subprocess.Popen[str], stdout: str, stderr: str) -> RunResult:
    try:
        summary = json.loads(stdout)
    except json.JSONDecodeError:
        lines = [line for line in stderr.splitlines() if line.strip()]
        error = lines[-1] if lines else f"exit {process.returncode}, no summary"
        return RunResult(process.pid, process.returncode, 0, 0.0, error)
    return RunResult(
        process.pid,
        process.returncode,
        int(summary.get("done", 0)),
        float(summary.get("seconds", 0.0)),
        summary.get("error"),
    )


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    """Runs still going (the demo was interrupted) get SIGTERM: they release and exit."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- the naive claim ---------------------------------------------------------------------


def _naive(dsn: str, jobs: int, workers: int) -> NaiveResult:
    """``workers`` connections, ``jobs / workers`` naive claims each, all at once."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        schema.init(conn, NAIVE_TABLE)
        conn.execute(statement_for(NAIVE_TABLE, "naive_setup"))
        with conn.transaction():
            producer.enqueue_many(conn, _payloads(jobs), table=NAIVE_TABLE)
    claims = math.ceil(jobs / workers)
    stop = threading.Event()
    gate = threading.Barrier(workers)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            _claim_naively(dsn, claims, gate, stop)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    began = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop.set()
        gate.abort()
        for thread in threads:
            thread.join(STOP_WAIT)
    seconds = time.monotonic() - began
    if errors:
        raise errors[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(statement_for(NAIVE_TABLE, "naive_check")).fetchone()
    assert row is not None
    total, done, most, twice, queued, landed = row
    return NaiveResult(workers, int(landed), total, done, most, twice, queued, seconds)


def _claim_naively(dsn: str, claims: int, gate: threading.Barrier, stop: threading.Event) -> None:
    """Claim-as-completion in a transaction of its own, as pgbench ran it in the article."""
    statement = statement_for(NAIVE_TABLE, "naive_claim")
    with psycopg.connect(dsn, autocommit=True, application_name="drain demo naive") as conn:
        with suppress(threading.BrokenBarrierError):
            gate.wait()
        for _ in range(claims):
            if stop.is_set():
                return
            with conn.transaction():
                conn.execute(statement).fetchall()


# -- drain plan --------------------------------------------------------------------------


def sample_plan(run_seconds: float) -> PlanVerdict:
    """The plan verdict for the sample schedule, with runs as long as the demo's."""
    d = max(1.0, math.ceil(run_seconds))
    schedule = plan.RunSchedule(SAMPLE_SCHEDULE, run_seconds=d)
    result = plan.make_plan(
        [schedule],
        start=datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0),
        idle_timeout=SAMPLE_IDLE_TIMEOUT,
    )
    window = result.window
    return PlanVerdict(
        schedule=SAMPLE_SCHEDULE,
        run_seconds=d,
        idle_timeout=SAMPLE_IDLE_TIMEOUT,
        suspends=result.suspends,
        verdict=result.verdict,
        awake_share=window.awake_share,
        resumes_per_day=window.per_day(window.resumes),
    )
