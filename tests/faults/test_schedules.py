"""Recurring jobs under real concurrency: many runs firing the same schedules at once.

Every scenario counts what was enqueued against what croniter says was due: one
job per (schedule, fire), never two, and every job done exactly once (the ledger).
The schedules' fires all lie in a month that ended at least a month ago (days
1..k at midnight UTC, the cron restricted to that month), so no new fire can come
due while a scenario runs and the expected set is exact.

Runs are made to overlap with a barrier, not with timing: either the test holds
an ACCESS EXCLUSIVE lock on drain_schedules until every run's first read of it is
waiting on that lock, or (where a tight statement_timeout would cancel such a
wait) each run's interpreter has drain imported and waits for a start file.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from croniter import croniter
from psycopg import sql

from drain.store import recurring
from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import HANDLER, Run, Runs, environment, wait_until
from tests.faults.support.roles import login_role
from tests.support import REPO, drain_cli

pytestmark = pytest.mark.faults

RUNNERS = 8
SCHEDULES = 100
RUN_ARGS = ("run", "--handler", HANDLER, "--json", "--concurrency", "4")


# -- the schedules ----------------------------------------------------------------------------


def past_month(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(year, month) of the month two before the database's current one."""
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    month = (now.month - 3) % 12 + 1
    return (now.year if month < now.month else now.year - 1), month


def add_schedules(
    conn: psycopg.Connection[Any], count: int, *, payload_extra: dict[str, Any] | None = None
) -> dict[str, list[datetime]]:
    """``count`` schedules, half ``latest`` and half ``all``, each with 2..9 fires missed
    (days 1..k of a past month); returns every schedule's missed fires, by croniter."""
    year, month = past_month(conn)
    first = datetime(year, month, 1, tzinfo=UTC)
    missed: dict[str, list[datetime]] = {}
    with conn.transaction():
        for n in range(count):
            name = f"s{n:03d}"
            days = 2 + n % 8
            expression = f"0 0 1-{days} {month} *"
            recurring.schedule(
                conn,
                name,
                expression,
                "default",
                {"schedule": name, **(payload_extra or {})},
                catch_up="latest" if n % 2 == 0 else "all",
            )
            missed[name] = fires_from(expression, first, days)
        conn.execute("UPDATE drain_schedules SET next_fire = %s", (first,))
    return missed


def fires_from(expression: str, first: datetime, count: int) -> list[datetime]:
    iterator = croniter(expression, first - timedelta(seconds=1))
    found = [iterator.get_next(datetime) for _ in range(count)]
    assert found[-1] < first + timedelta(days=count), found
    return found


def expected_jobs(
    conn: psycopg.Connection[Any], missed: dict[str, list[datetime]]
) -> dict[str, list[datetime]]:
    """What drain promises for each schedule: the latest fire, or every one."""
    policies = dict(conn.execute("SELECT name, catch_up FROM drain_schedules").fetchall())
    return {
        name: fires if policies.get(name) == "all" else fires[-1:] for name, fires in missed.items()
    }


def jobs_by_fire(conn: psycopg.Connection[Any]) -> collections.Counter[tuple[str, datetime]]:
    rows = conn.execute(
        "SELECT payload->>'schedule', run_at FROM jobs WHERE payload ? 'schedule'"
    ).fetchall()
    return collections.Counter((name, at) for name, at in rows)


def check_exactly_once(
    conn: psycopg.Connection[Any], expected: dict[str, list[datetime]]
) -> dict[str, int]:
    """One job per (schedule, fire), the schedules moved past them, every job done once."""
    found = jobs_by_fire(conn)
    doubles = {key: n for key, n in found.items() if n > 1}
    assert not doubles, f"{len(doubles)} fire(s) enqueued more than once: {list(doubles)[:5]}"
    wanted = {(name, at) for name, fires in expected.items() for at in fires}
    assert set(found) == wanted, (
        f"missing {sorted(wanted - set(found))[:5]}, extra {sorted(set(found) - wanted)[:5]}"
    )
    recorded = dict(conn.execute("SELECT name, last_fire FROM drain_schedules").fetchall())
    for name, fires in expected.items():
        if name in recorded:
            assert recorded[name] == fires[-1], name
    audit = ledger_audit.audit(conn)
    audit.assert_ok()
    assert audit.statuses == {"done": len(wanted)}
    executions = sum(len(runs) for runs in audit.executions.values())
    assert executions == len(wanted) and not audit.executed_more_than_once
    return {
        "schedules": len(expected),
        "fires": len(wanted),
        "jobs": sum(found.values()),
        "executions": executions,
    }


# -- barriers ---------------------------------------------------------------------------------


def waiting_on_schedules(conn: psycopg.Connection[Any]) -> int:
    """Backends of this database waiting for a lock on drain_schedules."""
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE relation = 'drain_schedules'::regclass "
        "AND NOT granted AND database = (SELECT oid FROM pg_database "
        "WHERE datname = current_database())"
    ).fetchone()
    assert row is not None
    return int(row[0])


def start_behind_lock(
    runs: Runs,
    dsn: str,
    admin_dsn: str,
    count: int,
    *,
    mode: str = "EXCLUSIVE",
    meanwhile: Any = None,
) -> list[Run]:
    """Start ``count`` runs and let them go at once, when every one waits on the lock.

    EXCLUSIVE lets their read of the due schedules through and stops them at the
    firing statement (it locks rows); ACCESS EXCLUSIVE stops them at the read.
    ``meanwhile(conn)`` runs in the lock's transaction, committed as the runs go.
    """
    with (
        psycopg.connect(admin_dsn, autocommit=True) as barrier,
        psycopg.connect(admin_dsn, autocommit=True) as watcher,
    ):
        barrier.execute("BEGIN")
        barrier.execute(sql.SQL("LOCK TABLE drain_schedules IN {} MODE").format(sql.SQL(mode)))
        started = [
            runs.start("--concurrency", "4", dsn=dsn, ledger_dsn=admin_dsn) for _ in range(count)
        ]
        wait_until(
            lambda: (
                waiting_on_schedules(watcher) == count
                or any(run.poll() is not None for run in started)
            ),
            what=f"{count} runs waiting on drain_schedules",
        )
        assert all(run.poll() is None for run in started), [r.stderr for r in started]
        if meanwhile is not None:
            meanwhile(barrier)
        barrier.execute("COMMIT")
    return started


# The run's interpreter with drain imported, waiting for the start file, then drain's main.
WAITING_MAIN = textwrap.dedent(
    """
    import os, sys, time
    import croniter, psycopg
    import drain.cli, drain.store.recurring, drain.runner.runner
    start = os.environ["SCHEDULE_RACE_START"]
    open(start + "." + str(os.getpid()), "w").close()
    while not os.path.exists(start):
        time.sleep(0.002)
    sys.argv = ["drain", *sys.argv[1:]]
    drain.cli.main()
    """
)


class FileStartedRun(Run):
    """A ``drain run`` whose interpreter waits for a start file after its imports."""

    def __init__(self, args: list[str], *, dsn: str, ledger_dsn: str, directory: Path) -> None:
        self.args = args
        self._out_path = directory / f"run-{id(self)}.out"
        self._err_path = directory / f"run-{id(self)}.err"
        with self._out_path.open("wb") as out, self._err_path.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-c", WAITING_MAIN, *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=environment(dsn, ledger_dsn, {"SCHEDULE_RACE_START": str(directory / "go")}),
                cwd=REPO,
            )
        self.ended = None
        self.signals = []
        self.started = 0.0
        self.started_wall = 0.0


def start_on_file(runs: Runs, dsn: str, admin_dsn: str, count: int) -> list[Run]:
    started: list[Run] = []
    for _ in range(count):
        run = FileStartedRun(
            list(RUN_ARGS), dsn=dsn, ledger_dsn=admin_dsn, directory=runs.directory
        )
        runs.started.append(run)
        started.append(run)
    ready = runs.directory
    wait_until(
        lambda: (
            len(list(ready.glob("go.*"))) == count or any(run.poll() is not None for run in started)
        ),
        what=f"{count} interpreters ready",
    )
    assert all(run.poll() is None for run in started), [r.stderr for r in started]
    (ready / "go").touch()
    return started


def finished(started: list[Run]) -> list[dict[str, Any]]:
    summaries = []
    for run in started:
        code = run.wait()
        assert code == 0, run.stderr
        summaries.append(run.summary())
    return summaries


# -- scenarios --------------------------------------------------------------------------------


def test_eight_runs_at_once_enqueue_each_fire_exactly_once(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    missed = add_schedules(ledger_conn, SCHEDULES)
    expected = expected_jobs(ledger_conn, missed)
    summaries = finished(start_behind_lock(runs, dsn, dsn, RUNNERS))

    counts = check_exactly_once(ledger_conn, expected)
    assert sum(s["fired"] for s in summaries) == counts["jobs"]
    assert sum(s["done"] for s in summaries) == counts["jobs"]
    assert not [n for s in summaries for n in s["notes"] if n["code"].endswith("not_fired")]
    firing_runs = sum(1 for s in summaries if s["fired"])
    figures("schedules race", runs=RUNNERS, firing_runs=firing_runs, **counts)
    print(f"race: {counts}, runs that fired: {firing_runs}")


def test_the_race_under_a_role_with_a_100ms_statement_timeout(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    missed = add_schedules(ledger_conn, SCHEDULES)
    expected = expected_jobs(ledger_conn, missed)
    with login_role(dsn, "worker-secret", prefix="sched") as role:
        printed = drain_cli("init", "--print-grants", role.name)
        assert printed.returncode == 0, printed.stderr
        ledger_conn.execute(printed.stdout.encode())
        database = str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])
        ledger_conn.execute(
            sql.SQL("ALTER ROLE {} IN DATABASE {} SET statement_timeout = '100ms'").format(
                sql.Identifier(role.name), sql.Identifier(database)
            )
        )
        with role.connect() as worker:
            assert worker.execute("SHOW statement_timeout").fetchone() == ("100ms",)
        summaries = finished(start_on_file(runs, role.dsn(), dsn, RUNNERS))
        not_fired = [n for s in summaries for n in s["notes"] if n["code"] == "recurring_not_fired"]
    # A run cancelled by the timeout fires nothing and says so; the next run fires it.
    follow_up = runs.run(dsn=dsn).summary()
    counts = check_exactly_once(ledger_conn, expected)
    assert sum(s["fired"] for s in summaries) + follow_up["fired"] == counts["jobs"]
    if not not_fired:
        assert follow_up["fired"] == 0
    figures(
        "schedules race, statement_timeout 100ms",
        runs=RUNNERS,
        runs_cancelled=len(not_fired),
        fired_by_follow_up=follow_up["fired"],
        **counts,
    )
    print(f"race 100ms: {counts}, cancelled {len(not_fired)}, follow-up {follow_up['fired']}")


def test_a_schedule_removed_or_updated_while_runs_fire_it(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """Every run reads the due schedules, then waits to fire them; the delete and the
    update commit in that moment, so every run fires from a list that went stale."""
    missed = add_schedules(ledger_conn, SCHEDULES)
    expected = expected_jobs(ledger_conn, missed)
    removed = [f"s{n:03d}" for n in range(0, SCHEDULES, 10)]
    updated = [f"s{n:03d}" for n in range(5, SCHEDULES, 10)]
    crons = dict(ledger_conn.execute("SELECT name, cron FROM drain_schedules").fetchall())

    def change(conn: psycopg.Connection[Any]) -> None:
        for name in removed:
            assert recurring.unschedule(conn, name)
        for name in updated:
            recurring.schedule(conn, name, crons[name], "default", {"schedule": name, "v": 2})

    summaries = finished(
        start_behind_lock(runs, dsn, dsn, RUNNERS, mode="EXCLUSIVE", meanwhile=change)
    )

    found = jobs_by_fire(ledger_conn)
    fired_removed = {key: n for key, n in found.items() if key[0] in removed}
    assert fired_removed == {}, "a removed schedule fired after the delete committed"
    fired_updated = {key: n for key, n in found.items() if key[0] in updated}
    assert fired_updated == {}, "an old payload was enqueued after the update committed"
    new_payload = ledger_conn.execute("SELECT count(*) FROM jobs WHERE payload ? 'v'").fetchone()
    assert new_payload == (0,), "an updated schedule starts afresh: its next fire is next year"
    untouched = {k: v for k, v in expected.items() if k not in removed + updated}
    counts = check_exactly_once(ledger_conn, untouched)
    assert sum(s["fired"] for s in summaries) == counts["jobs"]
    left = ledger_conn.execute(
        "SELECT count(*) FROM drain_schedules WHERE next_fire <= now()"
    ).fetchone()
    assert left == (0,)
    figures(
        "schedule removed/updated in a race",
        runs=RUNNERS,
        removed=len(removed),
        updated=len(updated),
        **counts,
    )
    print(f"removed {len(removed)}, updated {len(updated)}, untouched {counts}")


def stale_jobs(conn: psycopg.Connection[Any], name: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM jobs WHERE payload->>'schedule' = %s AND NOT payload ? 'v'", (name,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_frozen_run_that_read_the_due_schedules_fires_nothing_when_thawed(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    missed = add_schedules(ledger_conn, SCHEDULES)
    expected = expected_jobs(ledger_conn, missed)
    with psycopg.connect(dsn, autocommit=True) as barrier:
        barrier.execute("BEGIN")
        barrier.execute("LOCK TABLE drain_schedules IN ACCESS EXCLUSIVE MODE")
        frozen = runs.start("--concurrency", "4", dsn=dsn)
        wait_until(
            lambda: waiting_on_schedules(ledger_conn) == 1 or frozen.poll() is not None,
            what="the run's read of the due schedules to wait on the lock",
        )
        assert frozen.poll() is None, frozen.stderr
        frozen.send(signal.SIGSTOP)
        barrier.execute("COMMIT")
    # Its read is answered while it is stopped: it holds no lock and no row, only a
    # list of schedules that is about to go stale.
    wait_until(
        lambda: (
            ledger_conn.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE a.application_name = 'drain' AND a.datname = current_database() "
                "AND l.locktype IN ('relation', 'tuple', 'transactionid') AND l.granted "
                "AND l.relation IS DISTINCT FROM 'pg_locks'::regclass"
            ).fetchone()
            == (0,)
        ),
        what="the frozen run to hold nothing",
    )
    others = [runs.start("--concurrency", "4", dsn=dsn) for _ in range(3)]
    summaries = finished(others)
    fired_by_others = sum(s["fired"] for s in summaries)
    frozen.send(signal.SIGCONT)
    assert frozen.wait() == 0, frozen.stderr
    thawed = frozen.summary()

    counts = check_exactly_once(ledger_conn, expected)
    assert fired_by_others == counts["jobs"]
    assert thawed["fired"] == 0
    figures("frozen run and schedules", thawed_fired=thawed["fired"], **counts)
    print(f"frozen: others fired {fired_by_others}, thawed fired {thawed['fired']}")
