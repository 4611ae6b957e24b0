"""Scenarios 14 and 15: a worker role with a tight ``statement_timeout``, and a
worker role with nothing but the grants ``drain init --print-grants`` prints.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql

from drain.core.table import JobTable
from drain.store import claims, fencing, schema, upkeep
from drain.store.sqlfiles import statement_for
from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs
from tests.faults.support.roles import Role, login_role
from tests.support import add_jobs, drain_cli, statuses

pytestmark = pytest.mark.faults

TABLE = JobTable()
PASSWORD = "worker-secret"
WEEK_AND_A_DAY = 8 * 86400.0

# Archiving costs a fixed time a row on top of the real work (a slow disk), so a
# batch's cost grows with its size on any machine, and moving every row in one batch
# takes longer than the role's 1s timeout allows. Every committed batch's size is
# written down, so the test can see the batches the run settled on.
ALL_ROWS_SECONDS = 1.5
SLOW_ARCHIVE = """
CREATE TABLE archive_batches (size bigint NOT NULL);
CREATE FUNCTION slow_archive() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    moved bigint;
BEGIN
    SELECT count(*) INTO moved FROM new_rows;
    PERFORM pg_sleep(moved * {per_row});
    INSERT INTO archive_batches (size) VALUES (moved);
    RETURN NULL;
END $$;
CREATE TRIGGER slow_archive AFTER INSERT ON jobs_archive
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION slow_archive();
"""


def _grant_printed(conn: psycopg.Connection[Any], role: Role) -> str:
    printed = drain_cli("init", "--print-grants", role.name)
    assert printed.returncode == 0, printed.stderr
    conn.execute(printed.stdout.encode())
    return printed.stdout


# -- scenario 14: statement_timeout on the role ---------------------------------------------


def test_statement_timeout_on_the_role_archives_in_smaller_batches_and_claims_go_on(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, soak: bool, figures: Figures
) -> None:
    done_rows = 1_000_000 if soak else 100_000
    add_jobs(ledger_conn, done_rows, status="done", attempts=1, created_ago=WEEK_AND_A_DAY)
    ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(100)])
    ledger_conn.execute(
        sql.SQL(SLOW_ARCHIVE).format(per_row=sql.Literal(ALL_ROWS_SECONDS / done_rows))
    )
    with login_role(dsn, PASSWORD) as role:
        printed = _grant_printed(ledger_conn, role)
        archive_grants = [
            line.removeprefix("-- ") for line in printed.splitlines() if line.startswith("-- GRANT")
        ]
        ledger_conn.execute("\n".join(archive_grants).encode())
        name = sql.Identifier(role.name)
        ledger_conn.execute(sql.SQL("GRANT INSERT ON archive_batches TO {}").format(name))
        database = sql.Identifier(str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]))
        ledger_conn.execute(
            sql.SQL("ALTER ROLE {} IN DATABASE {} SET statement_timeout = '1s'").format(
                name, database
            )
        )
        oid = ledger_conn.execute("SELECT 'jobs'::regclass::oid").fetchone()
        assert oid is not None
        # One batch of every row cannot finish within the role's timeout.
        with role.connect() as worker, pytest.raises(errors.QueryCanceled):
            worker.execute(
                statement_for(TABLE, "archive_move"),
                {
                    "older_than": timedelta(days=7),
                    "limit": done_rows,
                    "table_oid": oid[0],
                    "ids": None,
                    "skip": "{}",
                },
            )

        run = runs.run(
            "--archive-batch",
            str(done_rows),
            "--concurrency",
            "4",
            "--vacuum",
            "off",
            dsn=role.dsn(),
            ledger_dsn=dsn,
        )

    assert run.process.returncode == 0, run.stderr
    summary = run.summary()
    assert summary["archived"] == done_rows, summary
    assert (summary["done"], summary["claimed"]) == (100, 100), "claims were affected"
    batches = [row[0] for row in ledger_conn.execute("SELECT size FROM archive_batches")]
    assert sum(batches) == done_rows and max(batches) < done_rows, batches[:5]
    assert statuses(ledger_conn) == {"done": 100}
    assert ledger_conn.execute("SELECT count(*) FROM jobs_archive").fetchone() == (done_rows,)
    ledger_audit.audit(ledger_conn).assert_ok()
    figures(
        "14",
        done_rows=done_rows,
        archived=summary["archived"],
        batches=len(batches),
        largest_batch=max(batches),
        claims_done=summary["done"],
    )


# -- scenario 15: a least-privilege worker role ---------------------------------------------


def test_worker_role_with_only_the_printed_grants_runs_and_can_do_nothing_else(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ids = ledger_audit.add_payload_jobs(ledger_conn, [{"n": n} for n in range(20)])
    ledger_audit.add_payload_jobs(ledger_conn, [{"fault": "raise"}], max_attempts=1)
    with login_role(dsn, PASSWORD) as role:
        _grant_printed(ledger_conn, role)
        run = runs.run("--concurrency", "4", dsn=role.dsn(), ledger_dsn=dsn)
        with role.connect() as worker:
            _every_statement_works(ledger_conn, worker)
            refused = _forbidden(worker, ids[0])

    assert run.process.returncode == 0, run.stderr
    summary = run.summary()
    assert (summary["done"], summary["failed"]) == (20, 1), summary
    # The step refused and the grants it needs, as drain init --print-grants prints them.
    assert (
        "archiving skipped (permission denied for table jobs): archiving needs DELETE on "
        "public.jobs and INSERT on public.jobs_archive (see drain init --print-grants ROLE)"
    ) in run.stderr, run.stderr
    assert "maintenance skipped" not in run.stderr
    assert ledger_conn.execute("SELECT count(*) FROM drain_runs").fetchone() == (1,)
    assert refused == {
        "update payload": True,
        "delete": True,
        "insert": True,
        "alter table": True,
        "drop table": True,
        "truncate": True,
        "create table": True,
    }
    figures("15", done=summary["done"], refused=sorted(refused))


def _every_statement_works(admin: psycopg.Connection[Any], worker: psycopg.Connection[Any]) -> None:
    """Each statement a run sends, sent by hand as the worker role."""
    add_jobs(admin, 5, queue="direct")
    [expired] = add_jobs(admin, 1, queue="direct", status="running", attempts=1, lease_left=-1)
    assert schema.inspect(worker, TABLE).jobs_exists
    assert upkeep.reap(worker, TABLE).requeued == 1
    # the reaped row is marked, so a claim leases it alone, after the five before it
    claimed = claims.send_claim(worker, TABLE, "direct", 10, lease=60).result().jobs
    marked = claims.send_claim(worker, TABLE, "direct", 10, lease=60).result()
    assert len(claimed) == 5 and [j.id for j in marked.jobs] == [expired]
    claimed += marked.jobs
    assert fencing.extend(worker, TABLE, claimed, 120).owned == {j.id for j in claimed}
    done, retry, give_up, snooze, release, _ = claimed
    assert fencing.send_complete(worker, TABLE, [done]).result().owned == {done.id}
    assert fencing.send_fail(worker, TABLE, [fencing.Failure(retry, "boom")]).result().retried == (
        retry.id,
    )
    assert fencing.send_fail(
        worker, TABLE, [fencing.Failure(give_up, "boom", True)]
    ).result().failed == (give_up.id,)
    assert fencing.send_snooze(
        worker, TABLE, [fencing.Snooze(snooze, delay=60)]
    ).result().owned == {snooze.id}
    assert fencing.release(worker, TABLE, [release]).owned == {release.id}
    assert upkeep.ready_left(worker, TABLE, ["direct"])


def _forbidden(worker: psycopg.Connection[Any], job_id: int) -> dict[str, bool]:
    attempts = {
        "update payload": ("UPDATE jobs SET payload = '{}' WHERE id = %s", (job_id,)),
        "delete": ("DELETE FROM jobs WHERE id = %s", (job_id,)),
        # a worker may insert the four columns a recurring job's fire writes, no more
        "insert": ("INSERT INTO jobs (payload, status) VALUES ('{}', 'done')", None),
        "alter table": ("ALTER TABLE jobs ADD COLUMN evil int", None),
        "drop table": ("DROP TABLE jobs", None),
        "truncate": ("TRUNCATE jobs", None),
        "create table": ("CREATE TABLE public.evil (id int)", None),
    }
    refused = {}
    for name, (statement, params) in attempts.items():
        try:
            worker.execute(statement.encode(), params)
            refused[name] = False
        except errors.InsufficientPrivilege:
            refused[name] = True
    return refused
