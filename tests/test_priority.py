"""Priorities: ``drain enqueue --priority``, ``enqueue(..., priority=)``, the claim by priority.

A table gets the column on purpose (``drain migrate --with priority``; here the
same DDL from :mod:`tests.support.priority`). With it, a run claims within each
queue the highest priority first, then the oldest run_at; without it, nothing
changes, and a priority asked for is refused in one line.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest

import drain
from drain.core.table import JobTable
from drain.store import claims, producer, schema
from tests.support import LEDGER_DDL, drain_cli, summary_of
from tests.support.priority import add_dedupe_column, add_priority_column

APP = ["--app", "run_app"]
REFUSAL = (
    "drain: error: queue table public.jobs has no priority column; add it with "
    "`drain migrate --with priority` (or `drain init --with priority`)"
)


@pytest.fixture
def prioritised(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    add_priority_column(conn)
    return conn


def priorities_of(conn: psycopg.Connection[Any]) -> dict[int, int]:
    return dict(conn.execute("SELECT id, priority FROM jobs").fetchall())  # type: ignore[arg-type]


def ran_in_order(conn: psycopg.Connection[Any]) -> list[int]:
    rows = conn.execute("SELECT job_id FROM ledger ORDER BY at, job_id").fetchall()
    return [row[0] for row in rows]


# -- the claim ------------------------------------------------------------------------


def test_the_schema_check_sees_the_column(conn: psycopg.Connection[Any]) -> None:
    assert not schema.inspect(conn, JobTable()).has_priority
    add_priority_column(conn)
    assert schema.inspect(conn, JobTable()).has_priority


def test_claim_by_priority_takes_the_highest_first_then_the_oldest(
    prioritised: psycopg.Connection[Any],
) -> None:
    conn = prioritised
    table = JobTable()
    ids = {}
    # (name, priority, seconds ago ready): older run_at first within a priority
    for name, priority, ago in [
        ("low-old", -1, 300),
        ("zero-old", 0, 200),
        ("high-new", 10, 10),
        ("zero-new", 0, 5),
        ("high-old", 10, 100),
        ("later", 99, -3600),  # not ready yet, whatever its priority
    ]:
        with conn.transaction():
            delay = -ago
            ids[name] = int(
                producer.enqueue(conn, {"name": name}, priority=priority, delay=delay, table=table)
            )
    other = int(producer.enqueue(conn, {"name": "other"}, queue="other", priority=1000))
    first = claims.send_claim(conn, table, "default", 3, by_priority=True).result()
    assert [job.id for job in first.jobs] == [ids["high-old"], ids["high-new"], ids["zero-old"]]
    rest = claims.send_claim(conn, table, "default", 10, by_priority=True).result()
    assert [job.id for job in rest.jobs] == [ids["zero-new"], ids["low-old"]]
    assert other not in {job.id for job in first.jobs + rest.jobs}


def test_a_run_serves_priorities_through_the_cli(
    prioritised: psycopg.Connection[Any], dsn: str
) -> None:
    conn = prioritised
    conn.execute(LEDGER_DDL)
    order = []
    for priority in (0, 5, -3, 5, 20, 0):
        enqueued = drain_cli("enqueue", "default", "{}", "--priority", str(priority), dsn=dsn)
        assert enqueued.returncode == 0, enqueued.stderr
        order.append(priority)
    plain = drain_cli("enqueue", "default", '{"plain": true}', "--json", dsn=dsn)
    assert plain.returncode == 0, plain.stderr
    assert "priority" not in json.loads(plain.stdout)
    ran = drain_cli("run", *APP, "--json", "--concurrency", "1", dsn=dsn, env={"LEDGER_DSN": dsn})
    assert ran.returncode == 0, ran.stderr
    assert summary_of(ran)["done"] == 7
    by_id = priorities_of(conn)
    ran_priorities = [by_id[job_id] for job_id in ran_in_order(conn)]
    assert ran_priorities == [20, 5, 5, 0, 0, 0, -3]
    # within a priority, the oldest first (ids follow the enqueue order here)
    zeros = [job_id for job_id in ran_in_order(conn) if by_id[job_id] == 0]
    assert zeros == sorted(zeros)


def test_a_table_without_the_column_runs_as_before(conn: psycopg.Connection[Any], dsn: str) -> None:
    conn.execute(LEDGER_DDL)
    for _ in range(3):
        assert drain_cli("enqueue", "default", "{}", dsn=dsn).returncode == 0
    ran = drain_cli("run", *APP, "--json", dsn=dsn, env={"LEDGER_DSN": dsn})
    assert ran.returncode == 0, ran.stderr
    assert summary_of(ran)["done"] == 3


# -- enqueue -------------------------------------------------------------------------------


def test_enqueue_priority_is_refused_in_one_line_without_the_column(dsn: str) -> None:
    result = drain_cli("enqueue", "default", "{}", "--priority", "3", dsn=dsn)
    assert result.returncode == 2
    assert result.stderr.strip() == REFUSAL
    from_file = drain_cli(
        "enqueue", "default", "--file", "-", "--priority", "3", dsn=dsn, input="{}\n{}\n"
    )
    assert from_file.returncode == 2
    assert from_file.stderr.strip() == REFUSAL


def test_the_python_api_refuses_a_priority_without_the_column(
    conn: psycopg.Connection[Any],
) -> None:
    for call in (
        lambda: drain.enqueue(conn, {}, priority=1),
        lambda: drain.enqueue_many(conn, [{}, {}], priority=1),
    ):
        with (
            pytest.raises(drain.PriorityNotEnabled, match="drain migrate --with priority"),
            conn.transaction(),
        ):
            call()
    # without a priority nothing needs the column
    with conn.transaction():
        drain.enqueue(conn, {})
        assert drain.enqueue_many(conn, [{}, {}]) == 2


def test_enqueue_and_enqueue_many_store_the_priority(prioritised: psycopg.Connection[Any]) -> None:
    conn = prioritised
    with conn.transaction():
        one = drain.enqueue(conn, {"a": 1}, priority=7)
        plain = drain.enqueue(conn, {"a": 2})
        assert drain.enqueue_many(conn, [{"b": 1}, {"b": 2}], queue="bulk", priority=-2) == 2
    stored = priorities_of(conn)
    assert stored[int(one)] == 7 and stored[int(plain)] == 0
    rows = conn.execute("SELECT priority FROM jobs WHERE queue = 'bulk'").fetchall()
    assert [row[0] for row in rows] == [-2, -2]


def test_keyed_jobs_keep_their_priority(prioritised: psycopg.Connection[Any]) -> None:
    conn = prioritised
    add_dedupe_column(conn)
    with conn.transaction():
        first = drain.enqueue(conn, {}, key="k1", priority=4)
        again = drain.enqueue(conn, {}, key="k1", priority=9)
        assert drain.enqueue_many(conn, [{}, {}], keys=["k2", "k1"], priority=3) == 1
    assert again.duplicate and int(again) == int(first)
    rows = conn.execute("SELECT dedupe_key, priority FROM jobs ORDER BY dedupe_key").fetchall()
    assert rows == [("k1", 4), ("k2", 3)]  # the first enqueue of a key wins


def test_the_async_forms_take_a_priority(prioritised: psycopg.Connection[Any], dsn: str) -> None:
    async def enqueue_both() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:
            await drain.enqueue_async(aconn, {"async": 1}, priority=11)
            await drain.enqueue_many_async(aconn, [{}, {}], queue="abulk", priority=12)
            await aconn.commit()

    asyncio.run(enqueue_both())
    rows = prioritised.execute("SELECT queue, priority FROM jobs ORDER BY id").fetchall()
    assert rows == [("default", 11), ("abulk", 12), ("abulk", 12)]


def test_the_async_forms_refuse_a_priority_without_the_column(dsn: str) -> None:
    async def enqueue_one() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:
            await drain.enqueue_async(aconn, {}, priority=1)

    with pytest.raises(drain.PriorityNotEnabled):
        asyncio.run(enqueue_one())


@pytest.mark.parametrize("bad", [True, 1.5, "3"])
def test_a_priority_that_is_not_an_int_is_refused_before_sending(
    prioritised: psycopg.Connection[Any], bad: Any
) -> None:
    with pytest.raises(TypeError, match="a priority is an int"):
        drain.enqueue(prioritised, {}, priority=bad)


def test_a_priority_beyond_the_column_is_refused(
    prioritised: psycopg.Connection[Any], dsn: str
) -> None:
    with pytest.raises(ValueError, match="a priority is between"):
        drain.enqueue(prioritised, {}, priority=2**31)
    result = drain_cli("enqueue", "default", "{}", "--priority", str(2**31), dsn=dsn)
    assert result.returncode == 2
    assert result.stderr.strip() == ("drain: error: --priority must be between -32,767 and 32,767")


# -- what the commands show --------------------------------------------------------------


def test_jobs_and_status_show_priorities_where_the_column_exists(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    assert drain_cli("enqueue", "emails", "{}", dsn=dsn).returncode == 0
    plain = drain_cli("jobs", dsn=dsn)
    assert plain.returncode == 0, plain.stderr
    assert "PRIORITY" not in plain.stdout
    assert "priority" not in drain_cli("status", "--fail-on", "none", dsn=dsn).stdout
    add_priority_column(conn)
    for args in (("emails", '{"vip": true}', "--priority", "10"), ("emails", "{}")):
        assert drain_cli("enqueue", *args, dsn=dsn).returncode == 0
    listed = drain_cli("jobs", "--status", "queued", dsn=dsn)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:4] == ["ID", "QUEUE", "STATUS", "PRIORITY"]
    assert sorted(row.split()[3] for row in rows) == ["0", "0", "10"]
    as_json = json.loads(drain_cli("jobs", "--json", dsn=dsn).stdout)
    assert sorted(row["priority"] for row in as_json) == [0, 0, 10]
    vip = next(row["id"] for row in as_json if row["priority"] == 10)
    shown = drain_cli("jobs", "show", str(vip), dsn=dsn)
    assert "priority:     10" in shown.stdout
    status = drain_cli("status", "--fail-on", "none", dsn=dsn)
    assert "ready by priority (highest first):\n  emails: 10: 1, 0: 2" in status.stdout
    data = json.loads(drain_cli("status", "--fail-on", "none", "--json", dsn=dsn).stdout)
    assert data["priorities"] == {
        "emails": [{"priority": 10, "ready": 1}, {"priority": 0, "ready": 2}]
    }
