"""The optional parts of a queue table, as the catalog shows them: done, half done, or absent.

An extra (``--with dedupe``, ``--with priority``) is a numbered step of
``sql/migrations/`` that leaves no version behind, so what tells it applied is
the catalog itself: its column of the right type, its index built and valid, its
check validated. A part of another shape under drain's name is refused before
anything changes, since ``... IF NOT EXISTS`` would skip it and leave the table
without what the extra promises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from drain.core.errors import SchemaError
from drain.core.table import PRIORITY_CHECK, JobTable
from drain.store import steps
from drain.store.sqlfiles import statement_for

# (kind, name) of each index and constraint of the table: (valid, definition).
Found = dict[tuple[str, str], tuple[bool, str]]


@dataclass(frozen=True)
class Extras:
    """Which extras a table has whole, and which it has a part of (a migration stopped midway)."""

    done: tuple[str, ...]
    started: tuple[str, ...]


def is_dedupe_index(definition: str) -> bool:
    return (
        definition.startswith("CREATE UNIQUE INDEX")
        and "(queue, dedupe_key)" in definition
        and "'queued'" in definition
        and "'running'" in definition
    )


def is_priority_index(definition: str) -> bool:
    return "(queue, priority DESC, run_at)" in definition and "status = 'queued'" in definition


def read(
    conn: psycopg.Connection[Any], table: JobTable, table_oid: int, columns: dict[str, str]
) -> Extras:
    """Where each extra stands on the table (``columns`` as :func:`schema.inspect` read them)."""
    rows = conn.execute(statement_for(table, "migration_state"), {"table_oid": table_oid})
    found = {(kind, item): (bool(valid), text) for kind, item, valid, text in rows.fetchall()}
    done, started = [], []
    for extra in steps.extras():
        parts = _parts(table, extra, columns, found)
        if all(parts):
            done.append(extra)
        elif any(parts):
            started.append(extra)
    return Extras(tuple(done), tuple(started))


def _parts(table: JobTable, extra: str, columns: dict[str, str], found: Found) -> list[bool]:
    names = table.derived()
    if extra == "dedupe":
        return [
            _column(table, columns, "dedupe_key", "text"),
            _index(table, found, names["dedupe index"], is_dedupe_index, "dedupe keys"),
        ]
    if extra == "priority":
        check = found.get(("constraint", PRIORITY_CHECK))
        return [
            _column(table, columns, "priority", "integer"),
            check is not None and check[0],
            _index(table, found, names["priority index"], is_priority_index, "priorities"),
        ]
    raise AssertionError(f"no catalog check for the extra {extra!r}")


def _column(table: JobTable, columns: dict[str, str], column: str, kind: str) -> bool:
    found = columns.get(column)
    if found not in (None, kind):
        raise SchemaError(
            f"queue table {table.qualified} has a {column} column of type {found}, "
            f"expected {kind}; nothing was changed"
        )
    return found is not None


def _index(
    table: JobTable, found: Found, index: str, fits: Callable[[str], bool], what: str
) -> bool:
    valid, definition = found.get(("index", index), (False, ""))
    if valid and not fits(definition):
        raise SchemaError(
            f"index {index} on {table.qualified} is not the index {what} need; drop or "
            "rename it and run again; nothing was changed"
        )
    return valid


def added_note(table: JobTable, extra: str, *, added: bool) -> str:
    """What init says of an extra it was asked for."""
    names = table.derived()
    if extra == "dedupe":
        what = "dedupe keys"
        parts = f"column dedupe_key, index {names['dedupe index']}"
    else:
        what = "priorities"
        parts = f"column priority, check {PRIORITY_CHECK}, index {names['priority index']}"
    return f"added {what}: {parts}" if added else f"{what} already in place"
