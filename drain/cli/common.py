"""What every command shares: the version flag, DSN and table options, error mapping."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import traceback
from collections.abc import Iterator
from typing import Annotated, Any, NoReturn

import typer
from click.core import ParameterSource

from drain import __version__
from drain.db import APPLICATION_NAME, ConnectOptions, Session, resolve_dsn
from drain.durations import parse_duration
from drain.errors import EXIT_USAGE, DrainError
from drain.redact import has_password, redact
from drain.table import DEFAULT_SCHEMA, DEFAULT_TABLE, JobTable

DSN_ON_COMMAND_LINE = (
    "drain: warning: the password given with --dsn is visible to other users in the "
    "process list; pass the DSN in DRAIN_DSN instead, or the password in ~/.pgpass "
    "(or the file PGPASSFILE names)"
)


def warn_password_on_command_line(
    ctx: typer.Context, param: typer.CallbackParam, value: str | None
) -> str | None:
    """Warn (once, on stderr, never echoing it) when --dsn itself carries a password.

    Only an option typed on the command line is in the process list: the same
    DSN from DRAIN_DSN or DATABASE_URL draws no warning.
    """
    if (
        value
        and not ctx.resilient_parsing
        and param.name is not None
        and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
        and has_password(value)
    ):
        typer.echo(DSN_ON_COMMAND_LINE, err=True)
    return value


DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar=["DRAIN_DSN", "DATABASE_URL"],
        show_envvar=True,
        callback=warn_password_on_command_line,
        help="PostgreSQL connection string (URL or key=value). libpq's PG* variables and "
        "~/.pgpass fill in what it leaves out, so the password need not be on the command line.",
    ),
]
SchemaOption = Annotated[
    str, typer.Option("--schema", envvar="DRAIN_SCHEMA", help="Schema of the queue table.")
]
TableOption = Annotated[
    str, typer.Option("--table", envvar="DRAIN_TABLE", help="Name of the queue table.")
]
JsonOption = Annotated[
    bool, typer.Option("--json", envvar="DRAIN_JSON", help="Print the result as JSON on stdout.")
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", envvar="DRAIN_VERBOSE", help="Log more, and show tracebacks."),
]
ConnectTimeoutOption = Annotated[
    str,
    typer.Option(
        "--connect-timeout",
        envvar="DRAIN_CONNECT_TIMEOUT",
        help="How long one connection attempt may take (libpq would wait over two minutes).",
    ),
]
ConnectRetryOption = Annotated[
    str,
    typer.Option(
        "--connect-retry",
        envvar="DRAIN_CONNECT_RETRY",
        help="Keep retrying the connection this long while a compute resumes.",
    ),
]
ArchiveAfterOption = Annotated[
    str,
    typer.Option(
        "--archive-after", envvar="DRAIN_ARCHIVE_AFTER", help="Archive done jobs this old."
    ),
]
ArchiveBatchOption = Annotated[
    int,
    typer.Option(
        "--archive-batch", envvar="DRAIN_ARCHIVE_BATCH", help="Rows per archive transaction."
    ),
]
PoolerOption = Annotated[
    bool,
    typer.Option(
        "--pooler",
        envvar="DRAIN_POOLER",
        help="Connecting through a transaction-mode pooler (PgBouncer): no prepared statements.",
    ),
]


def open_session(
    dsn: str | None,
    connect_timeout: str,
    connect_retry: str = "30s",
    *,
    application_name: str = APPLICATION_NAME,
    pooler: bool = False,
) -> Session:
    """A session for a command, named in pg_stat_activity; it connects on first use."""
    options = ConnectOptions(
        dsn=resolve_dsn(dsn),
        connect_timeout=duration(connect_timeout, "--connect-timeout"),
        retry_for=duration(connect_retry, "--connect-retry"),
        application_name=application_name,
        pooler=pooler,
    )
    return Session(options)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"drain {__version__}")
        raise typer.Exit()


def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """drain: reap, claim, run, release, archive, close, exit."""


def table_of(schema: str = DEFAULT_SCHEMA, table: str = DEFAULT_TABLE) -> JobTable:
    return JobTable(schema=schema, name=table)


def duration(text: str, option: str) -> float:
    """Parse a duration option, or stop with a usage error that names the option."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        fail_usage(f"{option}: {exc}")


def fail_usage(message: str) -> NoReturn:
    typer.echo(f"drain: error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)


def configure_logging(verbose: bool) -> None:
    """Log lines go to stderr; --verbose adds the details."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("drain: %(message)s"))
    logger = logging.getLogger("drain")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False
    # The driver logs what it ignores while a broken connection is torn down;
    # drain already says what happened in its own words, so those lines show
    # only with --verbose (and through the same redaction).
    driver = logging.getLogger("psycopg")
    driver.handlers[:] = [handler] if verbose else [logging.NullHandler()]
    driver.propagate = False


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


@contextlib.contextmanager
def errors_as_exit_codes(verbose: bool = False, secrets: list[str] | None = None) -> Iterator[None]:
    """Turn drain's expected errors into one line on stderr and their exit code."""
    try:
        yield
    except DrainError as exc:
        if verbose:
            trace = "".join(traceback.format_exception(exc))
            typer.echo(redact(trace, secrets), err=True)
        typer.echo(f"drain: error: {redact(str(exc), secrets)}", err=True)
        raise typer.Exit(exc.exit_code) from None


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str, sort_keys=False))
