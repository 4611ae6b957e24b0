"""The numbered schema steps in ``sql/migrations/``, and applying one on a live table.

Each file ``NNNN_name.sql`` is one idempotent step. Its first line says what it
is: ``-- version: N`` for a step of the schema's own chain (it ends by recording
version N in the table's comment), or ``-- extra: NAME`` for an optional part
(``--with NAME``), applied only when asked for and told apart by the catalog.

A step is applied in one of two ways. On a new table (``drain init``) it goes
in the caller's transaction with ``CONCURRENTLY`` left out: nothing can use the
table yet. On an existing table, which runs may be draining, each statement is
its own transaction under a short ``lock_timeout``, tried again when the lock
was not had in time, and ``CREATE INDEX CONCURRENTLY`` runs as written; an
INVALID index a failed attempt left is dropped before the next one.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors, sql

from drain.core.errors import SchemaError
from drain.core.table import PRIORITY_CHECK, VERSION_COMMENT_PREFIX, JobTable
from drain.store import sqlfiles

log = logging.getLogger("drain.migrate")

_HEADER = re.compile(r"--\s*(version|extra):\s*(\S+)\s*$")
_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
# The index a statement creates, by its placeholder: dropped first when INVALID.
_CREATES_INDEX = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+\{(\w+)\}"
)
_CONCURRENTLY = re.compile(r"\bINDEX\s+CONCURRENTLY\s+")
# A statement ends with a semicolon at the end of a line (drain's own files only).
_STATEMENT_END = re.compile(r";[ \t]*(?:\n|$)")


@dataclass(frozen=True)
class Step:
    """One file of ``sql/migrations/``: its number, name and what it brings."""

    number: int
    name: str
    version: int | None
    extra: str | None

    @property
    def file(self) -> str:
        return f"migrations/{self.name}"

    @property
    def label(self) -> str:
        """How output names the step: its file's stem (``0003_priority``)."""
        return self.name


@functools.cache
def all_steps() -> tuple[Step, ...]:
    """Every step shipped with this drain, in order; checked once, when first read."""
    found = []
    directory = sqlfiles.directory() / "migrations"
    for path in sorted(directory.iterdir()):
        match = _FILE.match(path.name)
        if match is None:
            continue
        first = path.read_text(encoding="utf-8").splitlines()[0]
        header = _HEADER.match(first)
        if header is None:
            raise RuntimeError(
                f"{path.name}: the first line must be -- version: N or -- extra: NAME"
            )
        kind, value = header.groups()
        found.append(
            Step(
                number=int(match.group(1)),
                name=path.stem,
                version=int(value) if kind == "version" else None,
                extra=value if kind == "extra" else None,
            )
        )
    return tuple(found)


def chain() -> list[Step]:
    """The schema's own steps, version 1 first."""
    return [step for step in all_steps() if step.version is not None]


def extras() -> dict[str, Step]:
    """The optional parts by name (``dedupe``, ``priority``), in the order of their files."""
    return {step.extra: step for step in all_steps() if step.extra is not None}


def latest_version() -> int:
    return max(step.version for step in chain() if step.version is not None)


def placeholders(table: JobTable, step: Step) -> dict[str, sql.Composable]:
    """Every name a step may use, as driver-quoted identifiers (and its version literal)."""
    names = table.derived()
    version = step.version if step.version is not None else 0
    return {
        **sqlfiles.identifiers(table),
        "dedupe_index": sql.Identifier(names["dedupe index"]),
        "priority_index": sql.Identifier(names["priority index"]),
        "priority_check": sql.Identifier(PRIORITY_CHECK),
        "version_comment": sql.Literal(f"{VERSION_COMMENT_PREFIX}{version}"),
    }


def _plain(source: str) -> str:
    """The step for a new table, in one transaction: ``CONCURRENTLY`` left out."""
    lines = source.splitlines(keepends=True)
    return "".join(
        line if line.lstrip().startswith("--") else _CONCURRENTLY.sub("INDEX ", line)
        for line in lines
    )


def source_text(table: JobTable, step: Step, *, live: bool) -> str:
    """The whole file as SQL for this table, its header comment included (for printing)."""
    source = sqlfiles.raw(step.file)
    statement = sql.SQL(source if live else _plain(source))
    return statement.format(**placeholders(table, step)).as_string(None)


def transaction_statement(table: JobTable, step: Step) -> sql.Composed:
    """The step as one statement for the caller's transaction, on a table no one uses yet."""
    return sql.SQL(_plain(sqlfiles.text(step.file))).format(**placeholders(table, step))


@dataclass(frozen=True)
class Statement:
    """One statement of a step, and the index it builds (to drop first when INVALID)."""

    text: sql.Composed
    index: str | None


def statements(table: JobTable, step: Step) -> list[Statement]:
    """The step's statements one by one, as a live table gets them."""
    names = placeholders(table, step)
    plain_names = {
        "ready_index": "ready index",
        "running_index": "running index",
        "runs_index": "run index",
        "schedules_index": "schedule index",
        "dedupe_index": "dedupe index",
        "priority_index": "priority index",
    }
    found = []
    for chunk in _STATEMENT_END.split(sqlfiles.text(step.file)):
        code = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("--"))
        if not code.strip():
            continue
        created = _CREATES_INDEX.search(code)
        index = table.derived()[plain_names[created.group(1)]] if created else None
        found.append(Statement(sql.SQL(code.strip()).format(**names), index))
    return found


# How a statement that did not get its lock in time is tried again: a pause that
# doubles from 0.2 s up to 5 s, with jitter so that two migrations do not meet again.
FIRST_PAUSE = 0.2
LONGEST_PAUSE = 5.0


def pause(attempt: int) -> float:
    return float(min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0))


def drop_invalid_index(conn: psycopg.Connection[Any], table: JobTable, index: str) -> bool:
    """Drop ``index`` when it is there and INVALID (a failed CONCURRENTLY build); say whether."""
    row = conn.execute(
        sqlfiles.text("index_valid"), {"schema": table.schema, "index": index}
    ).fetchone()
    if row is None or row[0]:
        return False
    log.warning("dropping the invalid index %s a failed build left, to build it again", index)
    conn.execute(
        sql.SQL(sqlfiles.text("drop_index")).format(index=sql.Identifier(table.schema, index))
    )
    return True


def apply_live(
    conn: psycopg.Connection[Any],
    table: JobTable,
    step: Step,
    *,
    attempts: int,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Apply ``step`` statement by statement on an autocommit connection; return the retries.

    The connection's ``lock_timeout`` bounds every wait for a lock; a statement
    that timed out (or lost a deadlock) is tried again after a pause, up to
    ``attempts`` times, and the last failure is raised.
    """
    retries = 0
    for statement in statements(table, step):
        for attempt in range(1, attempts + 1):
            try:
                if statement.index is not None:
                    drop_invalid_index(conn, table, statement.index)
                conn.execute(statement.text)
                break
            except (errors.LockNotAvailable, errors.DeadlockDetected) as exc:
                if attempt == attempts:
                    raise
                retries += 1
                wait = pause(attempt)
                log.warning(
                    "%s: %s; trying again in %.1f s (attempt %d of %d)",
                    step.label,
                    " ".join(str(exc).split()),
                    wait,
                    attempt + 1,
                    attempts,
                )
                sleep(wait)
    return retries


@contextlib.contextmanager
def live(conn: psycopg.Connection[Any], table: JobTable, lock_timeout: float) -> Iterator[None]:
    """The session for a migration's live statements: alone on the table, a short lock timeout.

    Raises :class:`SchemaError` when another migration of the table holds its
    advisory lock (nothing was changed); resets both once the statements are done.
    """
    key = {"lock_key": table.lock_key}
    row = conn.execute(sqlfiles.text("migrate_lock"), key).fetchone()
    if row is None or not row[0]:
        raise SchemaError(
            f"another migration of {table.qualified} is under way (drain migrate, or init "
            "--with); nothing was changed: run this one again once it is done"
        )
    try:
        conn.execute(
            "SELECT set_config('lock_timeout', %s, false)", (f"{round(lock_timeout * 1000)}ms",)
        )
        yield
    finally:
        if not conn.broken and not conn.closed:
            conn.execute("RESET lock_timeout")
            conn.execute(sqlfiles.text("migrate_unlock"), key)
