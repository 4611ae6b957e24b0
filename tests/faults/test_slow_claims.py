"""Scenarios of claims the server makes slow or gives up on, and of runs that leave
work behind: the leases a slow claim hands out, outcomes that ride with a claim
that times out, and the exit code of a run that abandoned or released jobs.

The slow claim is made on purpose by a trigger that sleeps while the claim leases
its first row. A sequence (not rolled back with a cancelled claim) picks which
claims sleep, so a claim that the run gives up on and sends again does not sleep
a second time.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs, ledger_count
from tests.faults.support.roles import login_role
from tests.support import REPO, statuses

pytestmark = pytest.mark.faults

# Claims whose number (1, 2, ...) the sequence picks sleep {seconds} while
# leasing their first row; {every} picks every n-th claim, {first_only} the first.
SLOW_CLAIMS = """
CREATE SEQUENCE slow_claims;
CREATE FUNCTION slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'queued' AND NEW.status = 'running'
       AND current_setting('fault.claim_seen', true) IS DISTINCT FROM 'yes' THEN
        PERFORM set_config('fault.claim_seen', 'yes', true);
        IF nextval('slow_claims') % {every} = {pick} THEN
            PERFORM pg_sleep({seconds});
        END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER slow_claim BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION slow_claim();
"""


def _slow_claims(conn: psycopg.Connection[Any], *, seconds: float, every: int, pick: int) -> None:
    conn.execute(
        sql.SQL(SLOW_CLAIMS).format(
            seconds=sql.Literal(seconds), every=sql.Literal(every), pick=sql.Literal(pick)
        )
    )


def _overlapping(conn: psycopg.Connection[Any]) -> int:
    """Pairs of executions of one job that were running at the same time."""
    return sum(map(ledger_audit.overlapping_pairs, ledger_audit.executions(conn).values()))


# What was left of each job's lease (on the database clock) when its handler
# started: the ledger row the handler writes first is the moment it started.
LEASE_AT_START = """
CREATE TABLE lease_at_start (job_id bigint, attempt int, seconds_left double precision);
CREATE FUNCTION note_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lease_at_start
    SELECT NEW.job_id, NEW.attempt, extract(epoch FROM locked_until - clock_timestamp())
    FROM jobs WHERE id = NEW.job_id;
    RETURN NEW;
END $$;
CREATE TRIGGER note_lease BEFORE INSERT ON fault_ledger
    FOR EACH ROW EXECUTE FUNCTION note_lease();
"""


@pytest.mark.parametrize("which", ["first", "second"])
def test_a_claim_slower_than_the_lease_hands_out_no_expired_lease(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures, which: str
) -> None:
    """One claim of a run takes one and a half leases. Leases counted from the
    claim's start would be gone when it returns, and any run's reaper could take
    the jobs while this one runs them; a claim holding the connection that long
    would also hold up the renewals of the jobs the run already has. Every job
    must start with a third of its lease ahead of it at least (a job whose lease
    was last renewed two thirds of a lease ago is never started). The first
    claim (no lease held yet) is renewed before its jobs start; the second (while
    the first claim's jobs wait and work) is given up at its time limit and sent
    again."""
    lease, jobs = 2.0, 16
    _slow_claims(
        ledger_conn, seconds=lease * 1.5, every=1_000_000, pick=1 if which == "first" else 2
    )
    ledger_conn.execute(LEASE_AT_START)
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 0.2} for _ in range(jobs)])
    run = runs.run("--lease", f"{lease}s", "--max-seconds", "60", dsn=dsn)
    assert run.process.returncode == 0, run.stderr
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    row = ledger_conn.execute("SELECT min(seconds_left), count(*) FROM lease_at_start").fetchone()
    assert row is not None
    least_left, started = row
    figures(
        "slow claim",
        variant=f"the {which} claim",
        lease_s=lease,
        claim_sleep_s=lease * 1.5,
        least_lease_left_at_start_s=round(least_left, 3),
        executions_overlapping=_overlapping(ledger_conn),
    )
    assert started == jobs
    assert least_left > lease / 3
    assert audit.executed_more_than_once == {}
    assert audit.statuses == {"done": jobs}
    if which == "second":  # the slow claim was given up, then sent again
        assert "statement timeout" in run.stderr


def test_outcomes_survive_a_claim_that_hits_the_roles_statement_timeout(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """A role with a 50 ms statement_timeout; every third claim takes 200 ms. The
    completions sent with a timed-out claim stay recorded, the run goes on with
    smaller claims, and no job runs twice."""
    _slow_claims(ledger_conn, seconds=0.2, every=3, pick=0)
    jobs = 120
    ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(jobs)])
    with login_role(dsn, "timeout-secret") as role:
        name = sql.Identifier(role.name)
        for statement in (
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}",
            "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {}",
            "ALTER ROLE {} SET statement_timeout = '50ms'",
        ):
            ledger_conn.execute(sql.SQL(statement).format(name))
        run = runs.run("--max-seconds", "60", dsn=role.dsn(), ledger_dsn=dsn)
    summary = run.summary()
    audit = ledger_audit.audit(ledger_conn)
    figures(
        "claim timeout",
        role_statement_timeout_ms=50,
        jobs=jobs,
        exit_code=run.process.returncode,
        executed_more_than_once=len(audit.executed_more_than_once),
    )
    assert run.process.returncode == 0, run.stderr
    assert "lost the connection" not in run.stderr
    assert "statement timeout" in run.stderr
    audit.assert_ok()
    assert audit.executed_more_than_once == {}
    assert audit.statuses == {"done": jobs}
    assert summary["done"] == jobs
    assert ledger_count(ledger_conn, returned=True) == jobs


def test_a_run_that_left_a_job_working_exits_3(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """A handler outlives the budget and the grace: its lease is cut, and the run
    says work is left (exit 3), whatever the queue looks like otherwise."""
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 8}])
    run = runs.run("--max-seconds", "1.5", "--grace-seconds", "0.5", dsn=dsn)
    summary = run.summary()
    figures("abandoned job", exit_code=run.process.returncode, abandoned=summary["abandoned"])
    assert summary["abandoned"] == 1
    assert run.process.returncode == 3, run.stderr
    assert summary["exit_reason"] == "budget"
    assert {"code": "leases_cut", "figures": {"count": 1}} in summary["notes"]


FAILING_RELEASE = """
CREATE FUNCTION refuse_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'running' AND NEW.status = 'queued' AND NEW.last_error IS NULL THEN
        RAISE EXCEPTION 'release refused by the test';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_release BEFORE UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION refuse_release();
"""


def test_a_failed_statement_on_the_stop_path_is_an_error_not_drained(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs
) -> None:
    """The budget ends with jobs claimed but not started; their release fails. The
    run must say error (exit 1) and skip maintenance, even though no job is left
    ready (the unreleased ones are still running)."""
    ledger_conn.execute(FAILING_RELEASE)
    ledger_audit.add_payload_jobs(ledger_conn, [{"sleep": 1.5} for _ in range(5)])
    run = runs.run("--max-seconds", "1", "--grace-seconds", "3", "--lease", "30s", dsn=dsn)
    summary = run.summary()
    assert run.process.returncode == 1, run.stderr
    assert summary["exit_reason"] == "error"
    assert "release refused by the test" in (summary["error"] or "")
    assert summary["archived"] == 0 and not summary["vacuumed"]


# Peak memory of one command, read from the kernel's account of a wrapper's child.
PEAK_RSS = (
    "import resource, subprocess, sys; "
    "code = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
    "sys.exit(code)"
)


def test_memory_follows_decoded_payloads_not_stored_ones(
    dsn: str, ledger_conn: psycopg.Connection[Any], figures: Figures
) -> None:
    """Payloads of 4 MB that compress to a few KB: the claim's caps count what the
    run will hold (the decoded text), so peak memory stays near the 16 MB claim cap
    however small the rows are on disk."""
    jobs, size = 60, 4 * 1024 * 1024
    ledger_conn.execute(
        "INSERT INTO jobs (payload) SELECT jsonb_build_object('blob', repeat('x', %s)) "
        "FROM generate_series(1, %s)",
        (size, jobs),
    )
    stored = ledger_conn.execute("SELECT max(pg_column_size(payload)) FROM jobs").fetchone()
    assert stored is not None and stored[0] < size // 50  # compressed on disk
    command = [sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "drain", "run"]
    command += ["--handler", "tests.apps.demo_handlers:ok", "--json", "--dsn", dsn]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    peak_mb = int(result.stdout.strip().splitlines()[-1]) / 1024
    figures("large payloads", jobs=jobs, payload_mb=size >> 20, peak_rss_mb=round(peak_mb, 1))
    assert statuses(ledger_conn) == {"done": jobs}
    assert peak_mb < 200, f"peak memory {peak_mb:.0f} MB"
