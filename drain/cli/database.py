"""``drain init`` and ``drain enqueue``: create the schema, add jobs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer

from drain import queue, schema
from drain.cli import common
from drain.errors import UsageError

# The column is an int; far past any retry policy, and retry adds to it.
MAX_ATTEMPTS = 1_000_000

INIT_EXAMPLES = """\
Examples:

  drain init --dsn postgresql://app@db.example.com/app

  drain init --schema work --table jobs            # another schema and name

  drain init --print-sql > migrations/0042_drain.sql

  drain init --print-grants drain_worker | psql "$DATABASE_URL"
"""

ENQUEUE_EXAMPLES = """\
Examples:

  drain enqueue emails '{"to": "a@example.com"}'

  drain enqueue reports '{"day": "2026-11-30"}' --delay 1h --max-attempts 3

  drain enqueue emails --file jobs.jsonl          # one JSON payload per line
"""


def init_command(
    dsn: common.DsnOption = None,
    schema_name: common.SchemaOption = "public",
    table: common.TableOption = "jobs",
    print_sql: Annotated[
        bool,
        typer.Option(
            "--print-sql",
            envvar="DRAIN_PRINT_SQL",
            help="Print the DDL instead of applying it (for your own migration tool).",
        ),
    ] = False,
    print_grants: Annotated[
        str | None,
        typer.Option(
            "--print-grants",
            metavar="ROLE",
            envvar="DRAIN_PRINT_GRANTS",
            help="Print the least-privilege grants a worker role needs, and exit.",
        ),
    ] = None,
    connect_timeout: common.ConnectTimeoutOption = "10s",
    connect_retry: common.ConnectRetryOption = "30s",
    json_output: common.JsonOption = False,
    verbose: common.VerboseOption = False,
) -> None:
    """Create the queue table, its archive and run tables (idempotent), or verify them.

    On an existing table (one made by hand from the article too) it checks the
    columns, reports drift, and adds only what is missing; it never alters a table
    of the wrong shape.
    """
    common.configure_logging(verbose)
    target = common.table_of(schema_name, table)
    if print_sql:
        typer.echo(schema.ddl(target), nl=False)
        return
    if print_grants is not None:
        if not print_grants.strip():
            common.fail_usage("--print-grants needs the role to grant to, e.g. drain_worker")
        typer.echo(schema.grants(target, print_grants), nl=False)
        return
    with common.errors_as_exit_codes(verbose):
        session = common.open_session(dsn, connect_timeout, connect_retry)
        try:
            report = session.call(lambda conn: schema.init(conn, target))
        finally:
            session.close()
    if json_output:
        common.print_json(
            {
                "table": target.qualified,
                "created": report.created,
                "previous_version": report.previous_version,
                "notes": report.notes,
            }
        )
        return
    verb = "created" if report.created else "verified"
    typer.echo(f"drain: {verb} {target.qualified}", err=True)
    for note in report.notes:
        typer.echo(f"drain: {note}", err=True)


def _payloads(payload: str | None, file: Path | None) -> list[Any]:
    """Every payload, parsed before anything is sent: one bad line enqueues nothing."""
    if (payload is None) == (file is None):
        raise UsageError("give a PAYLOAD_JSON argument or --file, not both or neither")
    if payload is not None:
        return [parse_json(payload, "PAYLOAD_JSON")]
    assert file is not None
    if str(file) == "-":
        return _parse_lines(sys.stdin, "stdin")
    try:
        with file.open(encoding="utf-8") as handle:
            return _parse_lines(handle, str(file))
    except FileNotFoundError:
        raise UsageError(f"--file: no such file: {file}") from None
    except IsADirectoryError:
        raise UsageError(f"--file: {file} is a directory, not a file of JSON lines") from None
    except PermissionError:
        raise UsageError(f"--file: permission denied: {file}") from None
    except OSError as exc:
        raise UsageError(f"--file: cannot read {file}: {exc.strerror or exc}") from None


def _parse_lines(handle: Any, where: str) -> list[Any]:
    payloads: list[Any] = []
    number = 0
    try:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                payloads.append(parse_json(line, f"{where}:{number}"))
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text (after line {number})") from None
    return payloads


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (PostgreSQL's jsonb cannot hold it)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large a number for jsonb")
    return value


def parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:
        raise UsageError(f"{where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"{where} is nested too deeply") from None


def enqueue_command(
    queue_name: Annotated[str, typer.Argument(metavar="QUEUE", help="The queue to add to.")],
    payload: Annotated[
        str | None, typer.Argument(metavar="PAYLOAD_JSON", help="The job's payload, as JSON.")
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            "-f",
            envvar="DRAIN_FILE",
            help="A file of JSON payloads, one per line ('-' for stdin); sent with COPY.",
        ),
    ] = None,
    run_at: Annotated[
        str | None,
        typer.Option(
            "--run-at", envvar="DRAIN_RUN_AT", help="When the job becomes ready (ISO 8601)."
        ),
    ] = None,
    delay: Annotated[
        str | None,
        typer.Option("--delay", envvar="DRAIN_DELAY", help="Ready after this long, e.g. 90s, 5m."),
    ] = None,
    max_attempts: Annotated[
        int,
        typer.Option("--max-attempts", envvar="DRAIN_MAX_ATTEMPTS", help="Attempts before failed."),
    ] = queue.DEFAULT_MAX_ATTEMPTS,
    dsn: common.DsnOption = None,
    schema_name: common.SchemaOption = "public",
    table: common.TableOption = "jobs",
    connect_timeout: common.ConnectTimeoutOption = "10s",
    connect_retry: common.ConnectRetryOption = "30s",
    pooler: common.PoolerOption = False,
    json_output: common.JsonOption = False,
    verbose: common.VerboseOption = False,
) -> None:
    """Add jobs to a queue: one from the command line, or many from a file of JSON lines."""
    common.configure_logging(verbose)
    target = common.table_of(schema_name, table)
    with common.errors_as_exit_codes(verbose):
        if not queue_name.strip():
            raise UsageError("QUEUE is empty: name the queue the jobs go to")
        payloads = _payloads(payload, file)
        when = _parse_time(run_at) if run_at else None
        after = common.duration(delay, "--delay") if delay else None
        if when is not None and after is not None:
            raise UsageError("give --run-at or --delay, not both")
        if not 1 <= max_attempts <= MAX_ATTEMPTS:
            raise UsageError(f"--max-attempts must be between 1 and {MAX_ATTEMPTS:,}")
        session = common.open_session(dsn, connect_timeout, connect_retry, pooler=pooler)

        def insert(conn: psycopg.Connection[Any]) -> list[int]:
            with conn.transaction():
                if file is not None:
                    count = queue.enqueue_many(
                        conn,
                        payloads,
                        queue=queue_name,
                        run_at=when,
                        delay=after,
                        max_attempts=max_attempts,
                        table=target,
                    )
                    return [count]
                return [
                    queue.enqueue(
                        conn,
                        payloads[0],
                        queue=queue_name,
                        run_at=when,
                        delay=after,
                        max_attempts=max_attempts,
                        table=target,
                    )
                ]

        try:
            ids = session.call(insert, attempts=1)
        finally:
            session.close()
    if file is not None:
        result: dict[str, Any] = {"queue": queue_name, "enqueued": ids[0]}
        message = f"drain: enqueued {ids[0]} job(s) on {queue_name}"
    else:
        result = {"queue": queue_name, "enqueued": 1, "id": ids[0]}
        message = f"drain: enqueued job {ids[0]} on {queue_name}"
    if json_output:
        common.print_json(result)
    else:
        typer.echo(message, err=True)


def _parse_time(text: str) -> Any:
    from datetime import datetime

    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--run-at: not an ISO 8601 time: {text!r}") from None
    if value.tzinfo is None:
        raise UsageError("--run-at needs a time zone, e.g. 2026-12-01T09:00:00+00:00 or ...Z")
    return value
