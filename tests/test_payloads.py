"""Payloads jsonb cannot store are refused by the enqueue API before anything is sent.

A NUL character (``\\u0000``) or a lone surrogate in a payload used to reach the
server, which refused it with a multi-part error quoting the whole payload back
(``unsupported Unicode escape sequence ... CONTEXT: JSON data ... unnamed portal
parameter $2 = '...'``), and a bulk enqueue's COPY aborted the caller's
transaction on the way. Now each form raises one ``ValueError`` before sending
the payloads, and the caller's transaction stays usable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import pq

import drain
from tests.support import statuses

NUL = {"user": 42, "note": "a\x00b"}
BAD = {
    "NUL in a value": NUL,
    "NUL in a key": {"a\x00": 1},
    "NUL deep in a list": {"edits": [["ok", {"x": "\x00"}]]},
    "lone surrogate": {"name": "\udc00"},
}
Call = Callable[[psycopg.Connection[Any], Any], Any]
CALLS: dict[str, Call] = {
    "enqueue": lambda conn, payload: drain.enqueue(conn, payload, queue="q"),
    "enqueue_many (COPY)": lambda conn, payload: drain.enqueue_many(conn, [{"n": 1}, payload]),
    "enqueue_many (keys)": lambda conn, payload: drain.enqueue_many(
        conn, [{"n": 1}, payload], keys=["a", "b"]
    ),
}


def _enable_dedupe(dsn: str) -> None:
    from tests.support import drain_cli

    assert drain_cli("init", "--with", "dedupe", dsn=dsn).returncode == 0


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("variant", list(BAD))
def test_the_sync_api_refuses_before_sending(dsn: str, call: str, variant: str) -> None:
    if call.endswith("(keys)"):
        _enable_dedupe(dsn)
    with psycopg.connect(dsn) as conn:
        with pytest.raises(ValueError, match="PostgreSQL's jsonb cannot store") as raised:
            CALLS[call](conn, BAD[variant])
        assert "a\x00b" not in str(raised.value) and "udc00" not in str(raised.value)
        # Nothing failed on the server: the transaction goes on.
        assert conn.info.transaction_status != pq.TransactionStatus.INERROR
        drain.enqueue(conn, {"after": 1}, queue="q")
        conn.commit()
        assert statuses(conn) == {"queued": 1}


@pytest.mark.parametrize("variant", list(BAD))
def test_the_async_api_refuses_before_sending(dsn: str, variant: str) -> None:
    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:
            with pytest.raises(ValueError, match="jsonb cannot store"):
                await drain.enqueue_async(aconn, BAD[variant])
            with pytest.raises(ValueError, match="jsonb cannot store"):
                await drain.enqueue_many_async(aconn, [{}, BAD[variant]])
            assert aconn.info.transaction_status != pq.TransactionStatus.INERROR

    asyncio.run(scenario())


def test_what_only_looks_like_a_nul_is_stored(conn: psycopg.Connection[Any]) -> None:
    """A backslash before u0000 is text, and an emoji's surrogate pair is one character."""
    payloads = [{"path": "C:\\u0000"}, {"face": "\U0001f600"}]
    assert drain.enqueue_many(conn, payloads) == 2
    stored = [row[0] for row in conn.execute("SELECT payload FROM jobs ORDER BY id")]
    assert stored == payloads
