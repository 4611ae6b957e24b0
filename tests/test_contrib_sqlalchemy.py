"""drain.contrib.sqlalchemy with SQLAlchemy 2.x on postgresql+psycopg and the test's database.

What another connection sees is read on the ``conn`` fixture (autocommit), the
way a run would: a job counts once its transaction has committed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from drain.contrib import sqlalchemy as jobs
from drain.core.errors import NotPsycopg3
from tests.support import drain_cli, statuses


def url(dsn: str, driver: str = "psycopg") -> URL:
    params = conninfo_to_dict(dsn)
    port = params.pop("port", None)
    return URL.create(
        f"postgresql+{driver}",
        username=params.pop("user", None),
        password=params.pop("password", None),
        host=params.pop("host", None),
        port=int(port) if port else None,
        database=params.pop("dbname", None),
        query={key: str(value) for key, value in params.items()},
    )


@pytest.fixture
def engine(dsn: str) -> Iterator[Engine]:
    made = create_engine(url(dsn))
    yield made
    made.dispose()


def jobs_seen(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def notes(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute("CREATE TABLE notes (note text NOT NULL)")
    return conn


# -- Session ---------------------------------------------------------------------------


def test_a_session_commits_the_job_with_its_own_writes(
    engine: Engine, notes: psycopg.Connection[Any]
) -> None:
    with Session(engine) as session:
        session.execute(text("INSERT INTO notes VALUES ('committed')"))
        job = jobs.enqueue(session, {"order": 1}, queue="emails")
        assert jobs_seen(notes) == 0  # not before the commit
        session.commit()
    row = notes.execute("SELECT queue, payload FROM jobs WHERE id = %s", (job,)).fetchone()
    assert row == ("emails", {"order": 1})
    assert notes.execute("SELECT note FROM notes").fetchall() == [("committed",)]


def test_a_session_rolls_the_job_back_with_its_own_writes(
    engine: Engine, notes: psycopg.Connection[Any]
) -> None:
    with Session(engine) as session:
        session.execute(text("INSERT INTO notes VALUES ('rolled back')"))
        jobs.enqueue(session, {"order": 2})
        assert jobs.enqueue_many(session, [{"n": 1}, {"n": 2}]) == 2
        session.rollback()
    assert statuses(notes) == {}
    assert notes.execute("SELECT count(*) FROM notes").fetchone() == (0,)


def test_a_session_that_closes_without_committing_leaves_no_job(
    engine: Engine, conn: psycopg.Connection[Any]
) -> None:
    with Session(engine) as session:
        jobs.enqueue(session, {"order": 3})
    assert jobs_seen(conn) == 0


def test_enqueue_begins_the_session_transaction_it_joins(
    engine: Engine, conn: psycopg.Connection[Any]
) -> None:
    with Session(engine) as session, session.begin():
        assert jobs.enqueue_many(session, [{"n": n} for n in range(5)], queue="bulk") == 5
    assert statuses(conn) == {"queued": 5}


def test_kick_after_commit_runs_once_after_the_commit(
    engine: Engine, conn: psycopg.Connection[Any]
) -> None:
    calls: list[int] = []
    with Session(engine) as session:
        jobs.enqueue(session, {"order": 4})
        jobs.kick_after_commit(session, lambda: calls.append(jobs_seen(conn)))
        with session.begin_nested():  # a savepoint's commit is not the commit
            jobs.enqueue(session, {"order": 5})
        assert calls == []
        session.commit()
        assert calls == [2]  # after the commit, with both jobs visible to others
        jobs.enqueue(session, {"order": 6})
        session.commit()  # listened to once: the next commit does not kick again
    assert calls == [2]


def test_kick_after_commit_never_runs_when_the_transaction_rolls_back(
    engine: Engine, conn: psycopg.Connection[Any]
) -> None:
    calls: list[str] = []
    with Session(engine) as session:
        jobs.enqueue(session, {"order": 7})
        jobs.kick_after_commit(session, lambda: calls.append("rolled back"))
        session.rollback()
        jobs.enqueue(session, {"order": 8})
        jobs.kick_after_commit(session, lambda: calls.append("committed"))
        session.commit()
    assert calls == ["committed"]
    assert jobs_seen(conn) == 1


# -- Connection ------------------------------------------------------------------------


def test_a_connection_commits_and_rolls_back_the_job(
    engine: Engine, conn: psycopg.Connection[Any]
) -> None:
    with engine.connect() as connection:
        jobs.enqueue(connection, {"order": 9})
        connection.rollback()
        assert jobs_seen(conn) == 0
        job = jobs.enqueue(connection, {"order": 10})  # no begin(): autobegun like a query
        assert jobs_seen(conn) == 0
        connection.commit()
    assert conn.execute("SELECT id FROM jobs").fetchall() == [(job,)]


def test_a_connection_in_begin_enqueues_many_with_keys(
    dsn: str, engine: Engine, conn: psycopg.Connection[Any]
) -> None:
    init = drain_cli("init", "--with", "dedupe", dsn=dsn)
    assert init.returncode == 0, init.stderr
    with engine.begin() as connection:
        first = jobs.enqueue(connection, {"user": 42}, queue="reindex", key="user-42")
        again = jobs.enqueue(connection, {"user": 42}, queue="reindex", key="user-42")
        new = jobs.enqueue_many(
            connection, [{"n": 1}, {"n": 2}, {"n": 3}], queue="reindex", keys=["a", "a", "user-42"]
        )
    assert (first.duplicate, again.duplicate, int(again)) == (False, True, int(first))
    assert new == 1
    assert statuses(conn) == {"queued": 2}


# -- the wrong driver --------------------------------------------------------------------


def test_the_psycopg2_driver_is_refused_with_the_driver_to_use(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    pytest.importorskip("psycopg2")
    other = create_engine(url(dsn, "psycopg2"))
    try:
        with Session(other) as session, pytest.raises(NotPsycopg3) as refused:
            jobs.enqueue(session, {"order": 11})
        with other.connect() as connection, pytest.raises(NotPsycopg3):
            jobs.enqueue_many(connection, [{"order": 12}])
    finally:
        other.dispose()
    message = str(refused.value)
    assert "drain needs a psycopg 3 connection" in message
    assert "postgresql+psycopg driver" in message
    assert "postgresql+psycopg2" in message  # what it was given
    assert refused.value.exit_code == 2
    assert jobs_seen(conn) == 0
