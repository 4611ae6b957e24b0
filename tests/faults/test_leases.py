"""Scenarios 3, 4 and 5: the attempt fence against late completions, the reaper
against a completion in flight, and a CPU-bound handler that outlives its lease
many times over while the lease keeper keeps it.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from drain.core.config import ConnectOptions, RunConfig
from drain.core.jobs import Attempt
from drain.core.table import JobTable
from drain.runner import Runner
from drain.store import claims, fencing, upkeep
from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs, ledger_count, wait_until
from tests.support import add_jobs, drain_cli, job, statuses

pytestmark = pytest.mark.faults

TABLE = JobTable()


def _runs_recorded(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(
        "SELECT claimed, done, lost, reaped, exit_code FROM drain_runs ORDER BY id"
    )
    names = [column.name for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# -- scenario 3: a stale completion is fenced ---------------------------------------------


def test_stale_completion_after_the_lease_ran_out_touches_nothing(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """The first run's handler outlives its lease; a second run does the job again.

    The lease runs out on the database clock (``locked_until`` moved into the past,
    as time passing would); the first run's keeper would only renew after a third
    of its long lease, so the first run's completion is what meets the fence.
    """
    [stale] = ledger_audit.add_payload_jobs(ledger_conn, [{"wait_for_attempt": 2}])
    first = runs.start("--lease", "120s", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 1, what="the first attempt to start")
    ledger_conn.execute(
        "UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (stale,)
    )

    second = runs.run("--lease", "120s", dsn=dsn)
    first.wait()

    assert second.process.returncode == 0, second.stderr
    assert second.summary()["reaped"] == 1 and second.summary()["done"] == 1
    # the run that lost its jobs exits 1 (exit reason lost), never 0
    assert first.process.returncode == 1, first.stderr
    summary = first.summary()
    assert summary["exit_reason"] == "lost", summary
    assert summary["lost"] == 1 and summary["done"] == 0, summary
    assert "no longer ours" in first.stderr
    assert job(ledger_conn, stale)["status"] == "done"
    assert job(ledger_conn, stale)["attempts"] == 2
    runs_recorded = _runs_recorded(ledger_conn)
    assert sorted(r["lost"] for r in runs_recorded) == [0, 1]
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert [e.attempt for e in audit.executions[stale]] == [1, 2]
    assert all(e.returned_at is not None for e in audit.executions[stale])
    figures("3", variant="lease ran out", stale_completions_rejected=summary["lost"])


def test_run_frozen_past_its_lease_loses_the_job_and_records_nothing(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """A whole run stopped (SIGSTOP: a paused VM, a debugger) past its lease."""
    [frozen, mate] = ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 1.0}, {"sleep": 1.0}])
    first = runs.start("--lease", "2s", "--concurrency", "2", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 2, what="both jobs to start")
    first.send(signal.SIGSTOP)
    try:
        wait_until(
            lambda: (
                job(ledger_conn, frozen)["lease_left"].total_seconds() < 0
                and job(ledger_conn, mate)["lease_left"].total_seconds() < 0
            ),
            timeout=30,
            what="the frozen run's leases to run out",
        )
        second = runs.run("--lease", "2s", "--concurrency", "2", dsn=dsn)
    finally:
        first.send(signal.SIGCONT)
    first.wait()

    assert second.process.returncode == 0, second.stderr
    assert second.summary()["reaped"] == 2 and second.summary()["done"] == 2
    # the run that lost its jobs exits 1 (exit reason lost), never 0
    assert first.process.returncode == 1, first.stderr
    summary = first.summary()
    assert summary["exit_reason"] == "lost", summary
    assert summary["lost"] == 2 and summary["done"] == 0, summary
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": 2}
    for job_id in (frozen, mate):
        # Two tries spent, one per run. The second run runs the reaped jobs (its
        # suspects) one at a time: one it set aside was released, its attempt
        # given back as one more try, and claimed again under a new number.
        row = job(ledger_conn, job_id)
        assert row["attempts"] - (row["max_attempts"] - 5) == 2, row
        assert [e.attempt for e in audit.executions[job_id]] == [1, row["attempts"]]
    figures("3", variant="run frozen", stale_completions_rejected=summary["lost"])


# -- scenario 4: the reaper against a completion in flight ------------------------------------


def _blocked(conn: psycopg.Connection[Any], application_name: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
        "AND wait_event_type = 'Lock'",
        (application_name,),
    ).fetchone()
    return bool(row and row[0])


class _Racer:
    """A statement sent on its own connection from a thread, expected to block on a row lock."""

    def __init__(self, dsn: str, name: str, work: Callable[[psycopg.Connection[Any]], Any]) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, application_name=name)
        self.name = name
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(work,), daemon=True)

    def _run(self, work: Callable[[psycopg.Connection[Any]], Any]) -> None:
        try:
            self.result = work(self.conn)
        except BaseException as exc:
            self.error = exc

    def start_blocked(self, observer: psycopg.Connection[Any]) -> None:
        self.thread.start()
        wait_until(lambda: _blocked(observer, self.name), timeout=10, what=f"{self.name} to block")

    def finish(self) -> Any:
        self.thread.join(10)
        self.conn.close()
        assert not self.thread.is_alive(), f"{self.name} never finished"
        if self.error is not None:
            raise self.error
        return self.result


def _expired_job(conn: psycopg.Connection[Any]) -> Attempt:
    [job_id] = add_jobs(conn, 1, status="running", attempts=1, lease_left=-1)
    return Attempt(job_id, 1)


def _reap_without_waiting(conn: psycopg.Connection[Any]) -> upkeep.ReapOutcome:
    """Reap under a 200 ms lock_timeout: a reaper that waited on a row would be cancelled."""
    conn.execute("SET lock_timeout = '200ms'")
    try:
        return upkeep.reap(conn, TABLE)
    finally:
        conn.execute("RESET lock_timeout")


def test_reaper_passes_over_a_completion_in_flight_and_never_puts_the_job_back(
    dsn: str, ledger_conn: psycopg.Connection[Any]
) -> None:
    late = _expired_job(ledger_conn)
    with psycopg.connect(dsn, autocommit=True) as completer, completer.transaction():
        assert fencing.send_complete(completer, TABLE, [late]).result().owned == {late.id}
        reaped = _reap_without_waiting(ledger_conn)

    assert (reaped.requeued, reaped.failed) == (0, 0)
    assert job(ledger_conn, late.id)["status"] == "done"
    assert upkeep.reap(ledger_conn, TABLE).requeued == 0
    assert job(ledger_conn, late.id)["status"] == "done"


def test_reaper_passes_over_a_row_a_session_keeps_locked_and_reaps_it_once_free(
    dsn: str, ledger_conn: psycopg.Connection[Any]
) -> None:
    """A console left in a transaction (or a frozen process) holds an expired row:
    the reaper takes the other expired rows at once, and that one on a later run."""
    held = _expired_job(ledger_conn)
    others = [_expired_job(ledger_conn) for _ in range(3)]
    with psycopg.connect(dsn, autocommit=True) as console, console.transaction():
        console.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (held.id,))
        assert _reap_without_waiting(ledger_conn) == (3, 0)
        assert job(ledger_conn, held.id)["status"] == "running"
    assert {job(ledger_conn, a.id)["status"] for a in others} == {"queued"}
    assert upkeep.reap(ledger_conn, TABLE) == (1, 0)
    assert job(ledger_conn, held.id)["status"] == "queued"


def test_completion_waiting_on_the_reaper_is_fenced_out(
    dsn: str, ledger_conn: psycopg.Connection[Any]
) -> None:
    late = _expired_job(ledger_conn)
    with psycopg.connect(dsn, autocommit=True) as reaper, reaper.transaction():
        assert upkeep.reap(reaper, TABLE).requeued == 1
        completer = _Racer(
            dsn,
            "fault-completer",
            lambda conn: fencing.send_complete(conn, TABLE, [late]).result(),
        )
        completer.start_blocked(ledger_conn)
    fenced = completer.finish()

    assert fenced.owned == frozenset() and fenced.lost == (late.id,)
    row = job(ledger_conn, late.id)
    assert (row["status"], row["attempts"]) == ("queued", 1)
    claimed = claims.send_claim(ledger_conn, TABLE, "default", 10).result()
    assert [(j.id, j.attempt) for j in claimed.jobs] == [(late.id, 2)]
    assert fencing.send_complete(ledger_conn, TABLE, [late]).result().lost == (late.id,)
    assert fencing.send_complete(ledger_conn, TABLE, claimed.jobs).result().owned == {late.id}


def test_a_run_whose_reaper_meets_a_row_held_open_drains_the_rest_within_its_budget(
    dsn: str, ledger_conn: psycopg.Connection[Any], figures: Figures
) -> None:
    """A session idle in a transaction on an expired running row (a console, a
    frozen process) does not hold a run at its first statement: the run drains
    the other jobs, ends inside its budget, and the next run reaps the row."""
    held = _expired_job(ledger_conn)
    add_jobs(ledger_conn, 20)
    fast = ("--handler", "run_app:nothing", "--max-seconds", "5", "--json")
    with psycopg.connect(dsn, autocommit=True) as console, console.transaction():
        console.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (held.id,))
        # a run that waited for the row would never end: drain_cli times out
        first = drain_cli("run", *fast, dsn=dsn, timeout=30)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["done"], summary["reaped"], summary["exit_reason"]) == (20, 0, "drained")
    assert summary["seconds"] < 5, summary
    second = drain_cli("run", *fast, dsn=dsn, timeout=30)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["reaped"] == 1
    assert statuses(ledger_conn) == {"done": 21}
    figures("4", variant="a row held open by a console", run_seconds=summary["seconds"])


@pytest.mark.parametrize("outcome", ["retry", "permanent", "extend"])
def test_reaper_meeting_a_fail_or_an_extension_in_flight_leaves_the_row_alone(
    dsn: str, ledger_conn: psycopg.Connection[Any], outcome: str
) -> None:
    late = _expired_job(ledger_conn)
    with psycopg.connect(dsn, autocommit=True) as owner, owner.transaction():
        if outcome == "extend":
            assert fencing.extend(owner, TABLE, [late], 60).owned == {late.id}
        else:
            failure = fencing.Failure(late, "boom", permanent=outcome == "permanent")
            assert fencing.send_fail(owner, TABLE, [failure]).result().lost == ()
        reaped = _reap_without_waiting(ledger_conn)

    assert (reaped.requeued, reaped.failed) == (0, 0)
    row = job(ledger_conn, late.id)
    expected = {"retry": "queued", "permanent": "failed", "extend": "running"}[outcome]
    assert row["status"] == expected
    assert row["attempts"] == 1
    if outcome == "retry":
        assert row["run_in"].total_seconds() > 0, "a retry must wait for its backoff"
    if outcome == "extend":
        assert row["lease_left"].total_seconds() > 30


def test_a_repeated_fenced_statement_never_takes_the_reapers_outcome_for_its_own(
    ledger_conn: psycopg.Connection[Any],
) -> None:
    """After a lost reply the runner asks ``confirm_outcomes`` whether its attempt
    finished the job: a job the reaper requeued or failed at that attempt did not."""
    [requeued] = add_jobs(ledger_conn, 1, status="running", attempts=1, lease_left=-1)
    [failed] = add_jobs(ledger_conn, 1, status="running", attempts=1, max_attempts=1, lease_left=-1)
    late = [Attempt(requeued, 1), Attempt(failed, 1)]
    assert upkeep.reap(ledger_conn, TABLE) == upkeep.ReapOutcome(requeued=1, failed=1)
    assert fencing.send_complete(ledger_conn, TABLE, late).result().lost == (requeued, failed)
    assert fencing.confirm_outcomes(ledger_conn, TABLE, late) == {}

    [finished] = add_jobs(ledger_conn, 1, queue="other")
    claimed = claims.send_claim(ledger_conn, TABLE, "other", 1).result().jobs
    assert fencing.send_complete(ledger_conn, TABLE, claimed).result().owned == {finished}
    assert fencing.confirm_outcomes(ledger_conn, TABLE, claimed) == {finished: "done"}


# -- scenario 5: a CPU-bound handler outlives its lease several times ------------------------


def test_cpu_bound_handler_keeps_its_lease_for_three_leases(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """Two handlers spin for three leases; two more jobs, claimed with them, wait as
    long behind them. A rival reaps all along, and a second run starts meanwhile."""
    lease = 1.0
    spinning = ledger_audit.add_payload_jobs(ledger_conn, [{"spin": 3 * lease}] * 2)
    waiting = ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(2)])
    run = runs.start("--lease", f"{lease}s", "--concurrency", "2", dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) == 2, what="both handlers to start")
    rival = runs.start("--lease", f"{lease}s", dsn=dsn)

    leases_seen: dict[int, set[Any]] = {job_id: set() for job_id in spinning + waiting}
    rival_reaped = 0
    while run.poll() is None:
        rival_reaped += upkeep.reap(ledger_conn, TABLE).requeued
        rows = ledger_conn.execute(
            "SELECT id, locked_until FROM jobs WHERE status = 'running'"
        ).fetchall()
        for job_id, locked_until in rows:
            leases_seen[job_id].add(locked_until)
        time.sleep(0.1)
    rival.wait()

    assert run.process.returncode == 0, run.stderr
    summary = run.summary()
    assert (summary["done"], summary["lost"]) == (4, 0), summary
    assert rival_reaped == 0, "the reaper took a job whose run still held it"
    assert (rival.summary()["reaped"], rival.summary()["claimed"]) == (0, 0), rival.summary()
    # Outliving three leases takes at least three extensions of each job.
    extensions = min(len(seen) - 1 for seen in leases_seen.values())
    assert extensions >= 3, f"only {extensions} extensions over three leases"
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    for job_id in spinning + waiting:
        assert len(audit.executions[job_id]) == 1
        assert job(ledger_conn, job_id)["attempts"] == 1
    figures("5", lease_s=lease, handler_s=3 * lease, extensions_seen=extensions)


def test_lease_keeper_descheduled_mid_extension_counts_nothing_lost(
    dsn: str, ledger_conn: psycopg.Connection[Any]
) -> None:
    """The keeper reads its list of jobs to extend, then loses the CPU (a starved
    process) while those jobs finish and are completed; its late extension finds
    them done, which is not a loss. Run in-process so the delay lands exactly there."""
    lease, handler_seconds, descheduled = 1.5, 1.0, 0.5
    ids = add_jobs(ledger_conn, 4)
    config = RunConfig(connect=ConnectOptions(dsn=dsn), lease=lease, concurrency=4, max_seconds=60)
    runner = Runner(config, {"default": lambda job: time.sleep(handler_seconds)})
    read_list = runner.board.owned
    stalls: list[float] = []

    # the keeper renews a tick (a twelfth of a lease) before a third has gone by
    due_after = lease / 3 - lease / 12

    def owned_then_descheduled() -> list[tuple[Any, float]]:
        listed = read_list()
        now = time.monotonic()
        if any(now - leased_at >= due_after for _, leased_at in listed) and not stalls:
            stalls.append(now)
            time.sleep(descheduled)
        return listed

    runner.board.owned = owned_then_descheduled  # type: ignore[method-assign]
    summary = runner.run()

    assert stalls, "the keeper never got to extend while the jobs worked"
    assert (summary.done, summary.lost) == (4, 0), summary
    assert all(job(ledger_conn, job_id)["status"] == "done" for job_id in ids)
