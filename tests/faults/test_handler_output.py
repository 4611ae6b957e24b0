"""Handler output: whatever a handler raises, prints or returns affects only its own attempt.

Error texts PostgreSQL cannot store (a NUL byte from a Python exception or from an
``--exec`` program's stderr, a lone surrogate from an undecodable file name), an
exception whose ``__str__`` raises, and ``RetryLater`` with a delay of zero, a
negative one, an ``at`` in the past or one that is not a number: each job here
is claimed in one batch with five healthy batch-mates, by a real ``drain run``.
The run must exit as usual, the bad job must end as its handler asked (failed
with a storable ``last_error``, or snoozed at least the one-second floor apart),
its batch-mates must be done exactly once, and the summary must count what the
table holds.
"""

from __future__ import annotations

import shlex
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import drain
from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Run, Runs, handler

pytestmark = pytest.mark.faults

HANDLER = handler("output")
BATCH_MATES = 5
REPLACED = "\ufffd"  # what a NUL or a lone surrogate becomes in last_error
SNOOZE_FLOOR = 1.0  # drain.core.jobs.RetryLater.FLOOR_SECONDS, on the database clock
OPTIONS = ("--concurrency", "2", "--max-seconds", "30")


def _jobs(conn: psycopg.Connection[Any], bad: dict[str, Any], max_attempts: int) -> list[int]:
    """The bad job first, then its batch-mates: one claim takes them all."""
    ids = ledger_audit.add_payload_jobs(conn, [bad], max_attempts=max_attempts)
    return ids + ledger_audit.add_payload_jobs(conn, [{"n": n} for n in range(BATCH_MATES)])


def _row(conn: psycopg.Connection[Any], job_id: int) -> tuple[str, int, str | None]:
    row = conn.execute(
        "SELECT status, attempts, last_error FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def _check_run(
    run: Run, conn: psycopg.Connection[Any], mates: list[int], *, ready_queued_ok: bool = False
) -> dict[str, Any]:
    """The run ended as usual, every batch-mate ran once, the summary matches the table."""
    assert run.process.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    summary = run.summary()
    audit = ledger_audit.audit(conn, ready_queued_ok=ready_queued_ok)
    audit.assert_ok()
    for job_id in mates:
        assert _row(conn, job_id)[:2] == ("done", 1), job_id
        assert len(audit.executions.get(job_id, [])) == 1, job_id
    table = dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())
    assert summary["done"] == table.get("done", 0), (summary, table)
    assert summary["failed"] == table.get("failed", 0), (summary, table)
    assert summary["lost"] == summary["released"] == 0, summary
    return summary


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("nul", f"RuntimeError: oops{REPLACED} after a NUL"),
        ("surrogate", f"FileNotFoundError: cannot read caf{REPLACED}.txt"),
        ("unprintable", "_Unprintable: <unprintable: str() raised ValueError>"),
    ],
)
def test_an_unstorable_error_text_fails_only_its_job(
    output: str,
    expected: str,
    dsn: str,
    ledger_conn: psycopg.Connection[Any],
    runs: Runs,
    figures: Figures,
) -> None:
    bad, *mates = _jobs(ledger_conn, {"output": output}, max_attempts=1)
    run = runs.run(*OPTIONS, dsn=dsn, command=("run", "--handler", HANDLER, "--json"))

    summary = _check_run(run, ledger_conn, mates)
    assert _row(ledger_conn, bad) == ("failed", 1, expected)
    assert (summary["done"], summary["failed"]) == (BATCH_MATES, 1), summary
    figures("handler output", variant=f"handler error: {output}", exit_code=0, batch_mates_harmed=0)


def test_an_exec_program_writing_a_nul_fails_only_its_job(
    dsn: str,
    ledger_conn: psycopg.Connection[Any],
    runs: Runs,
    tmp_path: Path,
    figures: Figures,
) -> None:
    """The exec program appends its job id to a file: the executions, counted."""
    bad, *mates = _jobs(ledger_conn, {"output": "nul"}, max_attempts=1)
    executed = tmp_path / "executed"
    program = (
        f'echo "$DRAIN_JOB_ID" >> {shlex.quote(str(executed))}; '
        "case $(cat) in *nul*) printf 'oops\\000 after a NUL' >&2; exit 1;; esac"
    )
    run = runs.run(*OPTIONS, dsn=dsn, command=("run", "--exec", program, "--json"))

    assert run.process.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    summary = run.summary()
    assert (summary["done"], summary["failed"], summary["lost"]) == (BATCH_MATES, 1, 0), summary
    assert _row(ledger_conn, bad) == (
        "failed",
        1,
        f"ExecFailed: exit status 1: oops{REPLACED} after a NUL",
    )
    assert all(_row(ledger_conn, job_id)[:2] == ("done", 1) for job_id in mates)
    counts: dict[int, int] = {}
    for line in executed.read_text().split():
        counts[int(line)] = counts.get(int(line), 0) + 1
    assert counts == {job_id: 1 for job_id in [bad, *mates]}, counts
    figures("handler output", variant="exec stderr: nul", exit_code=0, batch_mates_harmed=0)


@pytest.mark.parametrize(
    ("variant", "request_"),
    [("delay=0", {"delay": 0}), ("delay=-1", {"delay": -1}), ("at 1h ago", {"at_ago": 3600})],
)
def test_a_snooze_into_the_past_waits_at_least_the_floor(
    variant: str,
    request_: dict[str, Any],
    dsn: str,
    ledger_conn: psycopg.Connection[Any],
    runs: Runs,
    figures: Figures,
) -> None:
    """One snooze, then done: the job comes back no sooner than the floor after it started.

    The run usually ends before the job is due again (its queue came back empty
    meanwhile); on a slow machine it may run the second attempt itself.
    """
    bad, *mates = _jobs(ledger_conn, {"output": "snooze", "snoozes": 1, **request_}, 1)
    run = runs.run(*OPTIONS, dsn=dsn, command=("run", "--handler", HANDLER, "--json"))

    summary = _check_run(run, ledger_conn, mates, ready_queued_ok=True)
    assert (summary["snoozed"], summary["failed"]) == (1, 0), summary
    starts = [e.started_at for e in ledger_audit.executions(ledger_conn)[bad]]
    row = ledger_conn.execute(
        "SELECT status, attempts, run_at - %s FROM jobs WHERE id = %s", (starts[0], bad)
    ).fetchone()
    assert row is not None
    status, attempts, wait = row
    assert (status, attempts) in {("queued", 1), ("done", 2)}, row
    assert len(starts) == attempts, starts
    assert wait.total_seconds() >= SNOOZE_FLOOR * 0.9, wait
    if len(starts) == 2:
        assert (starts[1] - starts[0]).total_seconds() >= SNOOZE_FLOOR * 0.9, starts
    figures(
        "handler output",
        variant=f"RetryLater({variant})",
        snoozed_for_s=round(wait.total_seconds(), 2),
    )


def test_a_job_snoozing_at_once_forever_snoozes_once_a_second_at_most(
    dsn: str, ledger_conn: psycopg.Connection[Any], figures: Figures
) -> None:
    """RetryLater(delay=0) on every attempt, in-process: a 3-second run snoozed it 570 times.

    Alone in its queue with a handler that takes no time, the job is claimed again
    as soon as its snooze is written, until the budget ends the run.
    """
    ledger_audit.add_payload_jobs(ledger_conn, [{"snooze": True}], max_attempts=1)
    calls = []

    def snooze_at_once(job: drain.Job) -> None:
        calls.append(job.attempt)
        raise drain.RetryLater(delay=0)

    budget = 3.0
    summary = drain.run(dsn, handlers={"default": snooze_at_once}, max_seconds=budget)

    assert summary.error is None, summary
    assert summary.snoozed == len(calls) <= budget / SNOOZE_FLOOR + 2, (len(calls), summary)
    assert summary.exit_code in (0, 3), summary  # 3 when the job is due at the deadline
    figures("handler output", variant="RetryLater(delay=0) forever, 3 s run", snoozes=len(calls))


@pytest.mark.parametrize("delay", ["nan", "inf"])
def test_a_snooze_that_is_not_a_number_fails_the_attempt(
    delay: str,
    dsn: str,
    ledger_conn: psycopg.Connection[Any],
    runs: Runs,
    figures: Figures,
) -> None:
    bad, *mates = _jobs(ledger_conn, {"output": "snooze", "delay": delay}, max_attempts=1)
    run = runs.run(*OPTIONS, dsn=dsn, command=("run", "--handler", HANDLER, "--json"))

    summary = _check_run(run, ledger_conn, mates)
    assert (summary["done"], summary["failed"], summary["snoozed"]) == (BATCH_MATES, 1, 0)
    expected = "RetryLater: delay must be a finite number of seconds"
    assert _row(ledger_conn, bad) == ("failed", 1, expected)
    figures(
        "handler output", variant=f"RetryLater(delay={delay})", exit_code=0, batch_mates_harmed=0
    )


def test_the_one_place_that_makes_error_texts_storable() -> None:
    """drain.core.redact.storable_error and describe, without a run: what the runs above rely on."""
    from drain.core.redact import MAX_ERROR_LENGTH, Redactor, describe, storable_error

    redactor = Redactor("postgresql://u:s3cr3t-pw@db/app")
    assert storable_error("a\x00b \udcff c", redactor) == f"a{REPLACED}b {REPLACED} c"
    long = storable_error("x" * 10**7 + " s3cr3t-pw", redactor)
    assert len(long) == MAX_ERROR_LENGTH and long.endswith(" ... (truncated)")
    masked = storable_error("could not reach postgresql://u:s3cr3t-pw@db/app", redactor)
    assert "s3cr3t-pw" not in masked
    assert storable_error(" " * 1990 + "s3cr3t-pw" + "y" * 100, redactor).count("s3cr") == 0

    class NotAString(Exception):
        def __str__(self) -> Any:
            return 42

    assert describe(NotAString()) == "NotAString: <unprintable: str() raised TypeError>"
    assert describe(KeyboardInterrupt()) == "KeyboardInterrupt"


@pytest.mark.parametrize(
    ("delay", "expected"),
    [
        (0, 1.0),
        (-5, 1.0),
        (2.5, 2.5),
        (timedelta(minutes=2), 120.0),
        (10**400, None),
        ("5", None),
        (float("-inf"), None),
    ],
)
def test_retry_later_checks_its_delay(delay: Any, expected: float | None) -> None:
    retry = drain.RetryLater(delay=delay)
    if expected is None:
        with pytest.raises(ValueError, match=r"^RetryLater: delay must be a finite number"):
            retry.when()
    else:
        assert retry.when() == (None, expected)
