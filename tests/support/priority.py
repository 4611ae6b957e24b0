"""The priority column and its index, added with plain DDL for the tests.

``drain migrate --with priority`` adds them on a deployed table; these helpers
make the same objects (the same names and definitions) directly, so the tests
of priorities and rates do not depend on the migration.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from drain.core.table import JobTable

PRIORITY_INDEX_SUFFIX = "_priority_idx"


def priority_index_name(table: JobTable) -> str:
    return f"{table.name}{PRIORITY_INDEX_SUFFIX}"


def add_priority_column(conn: psycopg.Connection[Any], table: JobTable | None = None) -> None:
    """ALTER TABLE ... ADD COLUMN priority, and the ready index by priority, as the
    migration makes them: ``priority integer NOT NULL DEFAULT 0`` and
    ``<table>_priority_idx`` on (queue, priority DESC, run_at) WHERE status = 'queued'."""
    target = table or JobTable()
    jobs = sql.Identifier(target.schema, target.name)
    conn.execute(
        sql.SQL(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0"
        ).format(jobs)
    )
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} (queue, priority DESC, run_at) "
            "WHERE status = 'queued'"
        ).format(sql.Identifier(priority_index_name(target)), jobs)
    )


def add_dedupe_column(conn: psycopg.Connection[Any]) -> None:
    """The dedupe extra, as ``drain init --with dedupe`` adds it (for keyed priorities)."""
    conn.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS dedupe_key text")
    conn.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS jobs_dedupe_idx ON jobs (queue, dedupe_key) "
        "WHERE status IN ('queued', 'running')"
    )
