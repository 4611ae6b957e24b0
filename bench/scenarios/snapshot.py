"""Held snapshot: another session sits idle in a transaction for the whole drain.

While a snapshot is held, no row version that died after it was taken can be
removed, and index entries of jobs already claimed stay in the ready index for
every later claim to walk past. The holder is a ``REPEATABLE READ``
transaction that ran one query and then waits, idle in transaction, as a
forgotten ``BEGIN`` in a console or a worker holding a transaction over a job
would. Reported: each system's slowdown (its jobs/s without the holder over its
jobs/s with it), measured in alternation, and whether ``drain status``, run
while the holder is still open, names that session as the oldest transaction
holding vacuum back.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import psycopg

from bench.measure import PYTHON, BenchError, ProcessRun, run_process
from bench.peers import find_peers
from bench.scenarios import Check, Context, Outcome, Row, alternate, rate_ratio, setup_all
from bench.systems import DrainCLI, ProtocolLoop, System

NAME = "snapshot"
TITLE = "Held snapshot: {jobs:,} no-op jobs while another session is idle in transaction"
HOLDER = "bench-snapshot-holder"


@contextlib.contextmanager
def held_snapshot(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A session idle in a REPEATABLE READ transaction whose snapshot holds the xmin horizon."""
    with psycopg.connect(dsn, autocommit=True, application_name=HOLDER) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM pg_class").fetchone()
        holds = conn.execute(
            "SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
        if not holds or not holds[0]:
            raise BenchError("the holding session has no snapshot (backend_xmin is NULL)")
        try:
            yield conn
        finally:
            conn.execute("ROLLBACK")


def status_names(dsn: str, holder_pid: int) -> tuple[bool, str]:
    """Whether ``drain status --json`` names ``holder_pid`` as the oldest open
    transaction, and the line its text output gives about it."""
    argv = [PYTHON, "-m", "drain", "status", "--dsn", dsn]
    data = json.loads(run_process([*argv, "--json"]).stdout)
    oldest = data.get("oldest_transaction") or {}
    text = run_process(argv).stdout
    line = next((ln for ln in text.splitlines() if ln.startswith("oldest transaction")), "")
    return oldest.get("pid") == holder_pid, line


def run(ctx: Context) -> Outcome:
    count = ctx.size(20_000, 500)
    server = ctx.server
    systems: list[System] = [DrainCLI(server), ProtocolLoop(server, 100)]
    if ctx.peers:
        systems += find_peers(server, ctx.graphile, fast_only=True)
    setup_all(systems)
    outcome = Outcome(NAME, TITLE.format(jobs=count))
    plain: list[tuple[System, Row]] = []
    held: list[tuple[System, Row]] = []
    for system in systems:
        jobs = system.jobs_for(count)
        free_row = Row(system.label, system.key, jobs)
        held_row = Row(f"{system.label}, snapshot held", f"{system.key}+held", jobs)
        outcome.rows += [free_row, held_row]
        plain.append((system, free_row))
        held.append((system, held_row))

    def measure(system: System, jobs: int, row: Row) -> ProcessRun:
        system.fill(jobs)
        if not row.key.endswith("+held"):
            result = system.run(jobs)
        else:
            with held_snapshot(system.dsn) as holder:
                result = system.run(jobs)
                if isinstance(system, DrainCLI) and "drain_status" not in outcome.facts:
                    named, line = status_names(system.dsn, holder.info.backend_pid)
                    outcome.facts["drain_status"] = line
                    outcome.checks.append(
                        Check("drain status names the holding session", float(named), 1.0, unit="")
                    )
        row.seconds.add(result.seconds)
        return result

    interleaved = [pair for both in zip(plain, held, strict=True) for pair in both]
    alternate(ctx, interleaved, measure)
    slowdowns = {
        system.key: rate_ratio(outcome, system.key, f"{system.key}+held") for system in systems
    }
    outcome.facts["slowdown"] = {key: round(value, 2) for key, value in slowdowns.items()}
    return outcome
