"""``drain migrate``: numbered steps, applied to a live table, through the real CLI.

The table migrated under a live run is a fixture: a version-1 table made by the
``drain init`` that came before ``drain migrate`` (tests/data/schema_v1_1500_jobs.sql,
1,500 queued, failed and done jobs), loaded from its dump into a database of the
test's own while a ``drain run`` subprocess drains it.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from drain.core.table import JobTable
from drain.store import migrations, steps
from tests.support import LEDGER_DDL, REPO, drain_cli, executions, start_cli, statuses
from tests.test_schema import ARTICLE_DDL

FIXTURE = REPO / "tests" / "data" / "schema_v1_1500_jobs.sql"
QUEUED, FAILED, DONE = range(1, 1001), range(1001, 1251), range(1251, 1501)


def load_dump(dsn: str, path: Path = FIXTURE) -> None:
    """Load a plain pg_dump file the way psql would, its COPY blocks included."""
    lines = path.read_text(encoding="utf-8").splitlines()
    with psycopg.connect(dsn, autocommit=True) as conn:
        pending: list[str] = []

        def flush() -> None:
            text = "\n".join(pending).strip()
            if text:
                conn.execute(text.encode())
            pending.clear()

        index = 0
        while index < len(lines):
            line = lines[index]
            index += 1
            if line.startswith("\\"):  # psql's meta-commands (\restrict)
                continue
            if line.startswith("COPY ") and line.endswith("FROM stdin;"):
                flush()
                with conn.cursor().copy(line.removesuffix(";").encode()) as copy:
                    while lines[index] != "\\.":
                        copy.write(lines[index] + "\n")
                        index += 1
                index += 1
                continue
            pending.append(line)
        flush()


def catalog(dsn: str) -> dict[str, Any]:
    """The queue table's shape as the catalog tells it: columns, constraints, indexes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull, "
            "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute AS a "
            "LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
            "WHERE attrelid = 'public.jobs'::regclass AND attnum > 0 AND NOT attisdropped "
            "ORDER BY attname"
        ).fetchall()
        constraints = conn.execute(
            "SELECT conname, convalidated, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'public.jobs'::regclass ORDER BY conname"
        ).fetchall()
        indexes = conn.execute(
            "SELECT i.relname, x.indisvalid, pg_get_indexdef(i.oid) FROM pg_index AS x "
            "JOIN pg_class AS i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = 'public.jobs'::regclass ORDER BY 1"
        ).fetchall()
        comment = conn.execute("SELECT obj_description('public.jobs'::regclass)").fetchone()
        relations = conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relkind IN ('r', 'i') ORDER BY 1"
        ).fetchall()
    return {
        "columns": columns,
        "constraints": constraints,
        "indexes": indexes,
        "comment": comment,
        "relations": [row[0] for row in relations],
    }


def migrate(*args: str, dsn: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return drain_cli("migrate", *args, dsn=dsn, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("drain: error: "), result.stderr
    return lines[0]


# -- the fixture -------------------------------------------------------------------------


def test_the_fixture_is_the_version_1_table_init_makes(empty_dsn: str, dsn: str) -> None:
    load_dump(empty_dsn)
    assert catalog(empty_dsn) == catalog(dsn)  # version 1 is today's schema, object for object
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert statuses(conn) == {"queued": 1000, "failed": 250, "done": 250}
    verified = drain_cli("init", dsn=empty_dsn)
    assert verified.returncode == 0 and "verified public.jobs" in verified.stderr
    current = migrate(dsn=empty_dsn)
    assert current.returncode == 0, current.stderr
    assert current.stderr == "drain: public.jobs is current (schema version 1); nothing to do\n"


# -- under a live run --------------------------------------------------------------------


def test_a_version_1_table_is_migrated_while_a_run_drains_it_and_every_job_runs_once(
    empty_dsn: str,
) -> None:
    load_dump(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(LEDGER_DDL)
    run = start_cli(
        "run",
        "--app",
        "migrate_handlers",
        "--concurrency",
        "2",
        "--batch-size",
        "10",
        "--json",
        dsn=empty_dsn,
        env={"LEDGER_DSN": empty_dsn, "MIGRATE_HANDLER_SLEEP": "0.02"},
    )
    try:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            while (conn.execute("SELECT count(*) FROM ledger").fetchone() or (0,))[0] < 50:
                assert run.poll() is None, run.communicate()
                time.sleep(0.05)
            began = time.monotonic()
            result = migrate("--with", "dedupe", "--with", "priority", "--json", dsn=empty_dsn)
            wall = time.monotonic() - began
            still_running = run.poll() is None
            ran_before = (conn.execute("SELECT count(*) FROM ledger").fetchone() or (0,))[0]
        stdout, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [a["step"] for a in report["applied"]] == ["0002_dedupe", "0003_priority"]
    assert report["extras"] == ["dedupe", "priority"] and report["version"] == 1
    print(
        f"\nmigration (0002_dedupe + 0003_priority) under a live run: {report['seconds']:.3f} s "
        f"in drain, {wall:.3f} s wall with the process start; lock retries "
        f"{sum(a['lock_retries'] for a in report['applied'])}; {ran_before} of 1000 jobs "
        "had run when it finished"
    )
    assert still_running, "the run ended before the migration did: not a live migration"
    assert run.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["done"] == 1000 and summary["lost"] == 0, summary
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert executions(conn) == {job_id: 1 for job_id in QUEUED}
        rows = conn.execute(
            "SELECT id, status FROM jobs UNION ALL SELECT id, status FROM jobs_archive"
        ).fetchall()
        assert sorted(rows) == sorted(
            [(i, "done") for i in QUEUED]
            + [(i, "failed") for i in FAILED]
            + [(i, "done") for i in DONE]
        )
        priorities = conn.execute("SELECT DISTINCT priority FROM jobs").fetchall()
        assert priorities in ([(0,)], [])
    again = migrate(dsn=empty_dsn)
    assert again.returncode == 0
    assert "is current (schema version 1 with dedupe, priority)" in again.stderr


# -- what migrate prints, and what it refuses --------------------------------------------


def test_a_dry_run_prints_the_sql_and_changes_nothing(empty_dsn: str) -> None:
    load_dump(empty_dsn)
    before = catalog(empty_dsn)
    result = migrate("--dry-run", "--with", "priority", dsn=empty_dsn)
    assert result.returncode == 0, result.stderr
    assert 'ALTER TABLE "public"."jobs" ADD COLUMN IF NOT EXISTS priority' in result.stdout
    assert 'CREATE INDEX CONCURRENTLY IF NOT EXISTS "jobs_priority_idx"' in result.stdout
    assert "nothing was changed" in result.stderr
    assert catalog(empty_dsn) == before
    nothing = migrate("--dry-run", dsn=empty_dsn)
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert "is current; nothing to apply" in nothing.stderr


def test_a_table_newer_than_this_drain_is_refused_and_left_alone(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("COMMENT ON TABLE jobs IS 'drain schema version 99'")
    before = catalog(dsn)
    result = migrate("--with", "priority", dsn=dsn)
    assert result.returncode == 1
    assert "has schema version 99, newer than this drain (1); drain never downgrades" in (
        one_error_line(result)
    )
    assert catalog(dsn) == before


def test_a_run_against_an_older_table_says_run_drain_migrate(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("COMMENT ON TABLE jobs IS 'drain schema version 0'")
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('default', '{}')")
    refused = drain_cli("run", "--exec", "true", dsn=dsn)
    assert refused.returncode == 1
    assert one_error_line(refused).endswith("run `drain migrate` to upgrade it")
    migrated = migrate(dsn=dsn)
    assert migrated.returncode == 0, migrated.stderr
    assert "applied 0001_schema" in migrated.stderr
    ran = drain_cli("run", "--exec", "true", dsn=dsn)
    assert ran.returncode == 0, ran.stderr


def test_a_table_made_by_hand_is_migrated_to_version_1_with_its_jobs(
    empty_dsn: str, dsn: str
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
    result = migrate(dsn=empty_dsn)
    assert result.returncode == 0, result.stderr
    assert "from schema version 0 to schema version 1" in result.stderr
    assert catalog(empty_dsn) == catalog(dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert statuses(conn) == {"queued": 10}


def test_a_missing_table_is_for_init(empty_dsn: str) -> None:
    result = migrate(dsn=empty_dsn)
    assert result.returncode == 1
    assert "does not exist; create it with `drain init`" in one_error_line(result)


def test_print_sql_from_a_version_prints_the_steps_that_rebuild_the_schema(
    empty_dsn: str, dsn: str
) -> None:
    whole = migrate("--print-sql", "--from", "0", "--with", "priority", dsn=empty_dsn)
    assert whole.returncode == 0, whole.stderr
    creates = [line for line in whole.stdout.splitlines() if "INDEX CONCURRENTLY IF" in line]
    assert len(creates) == 5 and not any(line.startswith("--") for line in creates)
    # Each statement on its own, as the header says; twice over, to show the steps idempotent.
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for _ in range(2):
            for step in (steps.chain()[0], steps.extras()["priority"]):
                for statement in steps.statements(JobTable(), step):
                    conn.execute(statement.text)
    assert drain_cli("init", "--with", "priority", dsn=dsn).returncode == 0
    assert catalog(empty_dsn) == catalog(dsn)
    only = migrate("--print-sql", "--from", "1", "--with", "priority", dsn=empty_dsn)
    assert "0003_priority" in only.stdout and "0001_schema" not in only.stdout
    current = migrate("--print-sql", "--from", "1", dsn=empty_dsn)
    assert current.returncode == 0 and "no step to apply" in current.stdout
    for value in ("2", "-1"):
        wrong = migrate("--print-sql", "--from", value, dsn=empty_dsn)
        assert wrong.returncode == 2
        assert "this drain knows schema versions 0" in one_error_line(wrong)
    alone = migrate("--from", "0", dsn=empty_dsn)
    assert alone.returncode == 2 and "--from goes with --print-sql" in alone.stderr


def test_init_print_sql_prints_the_current_schema_whole_for_one_transaction(
    empty_dsn: str, dsn: str
) -> None:
    result = drain_cli("init", "--print-sql", "--with", "dedupe", "--with", "priority")
    assert result.returncode == 0
    assert "CONCURRENTLY IF NOT EXISTS" not in result.stdout
    with psycopg.connect(empty_dsn) as conn:  # one transaction, as a migration tool runs it
        conn.execute(result.stdout)
        conn.execute(result.stdout)
    assert drain_cli("init", "--with", "dedupe", "--with", "priority", dsn=dsn).returncode == 0
    assert catalog(empty_dsn) == catalog(dsn)


@pytest.mark.parametrize("first", ["init", "migrate"])
def test_init_with_an_extra_and_migrate_meet_the_same_state(
    first: str, empty_dsn: str, dsn: str
) -> None:
    fresh = drain_cli("init", "--with", "priority", "--with", "dedupe", dsn=empty_dsn)
    assert fresh.returncode == 0, fresh.stderr
    later = drain_cli(first, "--with", "priority", "--with", "dedupe", dsn=dsn)
    assert later.returncode == 0, later.stderr
    assert catalog(dsn) == catalog(empty_dsn)
    other = "migrate" if first == "init" else "init"
    again = drain_cli(other, "--with", "priority", "--with", "dedupe", dsn=dsn)
    assert again.returncode == 0, again.stderr
    assert catalog(dsn) == catalog(empty_dsn)


# -- locks, half-done steps, INVALID indexes ---------------------------------------------


def _hold_lock(dsn: str, seconds: float, holding: threading.Event) -> None:
    """An open transaction that has read the table: ALTER TABLE waits for it to end."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT count(*) FROM jobs")
        holding.set()
        time.sleep(seconds)
        conn.rollback()


def test_a_busy_lock_is_waited_for_briefly_and_tried_again(dsn: str) -> None:
    holding = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(dsn, 2.0, holding))
    holder.start()
    holding.wait(10)
    result = migrate("--with", "priority", "--lock-timeout", "200ms", dsn=dsn)
    holder.join()
    assert result.returncode == 0, result.stderr
    assert "lock retries" in result.stderr and "trying again" in result.stderr
    assert "drain_priority_range" in str(catalog(dsn)["constraints"])


def test_a_lock_never_had_stops_with_one_line_and_no_change(dsn: str) -> None:
    holding = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(dsn, 8.0, holding))
    holder.start()
    holding.wait(10)
    before = catalog(dsn)
    result = migrate(
        "--with", "priority", "--lock-timeout", "100ms", "--lock-attempts", "2", dsn=dsn
    )
    after = catalog(dsn)
    holder.join()
    assert result.returncode == 1
    line = [row for row in result.stderr.splitlines() if row.startswith("drain: error: ")]
    assert line == [
        "drain: error: 0003_priority: no lock on public.jobs in 2 attempts of 0.1 s; the "
        "steps before it stay applied: run drain migrate again when the table is less busy"
    ]
    assert after == before


def test_an_invalid_index_left_by_a_failed_build_is_dropped_and_rebuilt(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('q', '{}'), ('q', '{}')")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY jobs_priority_idx ON jobs (queue)")
        conn.execute("ALTER TABLE jobs ADD COLUMN priority integer NOT NULL DEFAULT 0")
    assert ("jobs_priority_idx", False) in [row[:2] for row in catalog(dsn)["indexes"]]
    # Not named again: a step half done is finished by any migration.
    result = migrate(dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert "applied 0003_priority" in result.stderr
    indexes = {name: (valid, text) for name, valid, text in catalog(dsn)["indexes"]}
    valid, definition = indexes["jobs_priority_idx"]
    assert valid and "(queue, priority DESC, run_at) WHERE (status = 'queued'" in definition


def test_an_index_of_drains_name_and_another_shape_is_refused(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE INDEX jobs_priority_idx ON jobs (queue)")
    before = catalog(dsn)
    result = migrate("--with", "priority", dsn=dsn)
    assert result.returncode == 1
    assert "index jobs_priority_idx on public.jobs is not the index priorities need" in (
        one_error_line(result)
    )
    assert catalog(dsn) == before


def test_the_priority_check_holds_a_sane_range(dsn: str) -> None:
    assert migrate("--with", "priority", dsn=dsn).returncode == 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (payload, priority) VALUES ('{}', 32767), ('{}', -32767)")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO jobs (payload, priority) VALUES ('{}', 32768)")


def test_the_python_api_migrates_and_reports(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        report = migrations.migrate(conn, JobTable(), ["priority"])
        assert [a.step for a in report.applied] == ["0003_priority"]
        assert report.after.done == ("priority",)
        assert migrations.migrate(conn, JobTable(), ["priority"]).applied == []
        assert conn.execute("SHOW lock_timeout").fetchone() == ("0",)


def test_a_second_migration_at_once_is_refused_and_changes_nothing(dsn: str) -> None:
    """Two at once would each drop the other's index while CONCURRENTLY builds it."""
    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, -1)", (JobTable().lock_key,))
        before = catalog(dsn)
        result = migrate("--with", "priority", dsn=dsn)
        assert result.returncode == 1
        assert "another migration of public.jobs is under way" in one_error_line(result)
        assert catalog(dsn) == before
    assert migrate("--with", "priority", dsn=dsn).returncode == 0
