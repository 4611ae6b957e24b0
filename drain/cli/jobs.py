"""``drain jobs`` and ``drain jobs show ID``: the jobs themselves, newest first, and one whole.

``drain status`` says how many jobs failed; this says which, and why. A listing
is read through the indexes the table has (see :mod:`drain.ops.listing`), so it
answers at once on a table with a long history; every error text and payload
is redacted before it is printed.
"""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING, Annotated, Any

import typer

from drain.cli import common
from drain.core.errors import UsageError
from drain.core.settings import commands

if TYPE_CHECKING:
    from drain.ops.listing import JobDetail, JobRow, Moment

EXAMPLES = """\
Examples:

  drain jobs                               # the 50 newest jobs, any status

  drain jobs --status failed --queue emails

  drain jobs --status queued --limit 10 --json

  drain jobs show 4182                     # one job whole

Newest means the highest id first (the table keeps no finish time). Error
texts and payloads are redacted: a password in them is shown as ********.
Exit codes: 0 listed (or nothing matches), 1 failed (no table, no such job),
2 usage error.
"""

app = typer.Typer(
    name="jobs",
    help="List jobs, newest first, by queue and status; `drain jobs show ID` shows one whole.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXAMPLES,
)


@app.callback(invoke_without_command=True, epilog=EXAMPLES)
@common.command_of(commands.JOBS)
def jobs_command(
    ctx: typer.Context,
    *,
    queue: str | None,
    status: str | None,
    limit: int,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """List jobs, newest first: id, queue, status, attempts, due and created times, last error."""
    if ctx.invoked_subcommand is not None:
        return
    from drain.ops import listing

    queue_name = queue
    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        if not 1 <= limit <= listing.MAX_LIMIT:
            raise UsageError(f"--limit must be between 1 and {listing.MAX_LIMIT:,}")
        if queue_name is not None and not queue_name.strip():
            raise UsageError("--queue is empty: name the queue whose jobs to list")
        found = _with_session(
            connection,
            "drain jobs",
            lambda conn: listing.jobs(conn, target, queue=queue_name, status=status, limit=limit),
        )
    if json:
        common.print_json([row.as_dict() for row in found])
        return
    if not found:
        typer.echo(f"drain: no jobs in {target.qualified} match", err=True)
        return
    typer.echo(render(found))


@app.command("show", epilog=EXAMPLES)
@common.command_of(commands.JOBS_SHOW)
def show_command(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job's id.")],
    *,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Show one job whole: payload, attempts, times, lease and last error (redacted)."""
    from drain.ops import listing

    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        if not 1 <= job_id < 2**63:
            raise UsageError("ID must be a job id (a whole number from 1)")
        detail = _with_session(
            connection,
            "drain jobs show",
            lambda conn: listing.job(conn, target, job_id),
        )
    if json:
        common.print_json(detail.as_dict())
        return
    typer.echo(describe(detail))


def _with_session(connection: dict[str, Any], name: str, work: Any) -> Any:
    session = common.session_of(connection, name)
    try:
        return session.call(work, attempts=1)
    finally:
        session.close()


# The LAST ERROR column keeps a listing to one line per job.
ERROR_COLUMN = 60


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 3] + "..."


def render(found: list[JobRow]) -> str:
    """The jobs as a table, one line each; a PRIORITY column where the table has one."""
    header: tuple[str, ...] = (
        "ID", "QUEUE", "STATUS", "ATTEMPTS", "RUN AT (UTC)", "CREATED AT (UTC)", "LAST ERROR"
    )  # fmt: skip
    rows: list[tuple[str, ...]] = [
        (
            str(row.id),
            row.queue,
            row.status,
            f"{row.attempts}/{row.max_attempts}",
            row.run_at.text(),
            row.created_at.text(),
            _cut(row.last_error or "-", ERROR_COLUMN),
        )
        for row in found
    ]
    if any(row.priority is not None for row in found):
        header = (*header[:3], "PRIORITY", *header[3:])
        rows = [
            (*cells[:3], str(row.priority), *cells[3:])
            for cells, row in zip(rows, found, strict=True)
        ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        for row in (header, *rows)
    ]
    return "\n".join(line.rstrip() for line in lines)


def _relative(moment: Moment, now: Moment) -> str:
    from drain.core.durations import format_duration

    if not moment.finite or not now.finite:
        return moment.text()
    delta = round(moment.epoch - now.epoch)
    when = f"in {format_duration(delta)}" if delta > 0 else f"{format_duration(-delta)} ago"
    return f"{moment.text()} UTC ({when})"


def describe(detail: JobDetail) -> str:
    """One job as ``field: value`` lines, the payload pretty-printed below them."""
    row, now = detail.row, detail.database_time
    fields = [
        ("id", str(row.id)),
        ("queue", row.queue),
        ("status", row.status),
        *([] if row.priority is None else [("priority", str(row.priority))]),
        ("attempts", f"{row.attempts} of {row.max_attempts}"),
        ("run_at", _relative(row.run_at, now)),
        ("created_at", _relative(row.created_at, now)),
        ("locked_until", "-" if row.locked_until is None else _relative(row.locked_until, now)),
        ("last_error", "-" if row.last_error is None else row.last_error),
    ]
    width = max(len(name) for name, _ in fields) + 2
    lines = []
    for name, value in fields:
        first, *rest = value.splitlines() or [""]
        lines.append(f"{name + ':':<{width}}{first}")
        lines.extend(" " * width + more for more in rest)
    lines.append("payload:")
    lines.append(textwrap.indent(json.dumps(detail.payload, indent=2, ensure_ascii=False), "  "))
    return "\n".join(lines)
