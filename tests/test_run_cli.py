"""`drain run` end to end: real processes, a real server, counting what really ran."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from drain.core.summary import Note
from drain.observe.words import note_text
from tests.support import (
    LEDGER_DDL,
    add_jobs,
    drain_cli,
    executions,
    job,
    start_cli,
    statuses,
    summary_of,
    with_dbname,
)
from tests.support.pgproxy import proxied

APP = ["--app", "run_app"]


@pytest.fixture
def ledger(conn: psycopg.Connection[Any], dsn: str) -> dict[str, str]:
    """The ledger table the test handlers write to, and the environment that points at it."""
    conn.execute(LEDGER_DDL)
    return {"LEDGER_DSN": dsn}


def drain_sessions(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT state, query FROM pg_stat_activity "
        "WHERE application_name = 'drain' AND datname = current_database()"
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def connections_to(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_four_concurrent_runs_run_every_job_exactly_once(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 5000)
    baseline = connections_to(conn)
    runs = [
        start_cli("run", *APP, "--json", "--batch-size", "50", dsn=dsn, env=ledger)
        for _ in range(4)
    ]
    outputs = [run.communicate(timeout=180) for run in runs]

    assert [run.returncode for run in runs] == [0, 0, 0, 0], [err for _, err in outputs]
    done = sum(json.loads(out)["done"] for out, _ in outputs)
    assert done == 5000
    counts = executions(conn)
    assert len(counts) == 5000 and set(counts.values()) == {1}
    assert statuses(conn) == {"done": 5000}
    deadline = time.monotonic() + 10
    while connections_to(conn) > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections_to(conn) == baseline


def test_the_session_is_idle_while_a_handler_works_and_never_listens(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "working"
    add_jobs(conn, 1, payload={"sleep": 2, "marker": str(marker)})
    run = start_cli("run", *APP, dsn=dsn, env=ledger)
    wait_for(marker)
    time.sleep(0.3)
    sessions = drain_sessions(conn)
    run.communicate(timeout=60)

    assert run.returncode == 0
    assert sessions, "the run's session was not visible"
    assert all(state == "idle" for state, _ in sessions), sessions
    assert not any(query.lstrip().upper().startswith("LISTEN") for _, query in sessions)
    assert job(conn, 1)["status"] == "done"


def test_budget_ends_mid_queue_with_exit_3_and_attempts_given_back(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 1000, payload={"sleep": 0.05})
    started = time.monotonic()
    result = drain_cli(
        "run", *APP, "--max-seconds", "2", "--grace-seconds", "1", "--json", dsn=dsn, env=ledger
    )
    elapsed = time.monotonic() - started

    assert result.returncode == 3, result.stderr
    assert elapsed < 2 + 1 + 1, elapsed
    summary = summary_of(result)
    assert summary["exit_reason"] == "budget"
    assert 0 < summary["done"] < 60
    counts = statuses(conn)
    assert "running" not in counts
    assert counts["done"] == summary["done"]
    # A release never burns an attempt: every job left has all its 5 tries.
    untouched = conn.execute(
        "SELECT count(*) FROM jobs WHERE status = 'queued' AND max_attempts - attempts = 5"
    )
    assert untouched.fetchone() == (1000 - summary["done"],)


def test_a_budget_stop_that_gave_jobs_back_never_says_drained(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    """The only ready jobs left are the ones the stop gave back: still exit 3, budget."""
    add_jobs(conn, 1, payload={"sleep": 5}, run_in=-10)
    add_jobs(conn, 4)
    result = drain_cli(
        "run", *APP, "--max-seconds", "3", "--grace-seconds", "10", "--json", dsn=dsn, env=ledger
    )

    assert result.returncode == 3, result.stderr
    summary = summary_of(result)
    assert (summary["exit_reason"], summary["done"], summary["released"]) == ("budget", 1, 4)
    assert "stopped at its time budget" in result.stderr
    assert "drained" not in result.stderr, result.stderr
    assert "4 job(s) claimed but not started were given back" in result.stderr
    assert statuses(conn) == {"done": 1, "queued": 4}


def test_a_run_finding_its_queue_cap_full_exits_3_capped_never_drained(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    """Three jobs running in other runs hold a cap of 3; 57 are ready.

    Every run leaves at once, says why, and exits 3 (work left, for a later run),
    never 0 "drained".
    """
    add_jobs(conn, 3, status="running", attempts=1, lease_left=3600)
    add_jobs(conn, 57)
    for _ in range(3):
        result = drain_cli("run", *APP, "--queue-cap", "default=3", "--json", dsn=dsn, env=ledger)
        assert result.returncode == 3, result.stderr
        summary = summary_of(result)
        assert (summary["exit_reason"], summary["claimed"]) == ("capped", 0), summary
        assert summary["ready"]["default"]["ready"] == 57
        assert "drained" not in result.stderr, result.stderr
        assert "left at its queue cap" in result.stderr
    assert statuses(conn) == {"running": 3, "queued": 57}


def test_a_capped_queue_with_nothing_ready_is_drained(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 3, status="running", attempts=1, lease_left=3600)
    add_jobs(conn, 2, run_in=3600)  # not ready yet
    result = drain_cli("run", *APP, "--queue-cap", "default=3", "--json", dsn=dsn, env=ledger)

    assert result.returncode == 0, result.stderr
    assert summary_of(result)["exit_reason"] == "drained"


def test_a_row_the_table_refuses_to_reap_is_failed_alone_and_the_run_goes_on(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    """Before, the reap failed as one statement and every run exited 1 on it."""
    expired = add_jobs(conn, 3, status="running", attempts=1, lease_left=-5)
    add_jobs(conn, 5)
    check = "ALTER TABLE jobs ADD CONSTRAINT stays CHECK (id <> {} OR status <> 'queued')"
    conn.execute(psycopg.sql.SQL(check + " NOT VALID").format(psycopg.sql.Literal(expired[1])))

    result = drain_cli("run", *APP, "--json", dsn=dsn, env=ledger)

    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert (summary["reaped"], summary["done"]) == (3, 7), summary
    assert statuses(conn) == {"done": 7, "failed": 1}


def test_sigterm_mid_batch_stops_in_order_and_releases_the_rest(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "working"
    add_jobs(conn, 1, payload={"sleep": 1, "marker": str(marker)}, run_in=-10)
    add_jobs(conn, 49, payload={"sleep": 0.2})
    run = start_cli("run", *APP, "--json", "--batch-size", "50", dsn=dsn, env=ledger)
    wait_for(marker)
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=60)

    assert run.returncode == 3, err
    summary = json.loads(out)
    assert summary["exit_reason"] == "signal"
    # The first claim took 10 jobs per worker: the one at work finished, the rest went back.
    assert summary["done"] == 1 and summary["released"] == summary["claimed"] - 1 > 0
    assert statuses(conn) == {"done": 1, "queued": 49}
    # A release never burns an attempt: every job given back has all its 5 tries.
    tries = "SELECT DISTINCT max_attempts - attempts FROM jobs WHERE status = 'queued'"
    assert conn.execute(tries).fetchall() == [(5,)]


def test_sigkill_mid_batch_loses_nothing_and_the_next_run_finishes(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "working"
    add_jobs(conn, 1, payload={"sleep": 30, "marker": str(marker)}, run_in=-10)
    add_jobs(conn, 20)
    run = start_cli("run", *APP, "--lease", "2s", "--batch-size", "50", dsn=dsn, env=ledger)
    wait_for(marker)
    run.kill()
    run.communicate(timeout=30)
    held = statuses(conn).get("running", 0)
    assert held > 1 and "done" not in statuses(conn)

    conn.execute("UPDATE jobs SET payload = '{}' WHERE id = 1")
    time.sleep(2.2)
    result = drain_cli("run", *APP, "--json", dsn=dsn, env=ledger)

    assert result.returncode == 0, result.stderr
    assert summary_of(result)["reaped"] == held
    assert statuses(conn) == {"done": 21}
    # The killed run's claim cost its jobs an attempt each; nothing else did (a
    # release, of the jobs set aside while a suspect ran alone, gives its attempt
    # back as one more try, so the tries used are attempts - (max_attempts - 5)).
    counts = conn.execute(
        "SELECT attempts - (max_attempts - 5), count(*) FROM jobs GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert counts == [(1, 21 - held), (2, held)] if held < 21 else [(2, 21)]


def test_a_handler_outliving_its_lease_keeps_it_and_completes_once(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    (job_id,) = add_jobs(conn, 1, payload={"sleep": 4})
    result = drain_cli("run", *APP, "--lease", "1.5s", "--json", dsn=dsn, env=ledger)

    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 1
    assert executions(conn) == {job_id: 1}
    assert (job(conn, job_id)["status"], job(conn, job_id)["attempts"]) == ("done", 1)


def test_a_result_is_not_recorded_once_the_lease_was_stolen(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "working"
    (job_id,) = add_jobs(conn, 1, payload={"sleep": 3, "marker": str(marker)})
    run = start_cli("run", *APP, "--lease", "1h", "--json", dsn=dsn, env=ledger)
    wait_for(marker)
    # Another worker decides the lease ran out, reaps and claims the job (attempt 2).
    conn.execute(
        "UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (job_id,)
    )
    conn.execute("UPDATE jobs SET status = 'queued', locked_until = NULL WHERE id = %s", (job_id,))
    conn.execute(
        "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
        "locked_until = now() + interval '1 hour' WHERE id = %s",
        (job_id,),
    )
    out, err = run.communicate(timeout=60)

    # A run that lost a job never exits 0: its outcome was thrown away.
    assert run.returncode == 1, err
    summary = json.loads(out)
    assert (summary["done"], summary["lost"]) == (0, 1)
    assert summary["exit_reason"] == "lost"
    assert "drained" not in err and "1 job(s) were lost" in err, err
    row = job(conn, job_id)
    assert (row["status"], row["attempts"]) == ("running", 2)


def test_a_raising_handler_retries_with_backoff_then_fails(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    (job_id,) = add_jobs(conn, 1, payload={"raise": "SMTP 451"}, max_attempts=2)
    first = drain_cli("run", *APP, "--json", dsn=dsn, env=ledger)
    row = job(conn, job_id)
    assert first.returncode == 0 and summary_of(first)["retried"] == 1
    assert (row["status"], row["attempts"]) == ("queued", 1)
    assert 18 < row["run_in"].total_seconds() <= 20
    assert row["last_error"] == "RuntimeError: SMTP 451"

    conn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job_id,))
    second = drain_cli("run", *APP, "--json", dsn=dsn, env=ledger)
    row = job(conn, job_id)
    assert summary_of(second)["failed"] == 1
    assert (row["status"], row["attempts"], row["last_error"]) == (
        "failed",
        2,
        "RuntimeError: SMTP 451",
    )


def test_system_exit_in_a_handler_fails_only_its_job(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    (bad,) = add_jobs(conn, 1, payload={"exit": "system"}, run_in=-5)
    add_jobs(conn, 9)
    result = drain_cli("run", *APP, "--json", dsn=dsn, env=ledger)

    assert result.returncode == 0, result.stderr
    assert statuses(conn) == {"done": 9, "queued": 1}
    assert job(conn, bad)["last_error"] == "SystemExit: 3"


def test_os_exit_in_a_handler_loses_no_job_of_the_batch(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 1, payload={"exit": "os"}, run_in=-5, max_attempts=1)
    add_jobs(conn, 9)
    crashed = drain_cli("run", *APP, "--lease", "1s", dsn=dsn, env=ledger)
    assert crashed.returncode == 7
    assert statuses(conn) == {"running": 10}

    time.sleep(1.2)
    result = drain_cli("run", *APP, "--json", dsn=dsn, env=ledger)
    assert result.returncode == 0, result.stderr
    assert statuses(conn) == {"done": 9, "failed": 1}


def test_a_poisoned_payload_fails_alone(conn: psycopg.Connection[Any], dsn: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    (poisoned,) = add_jobs(conn, 1, payload_json=deep, run_in=-5)
    add_jobs(conn, 9)
    result = drain_cli("run", "--exec", "cat > /dev/null", "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert statuses(conn) == {"done": 9, "failed": 1}
    assert "nested too deeply" in job(conn, poisoned)["last_error"]


def test_exec_runs_a_shell_command_per_job(
    conn: psycopg.Connection[Any], dsn: str, tmp_path: Path
) -> None:
    out = tmp_path / "payloads.txt"
    add_jobs(conn, 3, queue="shell")
    result = drain_cli(
        "run", "--queue", "shell", "--exec", f"cat >> {out}; echo >> {out}", "--json", dsn=dsn
    )
    assert result.returncode == 0, result.stderr
    assert sorted(out.read_text().split()) == ['{"n":1}', '{"n":2}', '{"n":3}']
    failing = drain_cli("run", "--queue", "shell", "--exec", "echo nope >&2; exit 4", dsn=dsn)
    assert failing.returncode == 0
    add_jobs(conn, 1, queue="shell")
    drain_cli("run", "--queue", "shell", "--exec", "echo nope >&2; exit 4", dsn=dsn)
    assert job(conn, 4)["last_error"] == "ExecFailed: exit status 4: nope"


def test_max_runners_lets_one_run_work_and_the_others_leave(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 20, payload={"sleep": 0.2})
    runs = [
        start_cli("run", *APP, "--max-runners", "1", "--json", dsn=dsn, env=ledger)
        for _ in range(3)
    ]
    outputs = [json.loads(run.communicate(timeout=60)[0]) for run in runs]

    assert [run.returncode for run in runs] == [0, 0, 0]
    reasons = sorted(summary["exit_reason"] for summary in outputs)
    assert reasons == ["drained", "runners-busy", "runners-busy"]
    (working,) = [s for s in outputs if s["exit_reason"] == "drained"]
    busy = [s for s in outputs if s["exit_reason"] == "runners-busy"]
    assert all(s["claimed"] == 0 for s in busy)
    # They leave at once: well before the 20 x 0.2 s of work the working run does.
    assert all(s["seconds"] < working["seconds"] - 2 for s in busy)
    assert statuses(conn) == {"done": 20}


def test_an_empty_run_sends_six_statements_and_closes_its_connection(dsn: str) -> None:
    with proxied(dsn) as (proxy, through):
        result = drain_cli("run", "--exec", "true", "--json", dsn=through)
        assert result.returncode == 0, result.stderr
        assert summary_of(result)["exit_reason"] == "drained"
        # inspect; reap and the recurring jobs due (one pipeline, one round trip);
        # claim; the run's record. A run holding no lease sends its claim without
        # a time limit.
        assert proxy.statements == 6
        assert proxy.counts["X"] == 1  # Terminate: the connection was closed, not dropped
        proxy.counts.clear()
        skipping = drain_cli("run", "--exec", "true", "--no-schedules", dsn=through)
        assert skipping.returncode == 0, skipping.stderr
        assert proxy.statements == 5


SECRET = "s3cret pass%zz"


@pytest.mark.parametrize(
    ("dsn_text", "code", "message"),
    [
        (
            "postgresql://worker:s3cret pass%zz@127.0.0.1:5432/x",
            2,
            "connection string is malformed",
        ),
        ("host=127.0.0.1 port=1 user=worker password='s3cret pass%zz' dbname=x", 1, "refused"),
        ("postgresql://worker:s3cret%20pass%25zz@no-such-host.invalid/x", 1, "cannot connect"),
    ],
)
def test_connection_errors_are_one_line_without_the_password(
    dsn_text: str, code: int, message: str
) -> None:
    result = drain_cli("run", "--exec", "true", "--connect-retry", "1s", dsn=dsn_text)
    assert result.returncode == code
    assert message in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drain: error:")
    assert "Traceback" not in result.stderr
    for leak in (SECRET, "s3cret", "pass%zz", "s3cret%20pass"):
        assert leak not in result.stderr + result.stdout


def test_missing_schema_and_unknown_module_are_clear_errors(empty_dsn: str) -> None:
    missing = drain_cli("run", "--exec", "true", dsn=empty_dsn)
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "drain: error: queue table public.jobs does not exist; create it with `drain init`"
    )
    unknown = drain_cli("run", "--app", "no_such_module_here", dsn=empty_dsn)
    assert unknown.returncode == 2
    assert "cannot import handler module 'no_such_module_here'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_async_handlers_run_too(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 5, queue="async")
    result = drain_cli(
        "run", *APP, "--queue", "async", "--concurrency", "3", "--json", dsn=dsn, env=ledger
    )
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 5
    assert len(executions(conn)) == 5


def test_python_api_runs_the_same_loop(conn: psycopg.Connection[Any], dsn: str) -> None:
    import drain

    add_jobs(conn, 30)
    seen: list[int] = []
    summary = drain.run(dsn, handlers={"default": lambda job: seen.append(job.id)}, max_seconds=30)
    assert (summary.exit_code, summary.done, summary.claimed) == (0, 30, 30)
    assert sorted(seen) == list(range(1, 31))
    recorded = conn.execute("SELECT exit_reason, done FROM drain_runs").fetchall()
    assert recorded == [("drained", 30)]


def test_the_wheel_carries_the_sql(tmp_path: Path) -> None:
    """A non-editable install works outside the source tree: the SQL files ship in the wheel."""
    repo = Path(__file__).resolve().parents[1]
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(repo)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("pg_drain-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import drain, drain.store.sqlfiles as s, drain.store.steps as m; "
            "print(drain.__file__); print(len(s.names())); print(len(m.all_steps()))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert probe.returncode == 0, probe.stderr
    location, count, steps = probe.stdout.split()
    assert location.startswith(str(target))
    assert int(count) >= 10
    assert int(steps) >= 3  # sql/migrations/ travels in the wheel too
    ddl = subprocess.run(
        [sys.executable, "-m", "drain", "init", "--print-sql"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert ddl.returncode == 0, ddl.stderr
    assert 'CREATE TABLE IF NOT EXISTS "public"."jobs"' in ddl.stdout


def test_end_of_run_archives_vacuums_and_records(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 30, status="done", attempts=1, created_ago=8 * 86400)
    add_jobs(conn, 2000)
    result = drain_cli("run", *APP, "--batch-size", "500", "--json", dsn=dsn, env=ledger)

    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert (summary["done"], summary["archived"], summary["vacuumed"]) == (2000, 30, True)
    assert conn.execute("SELECT count(*) FROM jobs_archive").fetchone() == (30,)
    vacuumed = conn.execute(
        "SELECT last_vacuum IS NOT NULL, last_analyze IS NOT NULL FROM pg_stat_user_tables"
        " WHERE relid = 'jobs'::regclass"
    ).fetchone()
    assert vacuumed == (True, True)
    analyzed = conn.execute(
        "SELECT attname FROM pg_stats WHERE tablename = 'jobs' AND attname = 'status'"
    ).fetchall()
    assert analyzed == [("status",)]
    recorded = conn.execute(
        "SELECT jobs_table, done, archived, exit_reason, exit_code FROM drain_runs"
    ).fetchall()
    assert recorded == [("public.jobs", 2000, 30, "drained", 0)]


def test_runs_share_a_backlog_of_slow_jobs(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 60, payload={"sleep": 0.1})
    runs = [start_cli("run", *APP, "--json", dsn=dsn, env=ledger) for _ in range(3)]
    outputs = [json.loads(run.communicate(timeout=120)[0]) for run in runs]

    assert [run.returncode for run in runs] == [0, 0, 0]
    done = [summary["done"] for summary in outputs]
    assert sum(done) == 60
    # Claims of slow jobs stay small, so no run takes the whole backlog for itself.
    assert all(count > 0 for count in done), done


def test_a_role_that_may_not_vacuum_says_so_instead_of_claiming_it_did(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    from psycopg import conninfo, sql

    from drain.core.table import JobTable
    from drain.store import schema

    role = f"drain_worker_{os.getpid()}"
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        conn.execute(schema.grants(JobTable(), role).encode())
        add_jobs(conn, 5)
        as_worker = conninfo.make_conninfo(dsn, user=role)
        result = drain_cli(
            "run",
            "--exec",
            "true",
            "--vacuum",
            "always",
            "--archive-mode",
            "off",
            "--json",
            dsn=as_worker,
        )
        assert result.returncode == 0, result.stderr
        summary = summary_of(result)
        assert summary["done"] == 5 and summary["vacuumed"] is False
        (data,) = [note for note in summary["notes"] if note["code"] == "vacuum_not_owner"]
        assert data["figures"]["table"] == "public.jobs"
        note = note_text(Note(data["code"], data["figures"]))
        assert note in result.stderr
        assert "; vacuum needs the table's owner (or, on PostgreSQL 17 and later, " in note
        assert note.endswith("GRANT MAINTAIN ON public.jobs), or turn it off with --vacuum off")
    finally:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_json_log_lines_are_one_object_each_and_never_show_the_password(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 2)
    ok = drain_cli("run", "--exec", "true", "--log-format", "json", dsn=dsn)
    assert ok.returncode == 0, ok.stderr
    (summary,) = [json.loads(line) for line in ok.stderr.splitlines()]
    assert {"time", "level", "message", "table"} <= set(summary)
    assert summary["table"] == "public.jobs" and summary["message"].startswith("public.jobs")
    assert summary["done"] == 2 and summary["exit_code"] == 0
    broken = drain_cli(
        "run",
        "--exec",
        "true",
        "--log-format",
        "json",
        dsn=with_dbname(dsn, "no_such_database_here"),
        env={"PGPASSWORD": "s3cret-pw"},
    )
    assert broken.returncode == 1
    (error,) = [json.loads(line) for line in broken.stderr.splitlines()]
    assert error["level"] == "error" and "no_such_database_here" in error["message"]
    assert "s3cret-pw" not in broken.stderr


@pytest.mark.parametrize("program", ["   ", ""])
def test_a_blank_drain_exec_is_refused_by_name_and_no_job_is_touched(
    conn: psycopg.Connection[Any], dsn: str, program: str
) -> None:
    """``DRAIN_EXEC`` from an unset template variable: ``/bin/sh -c "   "`` would exit 0."""
    add_jobs(conn, 5)
    result = drain_cli("run", dsn=dsn, env={"DRAIN_EXEC": program})
    assert result.returncode == 2
    assert result.stderr == (
        "drain: error: DRAIN_EXEC is empty: give the program to run for each job\n"
    )
    assert conn.execute("SELECT status, attempts FROM jobs").fetchall() == [("queued", 0)] * 5


def test_a_queue_named_that_no_handler_serves_is_a_usage_error(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    """A typo in --queue exited 0 on every run ("has no handler; left alone") for ever."""
    add_jobs(conn, 5, queue="emails")
    typo = drain_cli("run", "--app", "tasks", "--queue", "emials", dsn=dsn)
    assert typo.returncode == 2
    assert typo.stderr == (
        "drain: error: no handler serves --queue 'emials' (did you mean 'emails'?); "
        "the queues with a handler: 'emails', 'reports'\n"
    )
    from_variable = drain_cli("run", "--app", "tasks", dsn=dsn, env={"DRAIN_QUEUE": "emails,x"})
    assert from_variable.returncode == 2
    assert "no handler serves --queue 'x';" in from_variable.stderr
    assert conn.execute("SELECT status, attempts FROM jobs").fetchall() == [("queued", 0)] * 5
    # A queue with a handler and no jobs is fine; without --queue every handled queue drains.
    assert drain_cli("run", "--app", "tasks", "--queue", "reports", dsn=dsn).returncode == 0
    assert statuses(conn) == {"queued": 5}
    assert drain_cli("run", "--app", "tasks", dsn=dsn).returncode == 0
    assert statuses(conn) == {"done": 5}


@pytest.mark.parametrize("kept", ["1X", "", " , ", "PGHOST,2"])
def test_an_exec_keep_env_that_is_not_a_variable_name_is_refused(
    conn: psycopg.Connection[Any], dsn: str, kept: str
) -> None:
    """``--exec-keep-env "$UNSET"`` or a typo kept nothing, and the run went on."""
    add_jobs(conn, 3)
    result = drain_cli("run", "--exec", "true", "--exec-keep-env", kept, dsn=dsn)
    assert result.returncode == 2
    assert result.stderr.startswith("drain: error: --exec-keep-env takes variable names")
    assert result.stderr.count("\n") == 1
    assert statuses(conn) == {"queued": 3}
