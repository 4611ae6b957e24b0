"""``drain init --print-scaler-query``: the backlog query an autoscaler polls, and its grant.

KEDA's postgresql trigger runs the printed query on every poll, so it must stay
cheap however long the queue grows: an Index Only Scan on the ready index, no heap
page (and so no payload) read, a count that stops at its bound. The scaler's role
gets the grant printed beside it and nothing else: it can poll, and it cannot read
a single payload. Everything is read from the command's real output, as a user
would paste it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from drain.core.table import JobTable
from tests.faults.support.roles import login_role
from tests.support import add_jobs, drain_cli

READY_INDEX = "jobs_ready_idx"


def printed(*args: str) -> list[str]:
    """The output of ``drain init --print-scaler-query ARGS``: its lines, comments included."""
    result = drain_cli("init", "--print-scaler-query", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def query_of(lines: list[str]) -> str:
    queries = [line for line in lines if line.startswith("SELECT ")]
    assert len(queries) == 1, lines
    return queries[0]


def grants_of(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("GRANT ")]


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


@pytest.fixture
def backlog(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """A queue table shaped like a real one: most rows finished, with large payloads.

    400 jobs ready now, 150 ready later, 60 running and 6,000 done; vacuumed and
    analyzed, as autovacuum leaves a table between runs.
    """
    # The embedded test server commits asynchronously (for speed); VACUUM marks no
    # page all-visible until the inserts' commits are flushed, which a production
    # server's synchronous commits are. Committed as such, the table is as in production.
    conn.execute("SET synchronous_commit = on")
    big = {"body": "x" * 2000}
    add_jobs(conn, 6000, status="done", payload=big)
    add_jobs(conn, 60, status="running", lease_left=300, payload=big)
    add_jobs(conn, 150, run_in=3600, payload=big)
    add_jobs(conn, 400, run_in=-60, payload=big)
    add_jobs(conn, 400, run_in=-60, queue="emails", payload=big)
    conn.execute("VACUUM (ANALYZE) jobs")
    return conn


def test_the_query_is_an_index_only_scan_on_the_ready_index(
    backlog: psycopg.Connection[Any],
) -> None:
    query = query_of(printed())
    row = backlog.execute(f"EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) {query}").fetchone()
    assert row is not None
    nodes = list(plan_nodes(row[0][0]["Plan"]))
    scans = [node for node in nodes if node.get("Relation Name") == "jobs"]

    assert [node["Node Type"] for node in scans] == ["Index Only Scan"], scans
    assert scans[0]["Index Name"] == READY_INDEX
    # No heap page visited: the payload (or any other column) is never read.
    assert scans[0]["Heap Fetches"] == 0
    assert all("payload" not in str(node.get("Output", [])) for node in nodes)
    # Bounded: the scan stops at the LIMIT (--per-run 100 x 100) rather than reading on.
    assert scans[0]["Actual Rows"] == 800


def test_the_count_stops_at_its_bound(backlog: psycopg.Connection[Any]) -> None:
    counted = backlog.execute(query_of(printed())).fetchone()
    bounded = backlog.execute(query_of(printed("--per-run", "3"))).fetchone()

    assert counted == (800,), "every ready job of every queue, and no later or running one"
    assert bounded == (300,), "--per-run 3: at most 300 counted however many are ready"


def test_the_grant_lets_the_scaler_poll_and_read_no_payload(
    backlog: psycopg.Connection[Any], dsn: str
) -> None:
    with login_role(dsn, "scaler-pw", prefix="scaler") as role:
        lines = printed("--scaler-role", role.name)
        for grant in grants_of(lines):
            backlog.execute(grant)
        with role.connect() as scaler:
            assert scaler.execute(query_of(lines)).fetchone() == (800,)
            # Narrowed to one queue, the query stays within the grant.
            narrowed = query_of(lines).replace("WHERE status", "WHERE queue = 'emails' AND status")
            assert scaler.execute(narrowed).fetchone() == (400,)
            for forbidden in ("SELECT payload FROM jobs", "SELECT * FROM jobs"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    scaler.execute(forbidden)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                scaler.execute("UPDATE jobs SET status = 'failed'")


def test_without_the_grant_the_role_cannot_poll(dsn: str) -> None:
    """The grant is what lets the scaler in: a fresh role alone is refused."""
    with login_role(dsn, "scaler-pw", prefix="scaler") as role:
        query = query_of(printed("--scaler-role", role.name))
        with role.connect() as scaler, pytest.raises(psycopg.errors.InsufficientPrivilege):
            scaler.execute(query)


def test_another_schema_and_table_are_quoted_into_query_and_grant(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    target = JobTable("Work Queue", "jobs")
    init = drain_cli("init", "--schema", target.schema, "--table", target.name, dsn=dsn)
    assert init.returncode == 0, init.stderr
    add_jobs(conn, 5, table=target, run_in=-1)
    with login_role(dsn, "scaler-pw", prefix="scaler") as role:
        lines = printed("--schema", target.schema, "--scaler-role", role.name)
        for grant in grants_of(lines):
            conn.execute(grant)
        with role.connect() as scaler:
            assert scaler.execute(query_of(lines)).fetchone() == (5,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                scaler.execute(
                    sql.SQL("SELECT payload FROM {}").format(sql.Identifier(target.schema, "jobs"))
                )


def test_the_output_names_the_trigger_fields_it_fills() -> None:
    lines = printed("--per-run", "250")
    text = "\n".join(lines)

    assert 'targetQueryValue: "250"' in text
    assert "LIMIT 25000)" in query_of(lines)
    assert [line for line in lines if not line.startswith(("--", "SELECT ", "GRANT "))] == []
