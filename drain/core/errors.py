"""The errors drain expects to meet, each with the exit code the CLI maps it to.

Driver errors are translated into these in :mod:`drain.store.db`, so the rest of the code
(and the CLI) never has to know what psycopg raised.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_WORK_LEFT = 3


class DrainError(Exception):
    """An expected failure: shown as one line, never as a traceback."""

    exit_code = EXIT_FAILURE


class UsageError(DrainError):
    """The command line or configuration is wrong (exit 2)."""

    exit_code = EXIT_USAGE


class ConfigurationError(UsageError):
    """A required setting is missing or malformed, e.g. no DSN was given."""


class ConnectError(DrainError):
    """The database could not be reached within the connect deadline."""


class ConnectionLost(DrainError):
    """Our own connection broke mid-run and could not be re-established in time."""


class ReadOnlyServer(DrainError):
    """The server refuses writes (a replica after failover, or read-only by setting)."""


class SchemaError(DrainError):
    """The queue table is missing, or its shape or version is not one this drain understands."""


class DedupeNotEnabled(SchemaError):
    """A dedupe key was given for a queue table without the dedupe_key column (exit 2).

    Nothing is altered implicitly: the column and its index are added on purpose,
    with ``drain init --with dedupe``. Exit 2, because the command (or the call)
    asks for what the table was not set up for; the table itself is fine.
    """

    exit_code = EXIT_USAGE


class PriorityNotEnabled(SchemaError):
    """A priority was given for a queue table without the priority column (exit 2).

    As with dedupe keys, nothing is altered implicitly: the column and its index
    are added on purpose (``drain migrate --with priority``, or ``drain init
    --with priority``); a table without them runs its jobs oldest first.
    """

    exit_code = EXIT_USAGE


class RateNotEnabled(SchemaError):
    """A run was given ``--queue-rate`` but cannot keep its buckets (exit 2).

    The buckets live in a table beside the run record (``drain_rates``); a role
    that may not create it needs it created once by the table's owner.
    """

    exit_code = EXIT_USAGE


class HandlerNotFound(UsageError):
    """A handler module or function named on the command line cannot be imported."""


class DatabaseError(DrainError):
    """Any other database error, already redacted."""


class StatementAborted(DatabaseError):
    """The server gave up on a statement (a timeout, a deadlock, a serialization
    failure), not the connection: the same statement, smaller or later, may pass."""


class NotPsycopg3(UsageError):
    """The connection handed to drain is not psycopg 3's (exit 2).

    drain speaks psycopg 3 only: a psycopg2 or asyncpg connection, or SQLAlchemy
    on its psycopg2 driver, would otherwise fail deep inside with an error about
    a missing method. The message names what to use instead.
    """
