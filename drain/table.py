"""The names of one queue's tables, and its statements composed with those names.

A queue is a table the user may put in any schema under any name; every statement
in ``sql/`` refers to it through ``{jobs}`` (and ``{archive}``, ``{runs}``,
``{schedules}``), which
this module fills with driver-quoted identifiers. Nothing here formats SQL by hand.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

from psycopg import sql

from drain import sqlfiles
from drain.settings import DEFAULT_SCHEMA as DEFAULT_SCHEMA
from drain.settings import DEFAULT_TABLE as DEFAULT_TABLE

RUNS_TABLE = "drain_runs"
SCHEDULES_TABLE = "drain_schedules"
SCHEMA_VERSION = 1
VERSION_COMMENT_PREFIX = "drain schema version "


@dataclass(frozen=True)
class JobTable:
    """One queue table and its companions, named the way the user chose."""

    schema: str = DEFAULT_SCHEMA
    name: str = DEFAULT_TABLE

    @property
    def archive_name(self) -> str:
        return f"{self.name}_archive"

    @property
    def runs_name(self) -> str:
        return RUNS_TABLE

    @property
    def schedules_name(self) -> str:
        return SCHEDULES_TABLE

    @property
    def qualified(self) -> str:
        """A display name (not for SQL): ``schema.table``."""
        return f"{self.schema}.{self.name}"

    @property
    def lock_key(self) -> int:
        """A stable 31-bit key for this table's advisory locks (runner slots)."""
        return zlib.crc32(f"drain:{self.schema}.{self.name}".encode()) & 0x7FFFFFFF

    def identifiers(self) -> dict[str, sql.Composable]:
        return {
            "schema": sql.Identifier(self.schema),
            "jobs": sql.Identifier(self.schema, self.name),
            "archive": sql.Identifier(self.schema, self.archive_name),
            "runs": sql.Identifier(self.schema, self.runs_name),
            "ready_index": sql.Identifier(f"{self.name}_ready_idx"),
            "running_index": sql.Identifier(f"{self.name}_running_idx"),
            "runs_index": sql.Identifier(f"{self.runs_name}_started_idx"),
            "schedules": sql.Identifier(self.schema, self.schedules_name),
            "schedules_index": sql.Identifier(f"{self.schedules_name}_due_idx"),
        }

    def statement(self, name: str) -> bytes:
        """The statement ``sql/<name>.sql`` for this table, composed once and cached.

        Composed to plain bytes so the driver's prepared-statement cache sees
        the same query text on every call of the hot path.
        """
        return _compose(self, name)


@functools.cache
def _compose(table: JobTable, name: str) -> bytes:
    return sqlfiles.compose(name, **table.identifiers()).as_bytes(None)
