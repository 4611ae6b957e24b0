"""Creating, printing and verifying the queue's tables.

A run reads :func:`inspect` before it writes anything, and refuses a table that is
missing, of another version, or of another shape. ``drain init`` creates what is
missing (idempotently), on a fresh database or beside a table made by hand from
the article, and reports drift instead of altering a table it did not create.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from drain.core.errors import ReadOnlyServer, SchemaError
from drain.core.table import SCHEMA_VERSION, VERSION_COMMENT_PREFIX, JobTable
from drain.store import extras as _extras
from drain.store import steps
from drain.store.rates import RATES_TABLE, rates_identifier
from drain.store.sqlfiles import identifiers, statement_for, text

# How init waits for the table's lock when it adds an extra to a table runs may be
# draining: as drain migrate does by default (drain.store.migrations).
LOCK_TIMEOUT = 2.0
LOCK_ATTEMPTS = 20

EXPECTED_COLUMNS = {
    "id": "bigint",
    "queue": "text",
    "payload": "jsonb",
    "status": "text",
    "run_at": "timestamp with time zone",
    "attempts": "integer",
    "max_attempts": "integer",
    "locked_until": "timestamp with time zone",
    "last_error": "text",
    "created_at": "timestamp with time zone",
}
# Columns the queue's statements read as never NULL (the article declares them NOT
# NULL), with what becomes of a row holding a NULL there. Runs cope with such a
# row, but init reports a column that allows NULL as drift a user should fix.
NOT_NULL_COLUMNS = {
    "queue": "is never claimed",
    "payload": "fails without running",
    "status": "is never claimed",
    "run_at": "is never claimed",
    "attempts": "fails without running",
    "max_attempts": "runs with max_attempts 1",
    "created_at": "fails without running",
}


class Inspection(NamedTuple):
    """What the database says about one queue table, read in one statement."""

    table: JobTable
    jobs_exists: bool
    table_oid: int | None
    comment: str | None
    columns: dict[str, str]
    archive_exists: bool
    runs_exists: bool
    schedules_exists: bool
    read_only: bool
    runner_slot: int | None

    @property
    def version(self) -> int | None:
        """The schema version init recorded, or None for a table made by hand."""
        if not self.comment or not self.comment.startswith(VERSION_COMMENT_PREFIX):
            return None
        try:
            return int(self.comment.removeprefix(VERSION_COMMENT_PREFIX).strip())
        except ValueError:
            return None

    @property
    def has_priority(self) -> bool:
        """Whether the table has the optional priority column (an integer): the run
        then claims by priority (sql/claim_priority.sql); read once, at this check."""
        return self.columns.get("priority") == "integer"

    def drift(self) -> list[str]:
        """Differences from the expected columns that would break a statement."""
        problems = []
        for column, expected in EXPECTED_COLUMNS.items():
            actual = self.columns.get(column)
            if actual is None:
                problems.append(f"column {column} is missing")
            elif actual != expected:
                problems.append(f"column {column} is {actual}, expected {expected}")
        return problems

    def check_runnable(self) -> None:
        """Raise unless a run may write to this table (and nothing has been written yet)."""
        name = self.table.qualified
        if not self.jobs_exists:
            raise SchemaError(f"queue table {name} does not exist; create it with `drain init`")
        version = self.version
        if version is not None and version > SCHEMA_VERSION:
            raise SchemaError(
                f"queue table {name} has schema version {version}, newer than this drain "
                f"understands ({SCHEMA_VERSION}); upgrade drain"
            )
        if version is not None and version < SCHEMA_VERSION:
            raise SchemaError(
                f"queue table {name} has schema version {version}, older than this drain "
                f"({SCHEMA_VERSION}); run `drain migrate` to upgrade it"
            )
        problems = self.drift()
        if problems:
            raise SchemaError(f"queue table {name} has an unexpected shape: {'; '.join(problems)}")
        if self.read_only:
            raise ReadOnlyServer(
                "the server is read-only (a standby, or default_transaction_read_only is on); "
                "nothing was changed"
            )


def inspect(conn: psycopg.Connection[Any], table: JobTable, max_runners: int = 0) -> Inspection:
    """Read the table's shape, version and companions; optionally take a runner slot."""
    params = {
        "schema": table.schema,
        "jobs": table.name,
        "archive": table.archive_name,
        "runs": table.runs_name,
        "schedules": table.schedules_name,
        "lock_key": table.lock_key,
        "max_runners": max_runners,
    }
    row = conn.execute(statement_for(table, "inspect"), params).fetchone()
    assert row is not None
    (
        exists,
        oid,
        comment,
        columns,
        archive_exists,
        runs_exists,
        schedules_exists,
        read_only,
        slot,
    ) = row
    if isinstance(columns, str):
        columns = json.loads(columns)
    return Inspection(
        table=table,
        jobs_exists=bool(exists),
        table_oid=None if oid is None else int(oid),
        comment=comment,
        columns=dict(columns or {}),
        archive_exists=bool(archive_exists),
        runs_exists=bool(runs_exists),
        schedules_exists=bool(schedules_exists),
        read_only=bool(read_only),
        runner_slot=slot,
    )


def nullable_columns(
    conn: psycopg.Connection[Any], table: JobTable, table_oid: int | None
) -> list[str]:
    """Drift in NOT NULL: one line per column that allows NULL, with the fix to apply.

    Reported, not raised: a run copes with the NULLs (the row fails alone), but
    the user should add the constraint the article's table has.
    """
    if table_oid is None:
        return []
    params = {"table_oid": table_oid, "columns": list(NOT_NULL_COLUMNS)}
    names = [row[0] for row in conn.execute(statement_for(table, "nullable_columns"), params)]
    problems = []
    for name in names:
        fix = sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET NOT NULL").format(
            identifiers(table)["jobs"], sql.Identifier(name)
        )
        problems.append(
            f"drift: column {name} allows NULL, expected NOT NULL (a row with NULL there "
            f"{NOT_NULL_COLUMNS[name]}); fix: {fix.as_string(conn)}"
        )
    return problems


def _schema_statement(table: JobTable) -> sql.Composed:
    """Every step of the schema's chain, for a new table in one transaction."""
    return sql.Composed([steps.transaction_statement(table, step) for step in steps.chain()])


# Optional extras ``drain init --with NAME`` adds on purpose: the numbered steps of
# sql/migrations/ that leave the version as it is (``-- extra: NAME``). A statement
# that needs one detects it when used (an enqueue with a dedupe key), and a table
# without it works as before.
EXTRAS = tuple(steps.extras())


def dedupe_index_name(table: JobTable) -> str:
    return table.derived()["dedupe index"]


def _check_extras(extras: Sequence[str]) -> None:
    for extra in extras:
        if extra not in EXTRAS:
            raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")


def ddl(table: JobTable, extras: Sequence[str] = ()) -> str:
    """The DDL ``drain init`` would apply to a new table, for users who run their own migrations.

    The schema's steps whole, then each extra (``--with``) in the order of
    :data:`EXTRAS`; ``CONCURRENTLY`` left out, so it runs in one transaction
    (``drain migrate --print-sql --from N`` prints the steps for a live table).
    """
    _check_extras(extras)
    chosen = [step for name, step in steps.extras().items() if name in extras]
    return "\n".join(
        steps.source_text(table, step, live=False) for step in [*steps.chain(), *chosen]
    )


def has_dedupe(conn: psycopg.Connection[Any], table: JobTable, table_oid: int) -> bool:
    """Whether the table has the dedupe_key column and a unique index ON CONFLICT can use."""
    rows = conn.execute(statement_for(table, "indexes"), {"table_oid": table_oid}).fetchall()
    return any(_extras.is_dedupe_index(definition) for _, definition in rows)


def grants(table: JobTable, role: str) -> str:
    """The least-privilege grants a worker role needs, as SQL text."""
    ids = identifiers(table)
    who = sql.Identifier(role)
    lines = [
        sql.SQL("-- drain worker grants for {jobs}").format(jobs=ids["jobs"]),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {};").format(ids["schema"], who),
        sql.SQL("GRANT SELECT ON {} TO {};").format(ids["jobs"], who),
        sql.SQL(
            "GRANT UPDATE (status, attempts, max_attempts, run_at, locked_until, last_error) "
            "ON {} TO {};"
        ).format(ids["jobs"], who),
        sql.SQL("GRANT SELECT, INSERT ON {} TO {};").format(ids["runs"], who),
        sql.SQL("-- recurring jobs (drain_schedules): a run enqueues what came due"),
        sql.SQL("GRANT INSERT (queue, payload, run_at, max_attempts) ON {} TO {};").format(
            ids["jobs"], who
        ),
        sql.SQL("GRANT SELECT, UPDATE (last_fire, next_fire, fired_at) ON {} TO {};").format(
            ids["schedules"], who
        ),
        sql.SQL("-- archiving (--archive-mode move) also needs:"),
        sql.SQL("-- GRANT DELETE ON {} TO {};").format(ids["jobs"], who),
        sql.SQL("-- GRANT INSERT ON {} TO {};").format(ids["archive"], who),
        sql.SQL("-- (--archive-mode delete needs only the DELETE; vacuum needs the table owner)"),
        sql.SQL(
            "-- queue rates (--queue-rate), once a run has made {}: "
            "GRANT SELECT, INSERT, UPDATE ON {} TO {};"
        ).format(sql.Literal(RATES_TABLE), rates_identifier(table), who),
    ]
    return "\n".join(line.as_string(None) for line in lines) + "\n"


# The scaler's bound on the count: per run times this, so the number it polls
# still tells how many runners a backlog keeps busy while costing a fixed read.
SCALER_BOUND_RUNS = 100
# The columns the scaler's query reads: what its role is granted, and no more.
SCALER_COLUMNS = ("queue", "status", "run_at")


def scaler_bound(per_run: int) -> int:
    """How many ready jobs the scaler's query counts at most: enough for 100 runners."""
    return per_run * SCALER_BOUND_RUNS


def scaler_query(table: JobTable, per_run: int) -> str:
    """The backlog query for an autoscaler (KEDA's postgresql trigger), on one line.

    One line because it goes into a YAML string; the bound is a literal because
    the trigger runs the query as it is, with no parameters.
    """
    # The file's lines joined before the names are filled in: a name may hold spaces.
    source = " ".join(text("scaler_query").split())
    source = source.replace("( ", "(").replace(" )", ")")
    statement = sql.SQL(source).format(
        jobs=identifiers(table)["jobs"], bound=sql.Literal(scaler_bound(per_run))
    )
    return statement.as_string(None)


def scaler_grants(table: JobTable, role: str) -> str:
    """The least-privilege grants of the scaler's role: the query's columns, never payloads."""
    ids = identifiers(table)
    who = sql.Identifier(role)
    columns = sql.SQL(", ").join(sql.Identifier(column) for column in SCALER_COLUMNS)
    lines = [
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {};").format(ids["schema"], who),
        sql.SQL("GRANT SELECT ({}) ON {} TO {};").format(columns, ids["jobs"], who),
    ]
    return "\n".join(line.as_string(None) for line in lines) + "\n"


@dataclass
class InitReport:
    """What ``drain init`` found and did."""

    table: JobTable
    created: bool
    previous_version: int | None
    notes: list[str] = field(default_factory=list)


def init(conn: psycopg.Connection[Any], table: JobTable, extras: Sequence[str] = ()) -> InitReport:
    """Create the schema where missing, in one transaction; verify what already exists.

    An existing table with the wrong shape, or of another version, is reported and
    left alone (an older one is ``drain migrate``'s): init never alters a table it
    did not create, unless asked to add an extra (``extras``, ``drain init --with
    dedupe``), which it adds to a table made by hand too, only when missing (so a
    second init takes no lock on the table for it). On a new table the extras go
    in init's one transaction; on an existing one, which runs may be draining, they
    are the live steps ``drain migrate --with`` applies, so both meet one state.
    """
    _check_extras(extras)
    before = inspect(conn, table)
    _check_initable(before)
    report = InitReport(table, created=not before.jobs_exists, previous_version=before.version)
    nullable = nullable_columns(conn, table, before.table_oid) if before.jobs_exists else []
    if before.jobs_exists and before.version is None and not nullable:
        report.notes.append("table made by hand: compatible with drain")
    report.notes.extend(nullable)
    chosen = [name for name in EXTRAS if name in extras]
    have: tuple[str, ...] = ()
    if before.table_oid is not None:
        have = _extras.read(conn, table, before.table_oid, before.columns).done
    adding = [steps.extras()[name] for name in chosen if name not in have]
    with conn.transaction():
        conn.execute(_schema_statement(table))
        if not before.jobs_exists:
            # A new table, no one else's yet: its extras go in the same transaction.
            for step in adding:
                conn.execute(steps.transaction_statement(table, step))
        # What exists now, read from the catalog: init reports that, never what it asked for.
        after = inspect(conn, table)
        definitions = _index_definitions(conn, table, after)
        _check_created(before, after, definitions)
    if before.jobs_exists and adding:
        with steps.live(conn, table, LOCK_TIMEOUT):
            for step in adding:
                steps.apply_live(conn, table, step, attempts=LOCK_ATTEMPTS)
    report.notes.extend(_extra_notes(conn, table, chosen, have))
    if not any("(queue, run_at)" in d and "status = 'queued'" in d for d in definitions.values()):
        report.notes.append("no index on (queue, run_at) WHERE status = 'queued' found")
    for role, was, now in _companions(before, after):
        if now and not was:
            report.notes.append(f"created {role} {table.derived()[role]}")
    return report


def _check_initable(before: Inspection) -> None:
    """Refuse, before any change, a server or an existing table init may not touch."""
    table = before.table
    if before.read_only:
        raise ReadOnlyServer("the server is read-only; nothing was created")
    if not before.jobs_exists:
        return
    problems = before.drift()
    if problems:
        raise SchemaError(
            f"queue table {table.qualified} exists with an unexpected shape: " + "; ".join(problems)
        )
    version = before.version
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaError(
            f"queue table {table.qualified} has schema version {version}, newer "
            f"than this drain understands ({SCHEMA_VERSION}); upgrade drain"
        )
    if version is not None and version < SCHEMA_VERSION:
        raise SchemaError(
            f"queue table {table.qualified} has schema version {version}, older than this "
            f"drain ({SCHEMA_VERSION}); run `drain migrate` to upgrade it"
        )


def _extra_notes(
    conn: psycopg.Connection[Any], table: JobTable, chosen: list[str], had: tuple[str, ...]
) -> list[str]:
    """What init says of each extra asked for, read back from the catalog."""
    if not chosen:
        return []
    now = inspect(conn, table)
    assert now.table_oid is not None
    done = _extras.read(conn, table, now.table_oid, now.columns).done
    notes = []
    for name in chosen:
        if name not in done:
            raise SchemaError(f"init could not add the extra {name} to {table.qualified}")
        notes.append(_extras.added_note(table, name, added=name not in had))
    return notes


def _companions(before: Inspection, after: Inspection) -> list[tuple[str, bool, bool]]:
    """Each companion table by its role: whether it existed before init, and after."""
    return [
        ("archive table", before.archive_exists, after.archive_exists),
        ("run table", before.runs_exists, after.runs_exists),
        ("schedule table", before.schedules_exists, after.schedules_exists),
    ]


def _index_definitions(
    conn: psycopg.Connection[Any], table: JobTable, after: Inspection
) -> dict[str, str]:
    if after.table_oid is None:
        return {}
    rows = conn.execute(statement_for(table, "indexes"), {"table_oid": after.table_oid}).fetchall()
    return {name: definition for name, definition in rows}


def _check_created(before: Inspection, after: Inspection, definitions: dict[str, str]) -> None:
    """Raise, so that init's transaction rolls back, when an object it creates is not there.

    ``CREATE ... IF NOT EXISTS`` skips, with a notice alone, a name another object
    of the schema already holds (an index ``jobs_ready_idx`` on another table): the
    queue would then have no ready index while init said it had created it.
    """
    table = after.table
    missing = [] if after.jobs_exists else [f"queue table {table.qualified}"]
    missing += [
        f"{role} {table.derived()[role]}" for role, _, now in _companions(before, after) if not now
    ]
    if not before.jobs_exists:
        missing += [
            f"{role} {table.derived()[role]}"
            for role in ("ready index", "running index")
            if table.derived()[role] not in definitions
        ]
    if missing:
        raise SchemaError(
            f"init could not create the {', '.join(missing)}: another object in schema "
            f"{table.schema} holds the name; nothing was changed"
        )
