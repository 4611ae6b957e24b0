"""Fixtures of the fault suite: a ledger per test, runs that never outlive a test, and
a PostgreSQL server the suite owns, so it can restart it and make it ask for passwords.

The owned server is an embedded PostgreSQL started once per session in both CI
runs (the session's own server may be one we must not restart). Its ``pg_hba``
trusts ``postgres`` on loopback and asks every other role for a SCRAM password.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from drain.core.table import JobTable
from drain.ops.embedded import EmbeddedServer
from drain.store import schema
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Runs
from tests.support import with_dbname

FIGURES_VARIABLE = "DRAIN_FAULT_FIGURES"

HBA = """\
local all postgres trust
host  all postgres 127.0.0.1/32 trust
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
"""


@pytest.fixture(scope="session")
def soak(request: pytest.FixtureRequest) -> bool:
    """True under ``--soak``: scenarios run at their full (or larger) sizes."""
    return bool(request.config.getoption("--soak"))


@pytest.fixture
def ledger_conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the test's database, with the ledger tables created."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger_audit.create(conn)
        yield conn


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    started = Runs(tmp_path)
    try:
        yield started
    finally:
        started.cleanup()


class OwnedServer:
    """The suite's own embedded server: restartable, with password authentication."""

    def __init__(self, server: EmbeddedServer) -> None:
        self.server = server

    @property
    def admin_dsn(self) -> str:
        return self.server.dsn()

    def restart(self, mode: str) -> None:
        self.server.restart(mode)

    def database(self) -> str:
        """A fresh database with drain's schema and the ledger; returns its admin DSN."""
        name = f"fault_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        target = with_dbname(self.admin_dsn, name)
        with psycopg.connect(target, autocommit=True) as conn:
            schema.init(conn, JobTable())
            ledger_audit.create(conn)
        return target

    def drop(self, dsn: str) -> None:
        name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        with psycopg.connect(self.admin_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
            )


@pytest.fixture(scope="session")
def owned_server() -> Iterator[OwnedServer]:
    # fsync off is safe against the crashes we cause (the OS keeps what was written),
    # but every acknowledged commit must be written before a crash: the ledger
    # must not lose what it saw, or a restart would look like a stale completion.
    server = EmbeddedServer(durable=False, settings={"synchronous_commit": "on"})
    hba = server.directory / "pg_hba.conf"
    hba.write_text(HBA)
    hba.chmod(0o644)
    server.settings["hba_file"] = str(hba)
    server.start()
    try:
        yield OwnedServer(server)
    finally:
        server.cleanup()


@pytest.fixture
def owned_dsn(owned_server: OwnedServer) -> Iterator[str]:
    """A database of this test's own on the owned server (schema and ledger ready)."""
    target = owned_server.database()
    try:
        yield target
    finally:
        with psycopg.connect(owned_server.admin_dsn, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
            admin.execute("SELECT pg_reload_conf()")
        owned_server.drop(target)


Figures = Callable[..., None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Record a scenario's figures; the report (tests/faults/report.py) collects them."""

    def record(scenario: str, **values: Any) -> None:
        path = os.environ.get(FIGURES_VARIABLE)
        if not path:
            return
        if "owned_dsn" in request.fixturenames:
            owned: OwnedServer = request.getfixturevalue("owned_server")
            server = f"PostgreSQL {owned.server.version} (the suite's own)"
        else:
            server = f"PostgreSQL {request.getfixturevalue('server_version')}"
        line = {"scenario": scenario, "test": request.node.nodeid, "server": server, **values}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(line, default=str) + "\n")

    return record
