"""The PostgreSQL server the benchmarks run on, and the databases they create on it.

Either an embedded server of our own (PostgreSQL 18 from the ``embedded``
extra, started with fsync on and default settings, so commits cost what they
cost in production) or the server behind ``--dsn``, where the suite creates one
database per system and drops them all at the end. Systems never share a
database: one system's dead rows must not slow another down.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import conninfo, sql

from drain.core.table import JobTable
from drain.store import schema

# What the figures depend on, read from the server and stored with the results.
REPORTED_SETTINGS = (
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "shared_buffers",
    "wal_level",
    "max_wal_size",
    "checkpoint_timeout",
    "autovacuum",
)


def with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo.conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return conninfo.make_conninfo("", **params)


@dataclass(frozen=True)
class ServerInfo:
    version: str
    version_num: int
    settings: dict[str, str]
    embedded: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "version_num": self.version_num,
            "settings": self.settings,
            "embedded": self.embedded,
        }


class BenchServer:
    """Where databases come from: ``--dsn`` (an admin connection) or an embedded server."""

    def __init__(self, dsn: str | None = None) -> None:
        self._embedded: Any = None
        if dsn is None:
            from drain.ops.embedded import EmbeddedServer

            self._embedded = EmbeddedServer(durable=True).start()
            dsn = self._embedded.dsn()
        self.admin_dsn = dsn
        self._created: list[str] = []
        self.info = self._describe()

    def _describe(self) -> ServerInfo:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            settings = {name: _show(conn, name) for name in REPORTED_SETTINGS}
            return ServerInfo(
                version=_show(conn, "server_version"),
                version_num=conn.info.server_version,
                settings=settings,
                embedded=self._embedded is not None,
            )

    def create_database(self, label: str) -> str:
        """A new empty database named after ``label``; returns its DSN."""
        name = f"drain_bench_{label}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._created.append(name)
        return with_dbname(self.admin_dsn, name)

    def drain_database(self, label: str) -> str:
        """A new database with drain's schema at public.jobs."""
        dsn = self.create_database(label)
        with psycopg.connect(dsn, autocommit=True) as conn:
            schema.init(conn, JobTable())
        return dsn

    def close(self) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            for name in self._created:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        self._created.clear()
        if self._embedded is not None:
            self._embedded.cleanup()


def _show(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    return str(row[0]) if row else "?"


@contextlib.contextmanager
def bench_server(dsn: str | None) -> Iterator[BenchServer]:
    server = BenchServer(dsn)
    try:
        yield server
    finally:
        server.close()


def settle(conn: psycopg.Connection[Any], *tables: str) -> None:
    """Bring tables to a steady state before a timed run: statistics fresh, dirty pages written.

    ``VACUUM (ANALYZE)`` sets the visibility map and the planner's row counts;
    ``CHECKPOINT`` (superusers only) keeps a checkpoint from landing inside
    the timed run. Without either, run-to-run noise swamps the differences.
    """
    for table in tables:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(*table.split("."))))
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
        conn.execute("CHECKPOINT")
