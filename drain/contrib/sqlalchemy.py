"""Enqueue from SQLAlchemy 2.x, in the transaction of a Session or a Connection.

The engine must use the psycopg 3 driver (``postgresql+psycopg://...``); the job
goes in on the DBAPI connection under the Session's (or Connection's) own, so it
commits or rolls back with the ORM's writes::

    from drain.contrib import sqlalchemy as jobs

    with Session(engine) as session, session.begin():
        session.add(order)
        jobs.enqueue(session, {"order": order.id}, queue="emails")
        jobs.kick_after_commit(session, wake_a_runner)

Another driver (``postgresql+psycopg2``, ``postgresql+asyncpg``) raises
:class:`~drain.core.errors.NotPsycopg3`.

For Alembic, :func:`migration_statements` gives drain's schema steps (the files of
``sql/migrations/``) as statements for ``op.execute``, in an autocommit block::

    def upgrade() -> None:
        with op.get_context().autocommit_block():
            for statement in migration_statements(from_version=0, extras=["priority"]):
                op.execute(statement)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, SessionTransaction

from drain.core.errors import NotPsycopg3
from drain.core.settings.defaults import DEFAULT_MAX_ATTEMPTS
from drain.core.table import JobTable
from drain.store.driver import ADVICE, sync_connection
from drain.store.migrations import statements_from
from drain.store.producer import Enqueued
from drain.store.producer import enqueue as _enqueue
from drain.store.producer import enqueue_many as _enqueue_many


def connection(session_or_connection: Session | Connection) -> psycopg.Connection[Any]:
    """The psycopg connection in the transaction of ``session_or_connection``.

    A Session begins its transaction here if it has none yet (as its first
    query would); so does a Connection, so that its ``commit()`` commits the job
    (a Connection that never began a transaction ignores a commit, and the
    driver's implicit transaction would be rolled back when the pool takes the
    connection back).
    """
    if isinstance(session_or_connection, Session):
        bound = session_or_connection.connection()
    elif isinstance(session_or_connection, Connection):
        bound = session_or_connection
    else:
        return sync_connection(session_or_connection)  # a psycopg one passes, others say why
    driver = f"{bound.dialect.name}+{bound.dialect.driver}"
    if driver != "postgresql+psycopg":
        raise NotPsycopg3(f"{ADVICE}; this engine uses {driver}")
    if not bound.in_transaction():
        bound.begin()
    return sync_connection(bound.connection.driver_connection)


def enqueue(
    session_or_connection: Session | Connection,
    payload: Any,
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    key: str | None = None,
) -> Enqueued:
    """:func:`drain.enqueue` in the transaction of a Session or Connection."""
    return _enqueue(
        connection(session_or_connection),
        payload,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        table=table,
        key=key,
    )


def enqueue_many(
    session_or_connection: Session | Connection,
    payloads: Iterable[Any],
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    keys: Iterable[str | None] | None = None,
) -> int:
    """:func:`drain.enqueue_many` in the transaction of a Session or Connection."""
    return _enqueue_many(
        connection(session_or_connection),
        payloads,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        table=table,
        keys=keys,
    )


# Where a session keeps the kicks waiting for its commit (Session.info is the
# application's own dict, kept for the session's life).
_KICKS = "drain.kicks"


def kick_after_commit(session: Session, fn: Callable[[], Any]) -> None:
    """Call ``fn`` once, after the session's transaction commits; never if it does not.

    Through the session's ``after_commit`` event: the kicks wait in the session
    and are run once, in the order given, by the commit of the outermost
    transaction. A savepoint (``begin_nested()``) committing is not that commit:
    the jobs are not visible yet. When the outermost transaction ends otherwise
    (a rollback, ``close()``), its kicks are dropped, as Django drops its
    ``on_commit`` callbacks. A kick given during a savepoint that rolls back
    still waits for the outer commit.
    """
    session.info.setdefault(_KICKS, []).append(fn)
    # Two listeners per session, whatever the number of kicks: a listener cannot
    # be removed while its event runs, and one per kick would pile up.
    if not event.contains(session, "after_commit", _run_kicks):
        event.listen(session, "after_commit", _run_kicks)
        event.listen(session, "after_transaction_end", _drop_kicks)


def _run_kicks(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint's commit: the outer transaction may still roll back
    for kick in session.info.pop(_KICKS, ()):
        kick()


def _drop_kicks(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_KICKS, None)


def migration_statements(
    from_version: int = 0, *, extras: Iterable[str] = (), table: JobTable | None = None
) -> list[str]:
    """drain's schema steps after ``from_version``, and the ``extras``, one statement each.

    For an Alembic revision (or any tool that runs SQL): run them in order, each
    on its own outside a transaction (``op.get_context().autocommit_block()``),
    since ``CREATE INDEX CONCURRENTLY`` cannot run inside one. Every statement is
    idempotent, so a revision that runs them again changes nothing. Version 0 is
    an empty database or a table made by hand from the article; ``drain status``
    shows a table's version. A usage error for a version or extra drain does not know.
    """
    return statements_from(table or JobTable(), from_version, list(extras))
