"""Login roles a scenario creates on a server, and removes again.

Roles are cluster-wide, and the PostgreSQL 15 of CI is shared by the whole
session, so each role gets a unique name and is dropped with everything granted
to it when the test ends.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import conninfo, sql


@dataclass(frozen=True)
class Role:
    name: str
    password: str
    database_dsn: str

    def dsn(self, password: str | None = None) -> str:
        """The database's DSN, logging in as this role (with ``password``, or its own)."""
        params = conninfo.conninfo_to_dict(self.database_dsn)
        params.update(user=self.name, password=self.password if password is None else password)
        return conninfo.make_conninfo("", **params)

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn(), autocommit=True)


@contextlib.contextmanager
def login_role(database_dsn: str, password: str, prefix: str = "fault") -> Iterator[Role]:
    """A new LOGIN role with ``password``; dropped (after its grants) on the way out."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)
            )
        )
    try:
        yield Role(name, password, database_dsn)
    finally:
        with psycopg.connect(database_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (name,),
            )
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
