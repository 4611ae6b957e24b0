"""``drain cancel``: jobs that should not run, by id or by queue and age."""

from __future__ import annotations

from typing import Annotated, Any

import psycopg
import typer

from drain.cli import common
from drain.core.errors import UsageError
from drain.core.settings import commands

BIGINT_MAX = 2**63 - 1  # the id column's type

EXAMPLES = """\
Examples:

  drain cancel 42 43                       # by id

  drain cancel --queue reports --older-than 1d --dry-run

  drain cancel --queue reports --older-than 1d --json
"""


@common.command_of(commands.CANCEL)
def cancel_command(
    ids: Annotated[
        list[int] | None,
        typer.Argument(metavar="[ID]...", help="Jobs to cancel.", show_default=False),
    ] = None,
    *,
    queue: str | None,
    older_than: float,
    dry_run: bool,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Cancel jobs by id, or by queue and age, so they never run again.

    A queued job fails at once ('cancelled') and is never claimed; a running one
    gets no further attempt, and its handler sees job.cancel_requested.
    """
    from drain.store import producer

    queue_name = queue
    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        if bool(ids) == (queue_name is not None):
            raise UsageError("give job IDs or --queue, not both or neither")
        if queue_name is not None and not queue_name.strip():
            raise UsageError("--queue is empty: name the queue whose jobs to cancel")
        if ids and any(not 1 <= job_id <= BIGINT_MAX for job_id in ids):
            raise UsageError(f"a job ID is a whole number from 1 to {BIGINT_MAX:,}")

        def cancel(conn: psycopg.Connection[Any]) -> producer.CancelOutcome:
            with conn.transaction(force_rollback=dry_run):
                return producer.cancel(
                    conn, ids or (), queue=queue_name, older_than=older_than, table=target
                )

        session = common.session_of(connection)
        try:
            outcome = session.call(cancel, attempts=1)
        finally:
            session.close()
    _report(outcome, ids or [], dry_run=dry_run, json_output=json)


def _report(outcome: Any, ids: list[int], *, dry_run: bool, json_output: bool) -> None:
    untouched = sorted(set(ids) - set(outcome.cancelled) - set(outcome.requested))
    if json_output:
        common.print_json(
            {
                "dry_run": dry_run,
                "cancelled": list(outcome.cancelled),
                "cancel_requested": list(outcome.requested),
                "left_alone": untouched,
            }
        )
        return
    would = "would cancel" if dry_run else "cancelled"
    typer.echo(
        f"drain: {would} {len(outcome.cancelled):,} queued job(s); "
        f"{len(outcome.requested):,} running job(s) "
        f"{'would be' if dry_run else 'were'} asked to stop (no further attempt)",
        err=True,
    )
    if untouched:
        shown = ", ".join(str(job_id) for job_id in untouched[:10])
        more = f" and {len(untouched) - 10:,} more" if len(untouched) > 10 else ""
        typer.echo(f"drain: left alone (done, failed, or no such job): {shown}{more}", err=True)
