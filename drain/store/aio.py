"""Enqueue from asyncio apps (FastAPI, aiohttp, any ``async def``) on psycopg's AsyncConnection.

The same semantics and statements as :func:`drain.enqueue` and
:func:`drain.enqueue_many`: the job is inserted in the caller's open transaction
and drain commits nothing; a dedupe key answers the id of the job already
holding it. The arguments are checked and turned into parameters by the very
helpers the sync functions use (:mod:`drain.store.producer`), so the two cannot drift.

Named ``aio``, not ``asyncio``, so that ``import asyncio`` inside the package
always means the standard library's.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import psycopg

from drain.core.settings.defaults import DEFAULT_MAX_ATTEMPTS
from drain.core.table import JobTable
from drain.store import priorities
from drain.store.driver import async_connection
from drain.store.producer import (
    _KEY_TRIES,
    Enqueued,
    _dedupe_missing,
    check_many,
    copy_row,
    enqueue_params,
    key_unsettled,
    keyed_answer,
    keyed_batches,
    payload_texts,
)
from drain.store.sqlfiles import statement_for


async def enqueue_async(
    conn: psycopg.AsyncConnection[Any],
    payload: Any,
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    key: str | None = None,
    priority: int | None = None,
) -> Enqueued:
    """Insert one job in the caller's current transaction; :func:`drain.enqueue`, awaited.

    A connection that is not a psycopg 3 ``AsyncConnection`` raises
    :class:`~drain.core.errors.NotPsycopg3` before anything is sent.
    """
    aconn = async_connection(conn)
    params = enqueue_params(
        payload,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        key=key,
        priority=priority,
    )
    target = table or JobTable()
    if key is None:
        with priorities.refused_without_column(target):
            named = priorities.statement("enqueue", priority)
            cursor = await aconn.execute(statement_for(target, named), params)
        row = await cursor.fetchone()
        assert row is not None
        return Enqueued(row[0])
    statement = statement_for(target, priorities.statement("enqueue_key", priority))
    for _ in range(_KEY_TRIES):
        try:
            with priorities.refused_without_column(target):
                cursor = await aconn.execute(statement, params)
            answer = keyed_answer(await cursor.fetchone())
        except psycopg.Error as exc:
            missing = _dedupe_missing(exc, target)
            if missing is None:
                raise
            raise missing from exc
        if answer is not None:
            return answer
    raise key_unsettled(key, queue)


async def enqueue_many_async(
    conn: psycopg.AsyncConnection[Any],
    payloads: Iterable[Any],
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    keys: Iterable[str | None] | None = None,
    priority: int | None = None,
) -> int:
    """Insert many jobs in the caller's transaction; :func:`drain.enqueue_many`, awaited.

    Returns how many are new: one ``COPY`` without keys; with keys, batches in
    key order that skip a key already held, as the sync form does.
    """
    aconn = async_connection(conn)
    when_params = check_many(payloads, run_at, delay, keys)
    priorities.check(priority)
    target = table or JobTable()
    texts = None if keys is not None else payload_texts(payloads)
    cursor = await aconn.execute(statement_for(target, "database_time"), when_params)
    when = await cursor.fetchone()
    assert when is not None
    if texts is None:
        assert keys is not None
        return await _enqueue_keyed(
            aconn, target, payloads, keys, queue, when[0], max_attempts, priority
        )
    named = priorities.statement("enqueue_copy", priority)
    with priorities.refused_without_column(target):
        async with aconn.cursor() as cur, cur.copy(statement_for(target, named)) as copy:
            for text in texts:
                await copy.write_row(copy_row(queue, text, when[0], max_attempts, priority))
    return len(texts)


async def _enqueue_keyed(
    conn: psycopg.AsyncConnection[Any],
    table: JobTable,
    payloads: Iterable[Any],
    keys: Iterable[str | None],
    queue: str,
    when: datetime,
    max_attempts: int,
    priority: int | None = None,
) -> int:
    statement = statement_for(table, priorities.statement("enqueue_keys", priority))
    new = 0
    for params in keyed_batches(payloads, keys, queue, when, max_attempts, priority):
        try:
            with priorities.refused_without_column(table):
                cursor = await conn.execute(statement, params)
        except psycopg.Error as exc:
            missing = _dedupe_missing(exc, table)
            if missing is None:
                raise
            raise missing from exc
        new += max(cursor.rowcount, 0)
    return new
