"""``drain init`` and ``drain enqueue``: create the schema, add jobs."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer

from drain.cli import common
from drain.core.errors import UsageError
from drain.core.settings import commands
from drain.core.settings.defaults import DEFAULT_PER_RUN, DEFAULT_SCALER_ROLE, MAX_ATTEMPTS
from drain.core.table import JobTable
from drain.store import priorities, producer, schema
from drain.store.sqlfiles import identifiers

# --per-run: one runner's jobs per run; the scaler counts up to 100 times it.
MAX_PER_RUN = 1_000_000

INIT_EXAMPLES = """\
Examples:

  drain init --dsn postgresql://app@db.example.com/app

  drain init --schema work --table jobs            # another schema and name

  drain init --print-sql > migrations/0042_drain.sql

  drain init --with dedupe                         # add dedupe keys (enqueue --key)

  drain init --with priority                       # add job priorities (higher first)

  drain init --print-grants drain_worker | psql "$DATABASE_URL"

  drain init --print-scaler-query --per-run 200 --scaler-role keda_scaler   # for KEDA
"""

ENQUEUE_EXAMPLES = """\
Examples:

  drain enqueue emails '{"to": "a@example.com"}'

  drain enqueue reports '{"day": "2026-11-30"}' --delay 1h --max-attempts 3

  drain enqueue emails --file jobs.jsonl          # one JSON payload per line

  drain enqueue reindex '{"user": 42}' --key user-42   # a duplicate while one waits

  drain enqueue reindex --file edits.jsonl --key-field user   # each line's "user"

  drain enqueue emails '{"to": "ceo@example.com"}' --priority 10   # ahead of priority 0
"""


@common.command_of(commands.INIT)
def init_command(
    *,
    print_sql: bool,
    print_grants: str | None,
    print_scaler_query: bool,
    per_run: int | None,
    scaler_role: str | None,
    extras: tuple[str, ...],
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Create the queue table, its archive and run tables (idempotent), or verify them.

    On an existing table (one made by hand from the article too) it checks the
    columns, reports drift, and adds only what is missing; it never alters a table
    of the wrong shape. An extra named with --with is added on purpose, to a table
    made by hand too.
    """
    common.configure_logging(verbose)
    target = common.target_of(connection)
    chosen = _extras(list(extras))
    printing = [print_sql, print_grants is not None, print_scaler_query]
    if sum(printing) > 1:
        common.fail_usage("give one of --print-sql, --print-grants, --print-scaler-query")
    if not print_scaler_query and (per_run is not None or scaler_role is not None):
        option = "--per-run" if per_run is not None else "--scaler-role"
        common.fail_usage(f"{option} goes with --print-scaler-query")
    if print_scaler_query:
        typer.echo(_scaler_text(target, per_run, scaler_role), nl=False)
        return
    if print_sql:
        typer.echo(schema.ddl(target, chosen), nl=False)
        return
    if print_grants is not None:
        if not print_grants.strip():
            common.fail_usage("--print-grants needs the role to grant to, e.g. drain_worker")
        typer.echo(schema.grants(target, print_grants), nl=False)
        return
    with common.errors_as_exit_codes(verbose):
        session = common.session_of(connection)
        try:
            report = session.call(lambda conn: schema.init(conn, target, chosen))
        finally:
            session.close()
    if json:
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


def _scaler_text(target: JobTable, per_run: int | None, role: str | None) -> str:
    """The scaler's query and its role's grants, each line saying where it goes.

    Checked before anything is printed, like every option of init; nothing connects.
    """
    runs = DEFAULT_PER_RUN if per_run is None else per_run
    if not 1 <= runs <= MAX_PER_RUN:
        common.fail_usage(
            f"--per-run must be between 1 and {MAX_PER_RUN:,} (the jobs one runner "
            f"handles per run), not {runs}"
        )
    who = DEFAULT_SCALER_ROLE if role is None else role.strip()
    if not who:
        common.fail_usage("--scaler-role needs the role the scaler connects as, e.g. keda_scaler")
    bound = schema.scaler_bound(runs)
    index = identifiers(target)["ready_index"].as_string(None)
    lines = [
        f"-- backlog query for {target.qualified} (KEDA postgresql trigger: metadata.query):",
        f"-- the jobs ready now, counted up to {bound:,} (--per-run {runs} x "
        f"{schema.SCALER_BOUND_RUNS}) so a huge backlog costs no more;",
        f"-- an Index Only Scan on {index}, never the payload.",
        schema.scaler_query(target, runs),
        f'-- metadata.targetQueryValue: "{runs}" (--per-run: the jobs one runner handles per run)',
        '-- metadata.activationTargetQueryValue: "0" (a runner starts once one job is ready)',
        f"-- least-privilege grants for the scaler's role {who} (no payloads):",
        schema.scaler_grants(target, who).rstrip("\n"),
    ]
    return "\n".join(lines) + "\n"


def _extras(names: list[str]) -> list[str]:
    """The extras --with names, checked before anything connects (a list: one per option)."""
    chosen: list[str] = []
    for name in names:
        if name.strip() not in schema.EXTRAS:
            known = ", ".join(schema.EXTRAS)
            common.fail_usage(f"--with: no extra named {name.strip()!r}; known: {known}")
        chosen.append(name.strip())
    return chosen


# A payload as read: where it came from (PAYLOAD_JSON, or file:line) and its value.
Read = tuple[str, Any]


def _payloads(payload: str | None, file: Path | None) -> list[Read]:
    """Every payload, parsed before anything is sent: one bad line enqueues nothing."""
    if (payload is None) == (file is None):
        raise UsageError("give a PAYLOAD_JSON argument or --file, not both or neither")
    if payload is not None:
        return [("PAYLOAD_JSON", parse_json(payload, "PAYLOAD_JSON"))]
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


def _parse_lines(handle: Any, where: str) -> list[Read]:
    payloads: list[Read] = []
    number = 0
    try:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                place = f"{where}:{number}"
                payloads.append((place, parse_json(line, place)))
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text (after line {number})") from None
    return payloads


def _keys(
    payloads: list[Read], key: str | None, key_field: str | None, from_file: bool
) -> list[str] | None:
    """The dedupe key of each job, or None when no key was asked for.

    --key names the one job of PAYLOAD_JSON; --key-field takes each job's key
    from a field of its payload (a string, or an integer written as its digits),
    so a file of many jobs can carry a key per line.
    """
    if key is not None and key_field is not None:
        raise UsageError("give --key or --key-field, not both")
    if key is not None:
        if from_file:
            raise UsageError(
                "--key names one job; with --file, take each line's key from a field "
                "of its payload with --key-field NAME"
            )
        if not key.strip():
            raise UsageError("--key is empty: give the job's dedupe key, e.g. --key user-42")
        return [key]
    if key_field is None:
        return None
    if not key_field.strip():
        raise UsageError("--key-field is empty: name the payload field that holds the key")
    keys = []
    for where, value in payloads:
        found = value.get(key_field) if isinstance(value, dict) else None
        if isinstance(found, int) and not isinstance(found, bool):
            found = str(found)
        if not isinstance(found, str) or not found.strip():
            raise UsageError(
                f"{where} has no --key-field {key_field!r} holding a string or integer key"
            )
        keys.append(found)
    return keys


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (PostgreSQL's jsonb cannot hold it)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large a number for jsonb")
    return value


def parse_json(text: str, where: str) -> Any:
    """A payload as jsonb can store it, or a usage error naming ``where`` (never echoing it)."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:
        raise UsageError(f"{where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"{where} is nested too deeply") from None
    reason = producer.unstorable(value, text)
    if reason is not None:
        raise UsageError(f"{where} {reason}")
    return value


@common.command_of(commands.ENQUEUE)
def enqueue_command(
    queue_name: Annotated[str, typer.Argument(metavar="QUEUE", help="The queue to add to.")],
    payload: Annotated[
        str | None, typer.Argument(metavar="PAYLOAD_JSON", help="The job's payload, as JSON.")
    ] = None,
    *,
    file: str | None,
    run_at: str | None,
    delay: float | None,
    max_attempts: int,
    priority: int | None,
    key: str | None,
    key_field: str | None,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Add jobs to a queue: one from the command line, or many from a file of JSON lines.

    With a dedupe key (--key, or --key-field for a file) a job whose key is held
    by a queued or running job of the queue is a duplicate: it is reported, not
    added, and the exit code is still 0.
    """
    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        if not queue_name.strip():
            raise UsageError("QUEUE is empty: name the queue the jobs go to")
        _check_order(queue_name, payload)
        read = _payloads(payload, None if file is None else Path(file))
        keys = _keys(read, key, key_field, from_file=file is not None)
        payloads = [value for _, value in read]
        when = _parse_time(run_at) if run_at else None
        after = delay or None
        if when is not None and after is not None:
            raise UsageError("give --run-at or --delay, not both")
        _check_numbers(max_attempts, priority)
        session = common.session_of(connection)

        def insert(conn: psycopg.Connection[Any]) -> producer.Enqueued | int:
            with conn.transaction():
                if file is not None:
                    return producer.enqueue_many(
                        conn,
                        payloads,
                        queue=queue_name,
                        run_at=when,
                        delay=after,
                        max_attempts=max_attempts,
                        table=target,
                        keys=keys,
                        priority=priority,
                    )
                return producer.enqueue(
                    conn,
                    payloads[0],
                    queue=queue_name,
                    run_at=when,
                    delay=after,
                    max_attempts=max_attempts,
                    table=target,
                    key=None if keys is None else keys[0],
                    priority=priority,
                )

        try:
            answer = session.call(insert, attempts=1)
        finally:
            session.close()
    result: dict[str, Any] = {"queue": queue_name}
    if priority is not None:
        result["priority"] = priority
    if isinstance(answer, producer.Enqueued):
        result.update(enqueued=int(answer.new), id=answer.id)
        message = f"drain: enqueued job {answer.id} on {queue_name}"
        if keys is not None:
            result.update(key=keys[0], duplicate=answer.duplicate)
        if answer.duplicate and keys is not None:
            message = (
                f"drain: duplicate of job {answer.id} on {queue_name} "
                f"(key {keys[0]!r} is queued or running); nothing enqueued"
            )
    else:
        result["enqueued"] = answer
        message = f"drain: enqueued {answer} job(s) on {queue_name}"
        if keys is not None:
            result["duplicates"] = len(payloads) - answer
            message += f", {len(payloads) - answer} duplicate(s) skipped"
    if json:
        common.print_json(result)
    else:
        typer.echo(message, err=True)


# A queue's name as people write one (emails, reports.daily, bulk-import).
_QUEUE_SHAPED = re.compile(r"[A-Za-z_][\w.:-]*")


def _check_order(queue_name: str, payload: str | None) -> None:
    """Refuse, with the order spelled out, a payload given where the queue goes.

    ``drain enqueue '{"to": 1}' emails`` would otherwise add a job with the
    payload ``emails`` (not JSON, refused) or, worse, to a queue named by JSON.
    Neither argument is echoed but a queue-shaped name: a payload may hold secrets.
    """
    if not queue_name.lstrip().startswith(("{", "[", '"')):
        return
    hint = "the queue comes first, then the payload: drain enqueue QUEUE PAYLOAD_JSON"
    if payload is not None and _QUEUE_SHAPED.fullmatch(payload):
        hint += f" (did you mean drain enqueue {payload} '...'?)"
    raise UsageError(f"QUEUE looks like a JSON payload: {hint}")


def _parse_time(text: str) -> Any:
    from datetime import datetime

    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--run-at: not an ISO 8601 time: {text!r}") from None
    if value.tzinfo is None:
        raise UsageError("--run-at needs a time zone, e.g. 2026-12-01T09:00:00+00:00 or ...Z")
    return value


def _check_numbers(max_attempts: int, priority: int | None) -> None:
    """Refuse a --max-attempts or --priority the table's integer columns cannot take."""
    if not 1 <= max_attempts <= MAX_ATTEMPTS:
        raise UsageError(f"--max-attempts must be between 1 and {MAX_ATTEMPTS:,}")
    if priority is not None and not priorities.LOWEST <= priority <= priorities.HIGHEST:
        raise UsageError(
            f"--priority must be between {priorities.LOWEST:,} and {priorities.HIGHEST:,}"
        )
