"""Reading the ledger back and checking drain's invariants against the database.

Every scenario ends with :func:`audit`: the queue table says what drain recorded,
the ledger says what the handlers really did, and the two must agree with the
rules drain promises (SPEC §2, §7):

* every job is ``done`` or ``failed``, or ``queued`` legitimately (waiting for a
  retry with attempts left), and none is ``running`` past its lease;
* executions <= attempts <= max_attempts (a max_attempts below 1 counts as 1),
  and no executed attempt is above the job's attempt counter;
* no attempt executed twice (``fault_repeats`` is empty);
* no stale completion: a ``done`` job's last attempt is one whose handler returned.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from tests.apps import ledger_writer


def create(conn: psycopg.Connection[Any]) -> None:
    """Create the ledger tables (their DDL sits with the handlers that write them)."""
    conn.execute(ledger_writer.DDL.encode())


@dataclass(frozen=True)
class Execution:
    job_id: int
    attempt: int
    pid: int
    started_at: datetime
    returned_at: datetime | None
    fault: str | None


@dataclass(frozen=True)
class JobRow:
    id: int
    status: str
    attempts: int
    max_attempts: int
    ready: bool
    lease_expired: bool | None
    last_error: str | None


@dataclass
class Audit:
    """What the database and the ledger say, and every broken rule found."""

    jobs: dict[int, JobRow]
    executions: dict[int, list[Execution]]
    repeats: list[tuple[Any, ...]]
    problems: list[str] = field(default_factory=list)

    @property
    def statuses(self) -> collections.Counter[str]:
        return collections.Counter(row.status for row in self.jobs.values())

    @property
    def executed_more_than_once(self) -> dict[int, list[Execution]]:
        return {job_id: runs for job_id, runs in self.executions.items() if len(runs) > 1}

    def count(self, status: str) -> int:
        return self.statuses[status]

    def assert_ok(self) -> None:
        assert not self.problems, f"{len(self.problems)} broken rule(s): " + "; ".join(
            self.problems[:20]
        )


def overlapping_pairs(runs: list[Execution]) -> int:
    """Pairs of executions (of one job) that were running at the same time."""
    pairs = 0
    for a, b in itertools.combinations(runs, 2):
        a_end, b_end = a.returned_at, b.returned_at
        if (a_end is None or b.started_at < a_end) and (b_end is None or a.started_at < b_end):
            pairs += 1
    return pairs


def executions(conn: psycopg.Connection[Any]) -> dict[int, list[Execution]]:
    rows = conn.execute(
        "SELECT job_id, attempt, pid, started_at, returned_at, fault "
        "FROM fault_ledger ORDER BY job_id, attempt"
    ).fetchall()
    found: dict[int, list[Execution]] = collections.defaultdict(list)
    for row in rows:
        found[row[0]].append(Execution(*row))
    return dict(found)


def audit(
    conn: psycopg.Connection[Any], *, quiescent: bool = True, ready_queued_ok: bool = False
) -> Audit:
    """Check every invariant; ``quiescent`` means no run is working, so nothing may be running.

    ``ready_queued_ok`` allows queued jobs that are ready now (a scenario that
    stopped runs on purpose); otherwise a queued job must be waiting for a retry.
    """
    rows = conn.execute(
        "SELECT id, status, attempts, greatest(max_attempts, 1), run_at <= now(), "
        "locked_until < now(), last_error FROM jobs"
    ).fetchall()
    jobs = {row[0]: JobRow(*row) for row in rows}
    result = Audit(
        jobs=jobs,
        executions=executions(conn),
        repeats=conn.execute(
            "SELECT job_id, attempt, pid FROM fault_repeats ORDER BY job_id"
        ).fetchall(),
    )
    for job_id, attempt, pid in result.repeats:
        result.problems.append(f"job {job_id} attempt {attempt} executed twice (pid {pid})")
    for job_id in result.executions.keys() - jobs.keys():
        result.problems.append(f"ledger has job {job_id}, which the queue table lost")
    for row in jobs.values():
        result.problems += _check_job(row, result.executions.get(row.id, []), quiescent)
        if row.status == "queued" and row.ready and not ready_queued_ok:
            result.problems.append(f"job {row.id} is queued and ready, but no run took it")
    return result


def _check_job(row: JobRow, runs: list[Execution], quiescent: bool) -> list[str]:
    problems = []
    name = f"job {row.id}"
    if row.status not in ("queued", "running", "done", "failed"):
        problems.append(f"{name} has status {row.status!r}")
    if row.status == "running" and (quiescent or row.lease_expired is not False):
        problems.append(f"{name} is running past its lease (or with no run left to own it)")
    if row.status == "queued" and row.attempts >= row.max_attempts:
        problems.append(f"{name} is queued with its attempts used up ({row.attempts})")
    if row.attempts > row.max_attempts:
        problems.append(f"{name} has attempts {row.attempts} > max_attempts {row.max_attempts}")
    if len(runs) > row.attempts:
        problems.append(f"{name} executed {len(runs)} times but has attempts {row.attempts}")
    for run in runs:
        if run.attempt > row.attempts:
            problems.append(f"{name} executed attempt {run.attempt} > attempts {row.attempts}")
    if row.status == "done":
        last = [run for run in runs if run.attempt == row.attempts]
        if not last or last[0].returned_at is None:
            problems.append(
                f"{name} is done, but its attempt {row.attempts} never returned "
                "(a stale completion was recorded)"
            )
    return problems


def add_payload_jobs(
    conn: psycopg.Connection[Any],
    payloads: list[dict[str, Any]],
    *,
    max_attempts: int = 5,
    run_in: float = 0.0,
) -> list[int]:
    """Insert one job per payload, in order of run_at (so claims take them in this order)."""
    import json

    rows = conn.execute(
        """
        INSERT INTO jobs (payload, max_attempts, run_at)
        SELECT p.payload::jsonb, %(max_attempts)s,
               now() + make_interval(secs => %(run_in)s) + p.n * interval '1 microsecond'
        FROM unnest(%(payloads)s::text[]) WITH ORDINALITY AS p(payload, n)
        ORDER BY p.n
        RETURNING id
        """,
        {
            "payloads": [json.dumps(p) for p in payloads],
            "max_attempts": max_attempts,
            "run_in": run_in,
        },
    ).fetchall()
    return [row[0] for row in rows]
