"""Scenarios 7, 8 and 9: the run's own connection killed, the server restarted, the
server turned read-only, each in the middle of a run.

The run reconnects and goes on (every statement it repeats is fenced or
idempotent) or stops cleanly with one line on stderr; either way nothing is lost,
and a later run (after the lease) finishes whatever was left.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from tests.faults.conftest import Figures, OwnedServer
from tests.faults.support import ledger_audit
from tests.faults.support.cutter import ReplyCutter
from tests.faults.support.processes import Run, Runs, connected, ledger_count, wait_until
from tests.support import REPO

pytestmark = pytest.mark.faults

LEASE = "2s"


def _clean_exit(run: Run) -> int:
    """The run ended with 0, or with 1 and one clear error line: never a traceback."""
    code = run.process.returncode
    assert code in (0, 1), f"exit {code}\n{run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    if code == 1:
        assert "drain: error: " in run.stderr, run.stderr
    return code


def _finish_and_audit(runs: Runs, dsn: str, jobs: int) -> ledger_audit.Audit:
    """One lease later, one more run finishes what the disturbed run left; then audit."""
    time.sleep(2.5)
    with connected(dsn) as conn:
        _, audit = runs.finish(
            "--concurrency", "4", "--lease", LEASE, dsn=dsn, ledger_conn=conn, done=jobs
        )
    return audit


# -- scenario 7: the run's backend terminated ---------------------------------------------


@pytest.mark.parametrize("moment", ["return", "start"])
def test_backend_terminated_around_a_claim_or_a_completion_loses_nothing(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, moment: str, figures: Figures
) -> None:
    """``return``: between a handler's return and its completion; ``start``: right after
    the claim that brought the job."""
    ids = ledger_audit.add_payload_jobs(
        ledger_conn, [{"terminate_runner": moment}] + [{"n": 1}] * 9
    )
    run = runs.run("--batch-size", "10", "--lease", "30s", dsn=dsn)

    assert run.process.returncode == 0, run.stderr
    assert "reconnecting" in run.stderr, "the backend was never lost"
    summary = run.summary()
    assert (summary["done"], summary["lost"]) == (10, 0), summary
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": 10}
    assert all(len(audit.executions[job_id]) == 1 for job_id in ids)
    figures("7", variant=f"terminated at handler {moment}", lost=0, exit_code=0)


def test_backend_terminated_again_and_again_ends_cleanly_and_loses_nothing(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 0.1}] * 60)
    run = runs.start("--concurrency", "2", "--batch-size", "10", "--lease", LEASE, dsn=dsn)
    wait_until(lambda: ledger_count(ledger_conn) >= 2, what="the run to start working")
    terminated = 0
    until = time.monotonic() + 2
    while time.monotonic() < until and run.poll() is None:
        row = ledger_conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'drain'"
        ).fetchone()
        terminated += row[0] if row else 0
        time.sleep(0.1)
    run.wait()

    code = _clean_exit(run)
    assert terminated >= 2, f"the test killed the run's backend {terminated} times\n{run.stderr}"
    _finish_and_audit(runs, dsn, 60)
    figures("7", variant="terminated repeatedly", backends_killed=terminated, exit_code=code)


def _through_cutter(dsn: str, cutter: ReplyCutter) -> str:
    params = conninfo.conninfo_to_dict(dsn)
    params.update(host="127.0.0.1", port=str(cutter.port), sslmode="disable")
    return conninfo.make_conninfo("", **params)


# Text only the claim sends, plain or by priority (test_the_claim_marker_names_the_claim_alone
# checks it):
# FOR UPDATE SKIP LOCKED is in the archive's statements too, and a claim that lost
# it would have let the cut fall on the archive at the end of the run.
CLAIM_MARKER = b"locked_until IS NOT NULL AS suspect"


def test_the_claim_marker_names_the_claim_alone() -> None:
    statements = sorted((REPO / "sql").glob("*.sql"))
    marked = [path.name for path in statements if CLAIM_MARKER in path.read_bytes()]
    assert marked == ["claim.sql", "claim_priority.sql"]  # the claim, and its by-priority form


def _run_losing_one_reply(
    dsn: str, conn: psycopg.Connection[Any], runs: Runs, statement: bytes
) -> Run:
    """A run whose ``statement`` (with the others in its round trip) commits, and whose
    reply never comes back."""
    params = conninfo.conninfo_to_dict(dsn)
    cutter = ReplyCutter((str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)))
    try:
        run = runs.start(
            "--pooler",
            "--batch-size",
            "10",
            "--lease",
            LEASE,
            dsn=_through_cutter(dsn, cutter),
            ledger_dsn=dsn,
        )
        wait_until(lambda: ledger_count(conn) >= 3, what="the run to start working")
        cutter.arm(statement)
        run.wait()
    finally:
        cutter.close()
    assert cutter.cuts == 1, "no reply was lost"
    return run


def test_reply_lost_after_a_claim_committed_loses_no_job(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """The claim (and the completions riding with it) commit; the reply never arrives.

    The run reconnects and repeats: the repeated claim takes other jobs, and the
    jobs of the lost reply stay leased to nobody until their lease runs out, when
    the next run reaps them. No job is lost, none runs twice.
    """
    ids = ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 0.05}] * 30)
    run = _run_losing_one_reply(dsn, ledger_conn, runs, CLAIM_MARKER)

    assert _clean_exit(run) == 0
    assert "reconnecting" in run.stderr
    stranded = ledger_conn.execute("SELECT count(*) FROM jobs WHERE status = 'running'").fetchone()
    audit = _finish_and_audit(runs, dsn, 30)
    assert all(len(audit.executions[job_id]) == 1 for job_id in ids)
    figures(
        "7",
        variant="reply lost after a claim committed",
        lost=30 - audit.count("done"),
        exit_code=0,
        stranded_until_lease=stranded[0] if stranded else 0,
    )


def test_reply_lost_after_completions_committed_is_not_counted_as_lost(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 0.05}] * 30)
    run = _run_losing_one_reply(dsn, ledger_conn, runs, b"SET status = 'done'")

    summary = run.summary()
    recorded = ledger_conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()
    assert (summary["lost"], summary["done"]) == (0, recorded[0] if recorded else 0), summary


# -- scenario 8: the server restarted -----------------------------------------------------


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_server_restart_mid_run_loses_nothing(
    owned_server: OwnedServer, owned_dsn: str, runs: Runs, mode: str, figures: Figures
) -> None:
    with connected(owned_dsn) as conn:
        ledger_audit.add_payload_jobs(conn, [{"sleep": 0.1}] * 30)
        run = runs.start(
            "--concurrency", "2", "--batch-size", "10", "--lease", LEASE, dsn=owned_dsn
        )
        wait_until(lambda: ledger_count(conn) >= 4, what="the run to start working")
    owned_server.restart(mode)
    run.wait()

    code = _clean_exit(run)
    audit = _finish_and_audit(runs, owned_dsn, 30)
    figures(
        "8",
        variant=f"pg_ctl restart -m {mode}",
        lost=30 - audit.count("done"),
        exit_code=code,
        executed_more_than_once=len(audit.executed_more_than_once),
    )


def test_server_down_longer_than_the_connect_retry_ends_the_run_cleanly(
    owned_server: OwnedServer, owned_dsn: str, runs: Runs, figures: Figures
) -> None:
    with connected(owned_dsn) as conn:
        ledger_audit.add_payload_jobs(conn, [{"sleep": 0.1}] * 30)
        run = runs.start(
            "--concurrency",
            "2",
            "--batch-size",
            "10",
            "--lease",
            LEASE,
            "--connect-retry",
            "0.5s",
            dsn=owned_dsn,
        )
        wait_until(lambda: ledger_count(conn) >= 4, what="the run to start working")
    owned_server.server.stop("fast")
    try:
        run.wait()
    finally:
        owned_server.server.start()

    assert run.process.returncode == 1, run.stderr
    assert _clean_exit(run) == 1
    assert "could not reconnect" in run.stderr or "cannot connect" in run.stderr, run.stderr
    audit = _finish_and_audit(runs, owned_dsn, 30)
    figures(
        "8",
        variant="server down past the connect retry",
        lost=30 - audit.count("done"),
        exit_code=1,
        executed_more_than_once=len(audit.executed_more_than_once),
    )


def test_server_restart_keeps_the_max_runners_limit(
    owned_server: OwnedServer, owned_dsn: str, runs: Runs
) -> None:
    options = ("--max-runners", "1", "--concurrency", "2", "--batch-size", "10", "--lease", LEASE)
    with connected(owned_dsn) as conn:
        ledger_audit.add_payload_jobs(conn, [{"sleep": 0.05}] * 200)
        first = runs.start(*options, dsn=owned_dsn)
        wait_until(lambda: ledger_count(conn) >= 4, what="the first run to start working")
    owned_server.restart("fast")
    with connected(owned_dsn) as conn:
        wait_until(lambda: ledger_count(conn) >= 20, what="the first run to work again")
    second = runs.run(*options, dsn=owned_dsn)
    still_working = first.poll() is None
    first.wait()

    assert still_working, "the first run ended before the second started"
    assert second.summary()["exit_reason"] == "runners-busy", second.summary()


# -- scenario 9: a read-only server -----------------------------------------------------


def test_read_only_database_stops_the_run_before_it_marks_anything(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"n": 1}] * 5)
    name = str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])
    database = sql.Identifier(name)
    before = ledger_conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    ledger_conn.execute(
        sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(database)
    )
    try:
        run = runs.run("--lease", LEASE, dsn=dsn)
    finally:
        ledger_conn.execute(sql.SQL("ALTER DATABASE {} RESET ALL").format(database))

    assert run.process.returncode == 1, run.stderr
    assert "drain: error: the server is read-only" in run.stderr
    assert "Traceback" not in run.stderr
    assert ledger_conn.execute("SELECT * FROM jobs ORDER BY id").fetchall() == before
    assert ledger_conn.execute("SELECT count(*) FROM drain_runs").fetchone() == (0,)
    assert ledger_count(ledger_conn) == 0

    again = runs.run("--lease", LEASE, dsn=dsn)
    assert again.process.returncode == 0, again.stderr
    assert again.summary()["done"] == 5
    figures("9", variant="read-only from the start", lost=0, exit_code=1, marked=0)


def test_server_turning_read_only_mid_run_stops_it_at_once(
    owned_server: OwnedServer, owned_dsn: str, runs: Runs, figures: Figures
) -> None:
    with connected(owned_dsn) as conn:
        ledger_audit.add_payload_jobs(conn, [{"sleep": 0.1}] * 30)
        run = runs.start(
            "--concurrency", "2", "--batch-size", "10", "--lease", LEASE, dsn=owned_dsn
        )
        wait_until(lambda: ledger_count(conn) >= 4, what="the run to start working")
        with connected(owned_server.admin_dsn) as admin:
            admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            admin.execute("SELECT pg_reload_conf()")
            turned = time.monotonic()
            try:
                run.wait()
                took = time.monotonic() - turned
            finally:
                admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
                admin.execute("SELECT pg_reload_conf()")

    assert run.process.returncode == 1, run.stderr
    assert "read-only" in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert took < 10, f"the run went on for {took:.1f}s on a read-only server"
    audit = _finish_and_audit(runs, owned_dsn, 30)
    figures("9", variant="read-only mid-run", lost=30 - audit.count("done"), exit_code=1)
