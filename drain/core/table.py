"""The names of one queue's tables: the table the user chose and every name drain derives.

A queue is a table the user may put in any schema under any name. This module
only names and checks; the store composes its statements with these names as
driver-quoted identifiers (:func:`drain.store.sqlfiles.statement_for`), so
nothing below the store needs the database driver.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from drain.core.errors import UsageError
from drain.core.settings import DEFAULT_SCHEMA, DEFAULT_TABLE

RUNS_TABLE = "drain_runs"
SCHEDULES_TABLE = "drain_schedules"
# The schema version a run of this drain works with and ``drain migrate`` brings a
# table to: the last numbered step of sql/migrations/ that is not an extra. A table
# made by hand from the article has no version comment: version 0 to migrate.
SCHEMA_VERSION = 1
VERSION_COMMENT_PREFIX = "drain schema version "
# The priority extra (sql/migrations/0003_priority.sql): its range check's name
# (a constraint's name is the table's own, so it needs no prefix) and its bounds.
PRIORITY_CHECK = "drain_priority_range"
PRIORITY_MIN = -32767
PRIORITY_MAX = 32767
# PostgreSQL keeps this many bytes of a name (NAMEDATALEN - 1) and cuts the rest with
# a notice alone: a 63-byte table's archive, jobs_..._archive cut to 63 bytes, is the
# queue table itself, and CREATE TABLE IF NOT EXISTS then creates nothing.
MAX_NAME_BYTES = 63
# Every name drain derives from the queue table's, by the role of its object: the one
# list the names are made from and checked against.
SUFFIXES = {
    "archive table": "_archive",
    "ready index": "_ready_idx",
    "running index": "_running_idx",
    "dedupe index": "_dedupe_idx",
    "priority index": "_priority_idx",
}
# The companions every queue table of a schema shares, by the same roles.
SHARED_NAMES = {
    "run table": RUNS_TABLE,
    "run index": f"{RUNS_TABLE}_started_idx",
    "schedule table": SCHEDULES_TABLE,
    "schedule index": f"{SCHEDULES_TABLE}_due_idx",
}
MAX_TABLE_NAME_BYTES = MAX_NAME_BYTES - max(len(suffix.encode()) for suffix in SUFFIXES.values())


@dataclass(frozen=True)
class JobTable:
    """One queue table and its companions, named the way the user chose.

    A name PostgreSQL would cut short, the table's or one drain derives from it,
    is refused here (a usage error): every command and the Python API make one.
    """

    schema: str = DEFAULT_SCHEMA
    name: str = DEFAULT_TABLE

    def __post_init__(self) -> None:
        _check_lengths(self)

    def derived(self) -> dict[str, str]:
        """Every name drain gives this queue's objects, by their role (:data:`SUFFIXES`)."""
        return {role: f"{self.name}{suffix}" for role, suffix in SUFFIXES.items()} | SHARED_NAMES

    @property
    def archive_name(self) -> str:
        return self.derived()["archive table"]

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


def _check_lengths(table: JobTable) -> None:
    """Refuse a schema or table name whose own or derived names PostgreSQL would cut.

    Lengths are in bytes (UTF-8), as the server counts them: ``é`` takes two.
    """
    size = len(table.schema.encode())
    if size > MAX_NAME_BYTES:
        raise UsageError(
            f"the schema name {table.schema!r} is {size} bytes; PostgreSQL keeps "
            f"{MAX_NAME_BYTES} bytes of a name: use a schema name of at most {MAX_NAME_BYTES} bytes"
        )
    size = len(table.name.encode())
    if size <= MAX_TABLE_NAME_BYTES:
        return
    role, cut = next(
        (role, len(name.encode()))
        for role, name in table.derived().items()
        if len(name.encode()) > MAX_NAME_BYTES
    )
    raise UsageError(
        f"the table name {table.name!r} is {size} bytes: its {role}'s name would be {cut}, "
        f"and PostgreSQL keeps {MAX_NAME_BYTES} bytes of a name; use a table name of at "
        f"most {MAX_TABLE_NAME_BYTES} bytes"
    )
