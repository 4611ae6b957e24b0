"""The psycopg 3 connection behind whatever an app holds: Django, SQLAlchemy, asyncio.

Each submodule is imported only by the app that uses it (``import drain`` never
loads Django or SQLAlchemy). What they share is here: finding the psycopg 3
connection behind whatever the app holds, and refusing, with a message that
names the fix, a connection drain cannot use.
"""

from __future__ import annotations

from typing import Any

import psycopg

from drain.core.errors import NotPsycopg3

ADVICE = (
    "drain needs a psycopg 3 connection; with SQLAlchemy use the postgresql+psycopg driver "
    "(postgresql+psycopg://...), with Django its postgresql backend with psycopg 3 installed "
    "(pip install 'psycopg[binary]')"
)


def _described(conn: object) -> str:
    kind = type(conn)
    return f"{kind.__module__}.{kind.__qualname__}"


def sync_connection(conn: object) -> psycopg.Connection[Any]:
    """``conn`` itself when it is a psycopg 3 Connection, else :class:`NotPsycopg3`."""
    if isinstance(conn, psycopg.Connection):
        return conn
    if isinstance(conn, psycopg.AsyncConnection):
        raise NotPsycopg3(
            "this is a psycopg AsyncConnection: use drain.enqueue_async / "
            "drain.enqueue_many_async with it (await them)"
        )
    raise NotPsycopg3(f"{ADVICE}; got a {_described(conn)}")


def async_connection(conn: object) -> psycopg.AsyncConnection[Any]:
    """``conn`` itself when it is a psycopg 3 AsyncConnection, else :class:`NotPsycopg3`."""
    if isinstance(conn, psycopg.AsyncConnection):
        return conn
    if isinstance(conn, psycopg.Connection):
        raise NotPsycopg3(
            "this is a psycopg Connection, not an AsyncConnection: use drain.enqueue / "
            "drain.enqueue_many with it"
        )
    raise NotPsycopg3(f"{ADVICE} (an AsyncConnection for the async API); got a {_described(conn)}")
