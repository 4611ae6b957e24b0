"""Load the statements in ``sql/`` by name.

The SQL is the product, so it lives in reviewable ``.sql`` files rather than in
Python strings. In a wheel the files sit inside the package (``drain/sql``); in a
source checkout they sit at the top of the repository. Header comments are
stripped before a statement is sent: they are for readers, not for the wire.
"""

from __future__ import annotations

import functools
from pathlib import Path

from psycopg import sql

from drain.core.table import JobTable


@functools.cache
def _sql_directory() -> Path:
    # The wheel installs the files as package data beside this module (hatch's
    # force-include: drain/sql); a zipped install is not supported, so a plain
    # path does. A source checkout keeps them at the top of the repository.
    package = Path(__file__).resolve().parents[1]
    packaged = package / "sql"
    if packaged.is_dir():
        return packaged
    return package.parent / "sql"


def directory() -> Path:
    """Where the ``.sql`` files are (``migrations/`` holds the numbered schema steps)."""
    return _sql_directory()


@functools.cache
def text(name: str) -> str:
    """The statement in ``sql/<name>.sql`` without its leading comment block."""
    source = (_sql_directory() / f"{name}.sql").read_text(encoding="utf-8")
    lines = source.splitlines()
    while lines and (lines[0].startswith("--") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines).strip() + "\n"


def raw(name: str) -> str:
    """The whole file, header comment included (for ``drain init --print-sql``)."""
    return (_sql_directory() / f"{name}.sql").read_text(encoding="utf-8")


def names() -> list[str]:
    """Every statement name shipped with this drain."""
    return sorted(
        entry.name.removesuffix(".sql")
        for entry in _sql_directory().iterdir()
        if entry.name.endswith(".sql")
    )


def compose(name: str, **identifiers: sql.Composable) -> sql.Composed:
    """The statement with its ``{placeholders}`` filled by driver-quoted identifiers."""
    return sql.SQL(text(name)).format(**identifiers)


def identifiers(table: JobTable) -> dict[str, sql.Composable]:
    """The table's names as driver-quoted identifiers, by the placeholder ``sql/`` uses."""
    names = table.derived()
    schema = table.schema
    return {
        "schema": sql.Identifier(schema),
        "jobs": sql.Identifier(schema, table.name),
        "archive": sql.Identifier(schema, names["archive table"]),
        "runs": sql.Identifier(schema, names["run table"]),
        "ready_index": sql.Identifier(names["ready index"]),
        "running_index": sql.Identifier(names["running index"]),
        "runs_index": sql.Identifier(names["run index"]),
        "schedules": sql.Identifier(schema, names["schedule table"]),
        "schedules_index": sql.Identifier(names["schedule index"]),
    }


@functools.cache
def statement_for(table: JobTable, name: str) -> bytes:
    """The statement ``sql/<name>.sql`` for this table, composed once and cached.

    Composed to plain bytes so the driver's prepared-statement cache sees the
    same query text on every call of the hot path.
    """
    return compose(name, **identifiers(table)).as_bytes(None)
