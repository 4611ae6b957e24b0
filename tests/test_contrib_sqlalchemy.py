"""drain.contrib.sqlalchemy with SQLAlchemy 2.x on postgresql+psycopg and the test's database.

What another connection sees is read on the ``conn`` fixture (autocommit), the
way a run would: a job counts once its transaction has committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from drain.contrib import sqlalchemy as jobs
from drain.core.errors import NotPsycopg3, UsageError
from tests.support import REPO, drain_cli, statuses


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


# -- Alembic: the upgrade guide's revision, run by alembic's own command ---------------------------

ALEMBIC_ENV = """\
import os

from alembic import context
from sqlalchemy import create_engine

engine = create_engine(os.environ["ALEMBIC_TEST_URL"])
with engine.connect() as connection:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
"""


def upgrade_page_revision() -> str:
    """The Alembic revision docs/how-to/upgrade.md shows, as written there."""
    page = (REPO / "docs" / "how-to" / "upgrade.md").read_text()
    start = page.index("# alembic/versions/0001_drain_queue.py\n")
    return page[start : page.index("```", start)]


def alembic(tmp_path: Path, dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    environment["ALEMBIC_TEST_URL"] = url(dsn).render_as_string(hide_password=False)
    environment["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(tmp_path / "alembic.ini"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        cwd=tmp_path,
    )


def test_the_upgrade_pages_alembic_revision_makes_drains_schema_and_refuses_a_downgrade(
    tmp_path: Path, empty_dsn: str, dsn: str
) -> None:
    from tests.test_migrate import catalog

    (tmp_path / "alembic.ini").write_text("[alembic]\nscript_location = alembic\n")
    (tmp_path / "alembic" / "versions").mkdir(parents=True)
    (tmp_path / "alembic" / "env.py").write_text(ALEMBIC_ENV)
    (tmp_path / "alembic" / "versions" / "0001_drain_queue.py").write_text(upgrade_page_revision())
    upgraded = alembic(tmp_path, empty_dsn, "upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    made = drain_cli("init", "--with", "priority", dsn=dsn)
    assert made.returncode == 0, made.stderr
    shape = catalog(empty_dsn)
    assert {**shape, "relations": [r for r in shape["relations"] if "alembic" not in r]} == (
        catalog(dsn)
    )
    current = drain_cli("migrate", "--with", "priority", dsn=empty_dsn)
    assert current.returncode == 0 and "is current" in current.stderr
    downgraded = alembic(tmp_path, empty_dsn, "downgrade", "base")
    assert downgraded.returncode != 0 and "drain never downgrades" in downgraded.stderr
    assert catalog(empty_dsn) == shape


def test_migration_statements_rerun_on_a_table_drain_init_made_change_nothing(
    engine: Engine, dsn: str
) -> None:
    from tests.test_migrate import catalog

    before = catalog(dsn)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for statement in jobs.migration_statements(0):
            connection.exec_driver_sql(statement)
    assert catalog(dsn) == before
    with pytest.raises(UsageError, match="this drain knows schema versions 0"):
        jobs.migration_statements(7)
