"""``drain migrate``: bring a queue table of any earlier version to this drain's, live.

What a table needs is read from the database, never assumed: its version from
the table's comment (none: a table made by hand from the article, version 0),
and each extra from the catalog (the column, a valid index, a validated check).
The steps still missing are applied in order, each statement on its own under
a short ``lock_timeout`` (:func:`drain.store.steps.apply_live`), so runs go on
claiming and completing while it works: no statement rewrites the table, none
holds a lock a run waits on for longer than the timeout, and no row is touched.
A step half done (a migration stopped midway, an INVALID index) is finished by
the next migration, whether or not its extra was named again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors

from drain.core.errors import ReadOnlyServer, SchemaError, StatementAborted, UsageError
from drain.core.settings.defaults import DEFAULT_LOCK_ATTEMPTS, DEFAULT_LOCK_TIMEOUT
from drain.core.table import SCHEMA_VERSION, JobTable
from drain.store import extras, schema, steps

# A run's claims and completions hold their locks for milliseconds: a migration
# that waits longer than this for one is behind something else (a long
# transaction, a VACUUM FULL), gives up the place in the lock queue it would
# hold every run behind, and tries again after a pause.


@dataclass(frozen=True)
class State:
    """Where one queue table stands: its version and which extras it has."""

    table: JobTable
    version: int
    done: tuple[str, ...]
    started: tuple[str, ...]

    def describe(self) -> str:
        parts = f" with {', '.join(self.done)}" if self.done else ""
        return f"schema version {self.version}{parts}"


@dataclass(frozen=True)
class Plan:
    """The steps a table still needs, in order, to reach this drain's version and extras."""

    state: State
    steps: tuple[steps.Step, ...]

    @property
    def current(self) -> bool:
        return not self.steps


@dataclass(frozen=True)
class Applied:
    step: str
    seconds: float
    retries: int


@dataclass
class Report:
    """What ``drain migrate`` found, did, and left the table at."""

    before: State
    after: State
    applied: list[Applied] = field(default_factory=list)
    seconds: float = 0.0


def check_extras(names: Sequence[str]) -> list[str]:
    known = steps.extras()
    for name in names:
        if name not in known:
            raise UsageError(f"--with: no extra named {name!r}; known: {', '.join(known)}")
    return [name for name in known if name in names]


def check_from(version: int) -> None:
    """Refuse a ``--from`` that is no version this drain knows (a usage error)."""
    if not 0 <= version <= SCHEMA_VERSION:
        raise UsageError(
            f"--from {version}: this drain knows schema versions 0 (a table made by hand "
            f"from the article) to {SCHEMA_VERSION}"
        )


def print_sql(table: JobTable, from_version: int, wanted_extras: Sequence[str] = ()) -> str:
    """The steps from ``from_version`` on, as files, for users with their own migration tool.

    Printed as drain applies them to a live table: each statement on its own,
    ``CREATE INDEX CONCURRENTLY`` outside a transaction.
    """
    check_from(from_version)
    chosen = check_extras(wanted_extras)
    wanted = [s for s in steps.chain() if s.version is not None and s.version > from_version]
    wanted += [steps.extras()[name] for name in chosen]
    if not wanted:
        return (
            f"-- drain: schema version {from_version} is this drain's ({SCHEMA_VERSION}); "
            "no step to apply\n"
        )
    note = (
        "-- drain: steps for a live table: run each statement on its own, outside a\n"
        "-- transaction (CREATE INDEX CONCURRENTLY cannot run inside one).\n"
    )
    return note + "\n".join(steps.source_text(table, s, live=True) for s in wanted)


def statements_from(
    table: JobTable, from_version: int, wanted_extras: Sequence[str] = ()
) -> list[str]:
    """The statements after ``from_version`` (and of the extras), one string each.

    For another tool's migrations (Django's RunSQL, Alembic's ``op.execute``): run
    them in order, each on its own, outside a transaction; every one is
    idempotent. What drain migrate adds on top is the lock retries and the
    rebuild of an INVALID index.
    """
    check_from(from_version)
    chosen = check_extras(wanted_extras)
    wanted = [s for s in steps.chain() if s.version is not None and s.version > from_version]
    wanted += [steps.extras()[name] for name in chosen]
    return [
        statement.text.as_string(None)
        for step in wanted
        for statement in steps.statements(table, step)
    ]


def read_state(conn: psycopg.Connection[Any], table: JobTable) -> State:
    """Where the table stands; refuses what no migration of this drain may touch."""
    inspection = schema.inspect(conn, table)
    name = table.qualified
    if inspection.read_only:
        raise ReadOnlyServer("the server is read-only; nothing was changed")
    if not inspection.jobs_exists or inspection.table_oid is None:
        raise SchemaError(f"queue table {name} does not exist; create it with `drain init`")
    version = inspection.version
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaError(
            f"queue table {name} has schema version {version}, newer than this drain "
            f"({SCHEMA_VERSION}); drain never downgrades a table: upgrade drain"
        )
    problems = inspection.drift()
    if problems:
        raise SchemaError(f"queue table {name} has an unexpected shape: {'; '.join(problems)}")
    found = extras.read(conn, table, inspection.table_oid, inspection.columns)
    return State(table, version or 0, found.done, found.started)


def plan(conn: psycopg.Connection[Any], table: JobTable, wanted_extras: Sequence[str] = ()) -> Plan:
    """The steps ``table`` still needs: the chain past its version, then the extras.

    An extra is applied when named and not complete, or when a part of it is
    there already (a migration stopped midway): the same state either way.
    """
    chosen = check_extras(wanted_extras)
    state = read_state(conn, table)
    wanted = [s for s in steps.chain() if s.version is not None and s.version > state.version]
    for name, step in steps.extras().items():
        if name not in state.done and (name in chosen or name in state.started):
            wanted.append(step)
    return Plan(state, tuple(wanted))


def dry_run(
    conn: psycopg.Connection[Any], table: JobTable, wanted_extras: Sequence[str] = ()
) -> str:
    """The SQL ``migrate`` would apply now, changing nothing ('' when the table is current)."""
    pending = plan(conn, table, wanted_extras)
    return "\n".join(steps.source_text(table, s, live=True) for s in pending.steps)


def migrate(
    conn: psycopg.Connection[Any],
    table: JobTable,
    wanted_extras: Sequence[str] = (),
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    attempts: int = DEFAULT_LOCK_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Report:
    """Apply the steps ``table`` needs on an autocommit connection, while runs work on it.

    Raises :class:`SchemaError` for a table it may not touch (missing, newer,
    another shape) before any change, and the driver's error when a lock was not
    had after ``attempts`` tries (what was applied stays: every step is idempotent,
    and the next migration goes on from there).
    """
    started = clock()
    pending = plan(conn, table, wanted_extras)
    report = Report(before=pending.state, after=pending.state)
    if pending.current:
        return report
    with steps.live(conn, table, lock_timeout):
        for step in pending.steps:
            began = clock()
            try:
                retries = steps.apply_live(conn, table, step, attempts=attempts, sleep=sleep)
            except (errors.LockNotAvailable, errors.DeadlockDetected):
                raise StatementAborted(
                    f"{step.label}: no lock on {table.qualified} in {attempts} attempts of "
                    f"{lock_timeout:g} s; the steps before it stay applied: run drain migrate "
                    "again when the table is less busy"
                ) from None
            report.applied.append(Applied(step.label, clock() - began, retries))
    report.after = read_state(conn, table)
    missing = [name for name in check_extras(wanted_extras) if name not in report.after.done]
    if report.after.version != SCHEMA_VERSION or missing:
        raise SchemaError(
            f"queue table {table.qualified} is at {report.after.describe()} after the "
            f"migration, not at version {SCHEMA_VERSION}"
            + (f" with {', '.join(missing)}" if missing else "")
        )
    report.seconds = clock() - started
    return report
