"""The rows every command that reaches the database shares: connection, table, output.

Defined once, so ``--dsn`` reads the same variables, ``--connect-timeout`` has
the same default and ``--table`` the same help in every command.
"""

from __future__ import annotations

from drain.core.settings.defaults import (
    DEFAULT_CONNECT_RETRY,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SCHEMA,
    DEFAULT_TABLE,
    DSN_VARIABLES,
)
from drain.core.settings.kinds import DURATION, FLAG, TEXT, Setting

# The help panels of drain run, in the order it shows them; the connection panel
# closes every command's help.
HANDLERS_PANEL = "Handlers"
BUDGET_PANEL = "Budget and leases"
ARCHIVE_PANEL = "Archive and vacuum"
OBSERVABILITY_PANEL = "Observability"
CONNECTION_PANEL = "Connection"

# fmt: off
DSN = Setting(
    "dsn", "--dsn", DSN_VARIABLES, TEXT, None,
    "PostgreSQL connection string (URL or key=value). libpq's PG* variables and "
    "~/.pgpass fill in what it leaves out, so the password need not be on the command "
    "line.",
    panel=CONNECTION_PANEL,
)

SCHEMA = Setting(
    "schema", "--schema", ("DRAIN_SCHEMA",), TEXT, DEFAULT_SCHEMA,
    "Schema of the queue table.",
    panel=CONNECTION_PANEL,
)

TABLE = Setting(
    "table", "--table", ("DRAIN_TABLE",), TEXT, DEFAULT_TABLE,
    "Name of the queue table.",
    panel=CONNECTION_PANEL,
)

CONNECT_TIMEOUT = Setting(
    "connect_timeout", "--connect-timeout", ("DRAIN_CONNECT_TIMEOUT",), DURATION,
    DEFAULT_CONNECT_TIMEOUT,
    "How long one connection attempt may take (libpq would wait over two minutes).",
    panel=CONNECTION_PANEL,
)

CONNECT_RETRY = Setting(
    "retry_for", "--connect-retry", ("DRAIN_CONNECT_RETRY",), DURATION,
    DEFAULT_CONNECT_RETRY,
    "Keep retrying the connection this long while a compute resumes.",
    panel=CONNECTION_PANEL,
)

POOLER = Setting(
    "pooler", "--pooler", ("DRAIN_POOLER",), FLAG, False,
    "Connecting through a transaction-mode pooler (PgBouncer): no prepared statements.",
    panel=CONNECTION_PANEL,
)

JSON = Setting(
    "json", "--json", ("DRAIN_JSON",), FLAG, False,
    "Print the result as JSON on stdout.",
    command_only=True,
)

VERBOSE = Setting(
    "verbose", "--verbose", ("DRAIN_VERBOSE",), FLAG, False,
    "Log more, and show tracebacks.",
    short="-v",
    command_only=True,
)
# fmt: on

# What a command that connects to the queue table takes, in help order.
CONNECTION: tuple[Setting, ...] = (DSN, SCHEMA, TABLE, CONNECT_TIMEOUT, CONNECT_RETRY, POOLER)
OUTPUT: tuple[Setting, ...] = (JSON, VERBOSE)
