"""drain.enqueue_async / drain.enqueue_many_async on psycopg's AsyncConnection.

The same semantics as the sync forms (tests/test_queue.py, tests/test_dedupe.py):
in the caller's transaction, dedupe keys answer the holder's id. Eight tasks on
eight connections race to enqueue, and one real ``drain run`` then runs every
job exactly once.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import drain
from drain.core.errors import DedupeNotEnabled, NotPsycopg3
from tests.support import LEDGER_DDL, drain_cli, executions, statuses, summary_of

TASKS = 8
PER_TASK = 25  # one by one, and as many again in one enqueue_many_async


def enable_dedupe(dsn: str) -> None:
    result = drain_cli("init", "--with", "dedupe", dsn=dsn)
    assert result.returncode == 0, result.stderr


def test_a_job_is_in_the_callers_transaction(dsn: str, conn: psycopg.Connection[Any]) -> None:
    async def scenario() -> tuple[int, int]:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:
            await drain.enqueue_async(aconn, {"order": 1}, queue="emails")
            assert await drain.enqueue_many_async(aconn, [{"n": 1}, {"n": 2}]) == 2
            await aconn.rollback()
            job = await drain.enqueue_async(aconn, {"order": 2}, queue="emails", delay=60)
            seen_before = statuses(conn)
            await aconn.commit()
            return job, len(seen_before)

    job, seen_before = asyncio.run(scenario())
    assert seen_before == 0
    row = conn.execute(
        "SELECT queue, payload, status, run_at > now() + interval '50 seconds' FROM jobs"
    ).fetchall()
    assert row == [("emails", {"order": 2}, "queued", True)]
    assert isinstance(job, drain.Enqueued) and job.new


def test_enqueue_many_async_puts_every_job_in_one_copy(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    async def scenario() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            return await drain.enqueue_many_async(
                aconn, ({"n": n} for n in range(500)), queue="bulk", max_attempts=2
            )

    assert asyncio.run(scenario()) == 500
    rows = conn.execute("SELECT count(*), min(max_attempts), max(max_attempts) FROM jobs")
    assert rows.fetchone() == (500, 2, 2)


def test_the_arguments_are_refused_as_the_sync_forms_refuse_them(dsn: str) -> None:
    async def scenario() -> list[str]:
        refused = []
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:
            for call in (
                lambda: drain.enqueue_async(aconn, {}, run_at=None, delay=1, key=""),
                lambda: drain.enqueue_async(aconn, {1, 2}),
                lambda: drain.enqueue_many_async(aconn, [{}], keys=["a", "b"]),
            ):
                with pytest.raises(ValueError) as error:
                    await call()
                refused.append(str(error.value))
        return refused

    messages = asyncio.run(scenario())
    assert messages[0].startswith("a dedupe key is empty")
    assert messages[1].startswith("payload is not JSON-serialisable")
    assert messages[2] == "1 payloads but 2 keys; give one key each"


def test_keys_answer_the_holders_id_when_dedupe_is_on(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    enable_dedupe(dsn)

    async def scenario() -> tuple[drain.Enqueued, drain.Enqueued, int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            first = await drain.enqueue_async(aconn, {"user": 42}, queue="reindex", key="u42")
            again = await drain.enqueue_async(aconn, {"user": 42}, queue="reindex", key="u42")
            new = await drain.enqueue_many_async(
                aconn, [{"n": 1}, {"n": 2}, {"n": 3}], queue="reindex", keys=["a", "a", "u42"]
            )
            return first, again, new

    first, again, new = asyncio.run(scenario())
    assert (first.duplicate, again.duplicate, again.id) == (False, True, first.id)
    assert new == 1
    assert statuses(conn) == {"queued": 2}


def test_a_key_without_dedupe_says_how_to_enable_it(dsn: str) -> None:
    async def scenario() -> str:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:
            with pytest.raises(DedupeNotEnabled) as error:
                await drain.enqueue_async(aconn, {}, key="k")
            await aconn.rollback()
            with pytest.raises(DedupeNotEnabled):
                await drain.enqueue_many_async(aconn, [{}], keys=["k"])
            return str(error.value)

    assert "drain init --with dedupe" in asyncio.run(scenario())


def test_eight_tasks_racing_on_eight_connections_then_one_run_runs_every_job_once(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    enable_dedupe(dsn)
    conn.execute(LEDGER_DDL)
    shared_keys = [f"shared-{n}" for n in range(10)]  # every task enqueues these

    async def task(number: int, start: asyncio.Barrier) -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:
            await start.wait()
            for n in range(PER_TASK):
                await drain.enqueue_async(aconn, {"task": number, "n": n})
                await asyncio.sleep(0)  # let the other tasks interleave
            await drain.enqueue_many_async(
                aconn, [{"task": number, "bulk": n} for n in range(PER_TASK)]
            )
            for key in shared_keys:
                await drain.enqueue_async(aconn, {"key": key}, key=key)
            await aconn.commit()

    async def race() -> None:
        start = asyncio.Barrier(TASKS)
        await asyncio.gather(*(task(number, start) for number in range(TASKS)))

    asyncio.run(race())
    expected = TASKS * PER_TASK * 2 + len(shared_keys)
    assert statuses(conn) == {"queued": expected}

    run = drain_cli(
        "run", "--handler", "run_app:behave", "--max-seconds", "60", "--json",
        dsn=dsn, env={"LEDGER_DSN": dsn},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert summary_of(run)["done"] == expected
    ran = executions(conn)
    assert len(ran) == expected
    assert set(ran.values()) == {1}
    assert statuses(conn) == {"done": expected}


def foreign_connections() -> list[tuple[str, Callable[[str], Any]]]:
    """Connections that are plainly not psycopg 3's: sqlite3's, and psycopg2's if installed."""
    made: list[tuple[str, Callable[[str], Any]]] = [
        ("sqlite3", lambda dsn: sqlite3.connect(":memory:"))
    ]
    try:
        import psycopg2
    except ImportError:
        return made
    made.append(("psycopg2", psycopg2.connect))
    return made


@pytest.mark.parametrize("driver", foreign_connections(), ids=lambda driver: driver[0])
def test_a_connection_that_is_not_psycopg_3_is_refused_with_what_to_use(
    dsn: str, conn: psycopg.Connection[Any], driver: tuple[str, Callable[[str], Any]]
) -> None:
    name, connect = driver
    foreign = connect(dsn)
    try:
        with pytest.raises(NotPsycopg3) as refused:
            asyncio.run(drain.enqueue_async(foreign, {}))
        with pytest.raises(NotPsycopg3):
            asyncio.run(drain.enqueue_many_async(foreign, [{}]))
    finally:
        foreign.close()
    message = str(refused.value)
    assert message.startswith("drain needs a psycopg 3 connection;")
    assert "postgresql+psycopg driver" in message
    assert name in message  # what it was given
    assert refused.value.exit_code == 2
    assert statuses(conn) == {}


def test_a_sync_psycopg_connection_is_pointed_at_the_sync_api(dsn: str) -> None:
    with psycopg.connect(dsn) as sync, pytest.raises(NotPsycopg3) as refused:
        asyncio.run(drain.enqueue_async(sync, {}))
    assert "use drain.enqueue / drain.enqueue_many" in str(refused.value)


def test_the_plain_enqueue_names_what_to_use_with_another_driver() -> None:
    other = sqlite3.connect(":memory:")
    try:
        for call in (
            lambda: drain.enqueue(other, {}),  # type: ignore[arg-type]
            lambda: drain.enqueue_many(other, [{}]),  # type: ignore[arg-type]
        ):
            with pytest.raises(NotPsycopg3, match="psycopg 3"):
                call()
    finally:
        other.close()
