"""The schema: init, a table made by hand from the article, odd names, versions, drift."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from drain.core.errors import SchemaError
from drain.core.table import JobTable
from drain.store import claims, fencing, producer, schema, upkeep
from tests.support import add_jobs, drain_cli, statuses, summary_of

ARTICLE_DDL = """
CREATE TABLE jobs (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue        text        NOT NULL DEFAULT 'default',
  payload      jsonb       NOT NULL,
  status       text        NOT NULL DEFAULT 'queued'
               CHECK (status IN ('queued', 'running', 'done', 'failed')),
  run_at       timestamptz NOT NULL DEFAULT now(),
  attempts     int         NOT NULL DEFAULT 0,
  max_attempts int         NOT NULL DEFAULT 5,
  locked_until timestamptz,
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX jobs_ready_idx ON jobs (queue, run_at) WHERE status = 'queued';

INSERT INTO jobs (payload)
SELECT jsonb_build_object('email_id', g) FROM generate_series(1, 10) AS g;
"""

ODD = JobTable(schema='work "queue"; x', name="my jobs; DROP TABLE x")


def exercise_every_statement(conn: psycopg.Connection[Any], table: JobTable) -> None:
    """Enqueue, claim, complete, fail, snooze, extend, release, reap, archive: all on ``table``."""
    with conn.transaction():
        producer.enqueue(conn, {"k": 1}, table=table)
        producer.enqueue_many(conn, [{"k": n} for n in range(5)], table=table)
    claimed = claims.send_claim(conn, table, "default", 6).result().jobs
    assert len(claimed) == 6
    assert fencing.extend(conn, table, claimed, 60).owned == {j.id for j in claimed}
    assert fencing.send_complete(conn, table, claimed[:2]).result().lost == ()
    assert fencing.send_fail(
        conn, table, [fencing.Failure(claimed[2], "boom")]
    ).result().retried == (claimed[2].id,)
    assert (
        fencing.send_snooze(conn, table, [fencing.Snooze(claimed[3], delay=5)]).result().lost == ()
    )
    assert fencing.release(conn, table, claimed[4:5]).lost == ()
    assert fencing.extend(conn, table, claimed[5:], 0).lost == ()
    assert upkeep.reap(conn, table).requeued == 1
    inspection = schema.inspect(conn, table)
    assert inspection.table_oid is not None
    done_before = statuses(conn, table).get("done", 0)
    outcome = upkeep.archive(conn, table, inspection.table_oid, older_than=0, mode="move")
    assert outcome.archived == done_before >= 2
    assert statuses(conn, table) == {"queued": 4}


def test_init_is_idempotent_and_records_its_version(empty_dsn: str) -> None:
    first = drain_cli("init", "--json", dsn=empty_dsn)
    second = drain_cli("init", "--json", dsn=empty_dsn)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert summary_of(first)["created"] is True
    assert summary_of(second)["created"] is False
    with psycopg.connect(empty_dsn) as conn:
        inspection = schema.inspect(conn, JobTable())
    assert inspection.version == 1 and inspection.archive_exists and inspection.runs_exists


def test_a_table_made_by_hand_from_the_article_works_with_every_statement(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        table = JobTable()
        inspection = schema.inspect(conn, table)
        assert inspection.version is None and inspection.drift() == []
        inspection.check_runnable()
        # The article's ten jobs, then everything drain does.
        drained = claims.send_claim(conn, table, "default", 100).result().jobs
        assert [j.payload["email_id"] for j in drained] == list(range(1, 11))
        fencing.send_complete(conn, table, drained).result()
        conn.execute("CREATE TABLE jobs_archive (LIKE jobs, archived_at timestamptz)")
        exercise_every_statement(conn, table)

    result = drain_cli("init", dsn=empty_dsn)
    assert result.returncode == 0, result.stderr
    assert "verified public.jobs" in result.stderr
    assert "table made by hand: compatible with drain" in result.stderr


def test_a_hand_made_table_without_drain_init_can_be_drained(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
    result = drain_cli("run", "--exec", "cat > /dev/null", "--json", dsn=empty_dsn)
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert summary["done"] == 10
    assert any(note["code"] == "archive_table_missing" for note in summary["notes"])


def test_odd_schema_and_table_names_are_quoted_everywhere(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        schema.init(conn, ODD)
        exercise_every_statement(conn, ODD)
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    result = drain_cli(
        "run",
        "--schema",
        ODD.schema,
        "--table",
        ODD.name,
        "--exec",
        "true",
        "--json",
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["table"] == f"{ODD.schema}.{ODD.name}"


def test_a_run_refuses_a_newer_or_older_schema_without_writing(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    add_jobs(conn, 3)
    for comment, word in (
        ("drain schema version 99", "newer"),
        ("drain schema version 0", "older"),
    ):
        conn.execute(sql.SQL("COMMENT ON TABLE jobs IS {}").format(sql.Literal(comment)))
        result = drain_cli("run", "--exec", "true", dsn=dsn)
        assert result.returncode == 1
        assert word in result.stderr and result.stderr.count("\n") == 1
        assert statuses(conn) == {"queued": 3}
        assert conn.execute("SELECT count(*) FROM drain_runs").fetchone() == (0,)


def test_drift_is_reported_and_never_altered(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE jobs (id bigint PRIMARY KEY, queue text, payload json)")
        with pytest.raises(SchemaError, match="column payload is json, expected jsonb"):
            schema.init(conn, JobTable())
    result = drain_cli("init", dsn=empty_dsn)
    assert result.returncode == 1
    assert "column status is missing" in result.stderr


def test_print_sql_and_grants_print_without_a_database(quiet_env: None) -> None:
    ddl = drain_cli("init", "--print-sql", "--schema", "work", "--table", "tasks")
    assert ddl.returncode == 0
    assert 'CREATE TABLE IF NOT EXISTS "work"."tasks"' in ddl.stdout
    assert 'CREATE INDEX IF NOT EXISTS "tasks_ready_idx"' in ddl.stdout
    assert 'COMMENT ON TABLE "work"."tasks" IS \'drain schema version 1\'' in ddl.stdout
    grants = drain_cli("init", "--print-grants", "drain worker")
    assert grants.returncode == 0
    assert (
        'GRANT UPDATE (status, attempts, max_attempts, run_at, locked_until, last_error) ON "public"."jobs" TO "drain worker";'
        in grants.stdout
    )
    assert "GRANT DELETE" not in grants.stdout.replace("-- GRANT DELETE", "")


def test_the_printed_sql_creates_a_working_schema(empty_dsn: str) -> None:
    ddl = drain_cli("init", "--print-sql")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ddl.stdout.encode())
        inspection = schema.inspect(conn, JobTable())
    assert inspection.version == 1 and inspection.drift() == []


def _relations(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "ORDER BY relname"
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize(
    ("name", "size", "derived"),
    [
        ("q" * 63, 63, "its archive table's name would be 71"),
        ("r" * 58, 58, "its archive table's name would be 66"),
        ("s" * 52, 52, "its running index's name would be 64"),
        ("p" * 51, 51, "its priority index's name would be 64"),
        ("é" * 26, 52, "its running index's name would be 64"),  # 26 characters, 52 bytes
    ],
)
def test_a_table_name_whose_derived_names_postgresql_would_cut_is_refused(
    empty_dsn: str, name: str, size: int, derived: str
) -> None:
    """A 63-character table: init exited 0 claiming an archive that PostgreSQL had cut
    to the queue table's own name, with no ready index, and archive failed."""
    for command in (("init",), ("run", "--exec", "true"), ("archive",), ("status",)):
        result = drain_cli(*command, "--table", name, dsn=empty_dsn)
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr == (
            f"drain: error: the table name {name!r} is {size} bytes: {derived}, and "
            "PostgreSQL keeps 63 bytes of a name; use a table name of at most 50 bytes\n"
        )
    assert _relations(empty_dsn) == []


def test_the_longest_table_name_allowed_works_in_bytes_too(empty_dsn: str) -> None:
    for name in ("t" * 50, "é" * 25):  # 50 bytes each
        created = drain_cli(
            "init", "--table", name, "--with", "dedupe", "--with", "priority", dsn=empty_dsn
        )
        assert created.returncode == 0, created.stderr
        assert f"created archive table {name}_archive" in created.stderr
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            add_jobs(conn, 3, table=JobTable("public", name))
            conn.execute(
                sql.SQL("UPDATE {} SET created_at = now() - interval '30 days'").format(
                    sql.Identifier(name)
                )
            )
        run = drain_cli("run", "--exec", "true", "--table", name, "--json", dsn=empty_dsn)
        assert run.returncode == 0, run.stderr
        assert (summary_of(run)["done"], summary_of(run)["archived"]) == (3, 3)
    relations = _relations(empty_dsn)
    for name in ("t" * 50, "é" * 25):
        for suffix in (
            "",
            "_archive",
            "_ready_idx",
            "_running_idx",
            "_dedupe_idx",
            "_priority_idx",
        ):
            assert f"{name}{suffix}" in relations


def test_a_schema_name_past_63_bytes_is_refused(empty_dsn: str) -> None:
    result = drain_cli("init", "--schema", "w" * 64, dsn=empty_dsn)
    assert result.returncode == 2
    assert "the schema name" in result.stderr and "is 64 bytes" in result.stderr


def test_init_never_reports_an_object_it_did_not_create(empty_dsn: str) -> None:
    """An index jobs_ready_idx on another table: CREATE INDEX IF NOT EXISTS skipped it
    with a notice, and init said it had created public.jobs, without its ready index."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE other (x int); CREATE INDEX jobs_ready_idx ON other (x)")
    result = drain_cli("init", dsn=empty_dsn)
    assert result.returncode == 1
    assert result.stderr == (
        "drain: error: init could not create the ready index jobs_ready_idx: another object "
        "in schema public holds the name; nothing was changed\n"
    )
    assert _relations(empty_dsn) == ["jobs_ready_idx", "other"]
