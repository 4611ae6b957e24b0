"""``drain schedule add|list|remove``: recurring jobs kept in the database.

Every check that needs no database (the cron, the zone, the JSON, the bounds)
runs before anything connects, so a bad line is exit 2 with nothing written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import psycopg
import typer

from drain.cli import common
from drain.cli.database import parse_json
from drain.core.errors import UsageError
from drain.core.settings import MAX_ATTEMPTS, commands
from drain.planning.cron import CATCH_UP_POLICIES

EXAMPLES = """\
Examples:

  drain schedule add digest '0 7 * * *' emails '{"kind": "digest"}' --tz Europe/Berlin

  drain schedule add prune-sessions @hourly maintenance --catch-up none

  drain schedule list --json

  drain schedule remove digest
"""

app = typer.Typer(
    name="schedule",
    help=(
        "Recurring jobs kept in the database: each `drain run` enqueues the fires that "
        "came due since the last one, exactly once."
    ),
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXAMPLES,
)


@app.command("add", epilog=EXAMPLES)
@common.command_of(commands.SCHEDULE_ADD)
def add_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The schedule's unique name.")],
    cron_expression: Annotated[
        str,
        typer.Argument(metavar="CRON", help="Five-field cron, or @hourly, @daily, @weekly..."),
    ],
    queue_name: Annotated[str, typer.Argument(metavar="QUEUE", help="The queue the jobs go to.")],
    payload: Annotated[
        str | None,
        typer.Argument(
            metavar="[PAYLOAD_JSON]", help="Each job's payload, as JSON ({} if left out)."
        ),
    ] = None,
    *,
    tz: str,
    catch_up: str,
    catch_up_limit: int,
    max_attempts: int,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Add a recurring job, or update the one of that name.

    An updated schedule's next fire is the first after now.
    """
    from drain.store import recurring

    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        if not 1 <= max_attempts <= MAX_ATTEMPTS:
            raise UsageError(f"--max-attempts must be between 1 and {MAX_ATTEMPTS:,}")
        value = {} if payload is None else parse_json(payload, "PAYLOAD_JSON")
        expression = recurring.checked(
            name,
            cron_expression,
            queue_name,
            tz=tz,
            catch_up=catch_up,
            catch_up_limit=catch_up_limit,
            max_attempts=max_attempts,
        )

        def write(conn: psycopg.Connection[Any]) -> tuple[bool, recurring.RecurringJob]:
            with conn.transaction():
                created = recurring.schedule(
                    conn,
                    name,
                    expression,
                    queue_name,
                    value,
                    tz=tz,
                    catch_up=catch_up,  # type: ignore[arg-type]  # checked above
                    catch_up_limit=catch_up_limit,
                    max_attempts=max_attempts,
                    table=target,
                )
            found = [s for s in recurring.schedules(conn, table=target) if s.name == name]
            return created, found[0]

        created, stored = _with_session(connection, write)
    verb = "added" if created else "updated"
    if json:
        common.print_json({"action": verb, **_as_dict(stored)})
        return
    typer.echo(
        f"drain: {verb} schedule {name!r}: {stored.cron} ({stored.time_zone}) on queue "
        f"{stored.queue}; next fire {_when(stored.next_fire, stored.time_zone)}",
        err=True,
    )


@app.command("list", epilog=EXAMPLES)
@common.command_of(commands.SCHEDULE_LIST)
def list_command(
    *,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """List the recurring jobs: cron, zone, queue, last fire, next fire, how late it fired."""
    from drain.store import recurring

    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        found = _with_session(
            connection,
            lambda conn: recurring.schedules(conn, table=target),
        )
    if json:
        common.print_json([_as_dict(entry) for entry in found])
        return
    if not found:
        typer.echo(f"drain: no schedules on {target.qualified}", err=True)
        return
    typer.echo(render(found))


@app.command("remove", epilog=EXAMPLES)
@common.command_of(commands.SCHEDULE_REMOVE)
def remove_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The schedule to remove.")],
    *,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Remove a recurring job; the jobs it already enqueued stay. Exit 1 if there is none."""
    from drain.store import recurring

    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):

        def remove(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                return recurring.unschedule(conn, name, table=target)

        removed = _with_session(connection, remove)
    if json:
        common.print_json({"name": name, "removed": removed})
    elif removed:
        typer.echo(f"drain: removed schedule {name!r}", err=True)
    else:
        typer.echo(f"drain: error: no schedule named {name!r} on {target.qualified}", err=True)
    if not removed:
        raise typer.Exit(1)


def _with_session(connection: dict[str, Any], work: Any) -> Any:
    session = common.session_of(connection)
    try:
        return session.call(work, attempts=1)
    finally:
        session.close()


def _when(moment: datetime | None, time_zone: str = "UTC") -> str:
    """A fire time on the schedule's own clock, the way its cron reads it."""
    from zoneinfo import ZoneInfo

    if moment is None:
        return "-"
    return moment.astimezone(ZoneInfo(time_zone)).strftime("%Y-%m-%d %H:%M %Z")


def _late(seconds: float | None) -> str:
    from drain.planning.plan import span_text

    return "-" if seconds is None else span_text(seconds)


def render(found: list[Any]) -> str:
    """The schedules as a table (shared with ``drain status``)."""
    header = ("NAME", "CRON", "ZONE", "QUEUE", "CATCH-UP", "LAST FIRE", "LATE", "NEXT FIRE")
    rows = [
        (
            entry.name,
            entry.cron,
            entry.time_zone,
            entry.queue,
            entry.catch_up,
            _when(entry.last_fire, entry.time_zone),
            _late(entry.late),
            _when(entry.next_fire, entry.time_zone),
        )
        for entry in found
    ]
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True))
        for row in (header, *rows)
    ]
    return "\n".join(line.rstrip() for line in lines)


def _as_dict(entry: Any) -> dict[str, Any]:
    import json as json_text

    data = entry._asdict()
    data["payload"] = json_text.loads(data["payload"])
    data["late_seconds"] = entry.late
    data.pop("database_time")
    for key in ("next_fire", "last_fire", "fired_at", "created_at", "updated_at"):
        value = data[key]
        data[key] = None if value is None else value.isoformat()
    return dict(data)


__all__ = ["CATCH_UP_POLICIES", "app"]
