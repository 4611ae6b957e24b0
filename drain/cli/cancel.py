"""``drain cancel``: jobs that should not run, by id or by queue and age."""

from __future__ import annotations

from typing import Annotated, Any

import psycopg
import typer

from drain.cli import common
from drain.core.errors import UsageError

BIGINT_MAX = 2**63 - 1  # the id column's type

EXAMPLES = """\
Examples:

  drain cancel 42 43                       # by id

  drain cancel --queue reports --older-than 1d --dry-run

  drain cancel --queue reports --older-than 1d --json
"""


def cancel_command(
    ids: Annotated[
        list[int] | None,
        typer.Argument(metavar="[ID]...", help="Jobs to cancel.", show_default=False),
    ] = None,
    queue_name: Annotated[
        str | None,
        typer.Option(
            "--queue",
            "-q",
            envvar="DRAIN_CANCEL_QUEUE",
            help="Cancel this queue's queued and running jobs instead of jobs by id.",
        ),
    ] = None,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            envvar="DRAIN_CANCEL_OLDER_THAN",
            help="With --queue: only jobs created at least this long ago (e.g. 1d).",
        ),
    ] = "0s",
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            envvar="DRAIN_CANCEL_DRY_RUN",
            help="Say what would be cancelled, and change nothing.",
        ),
    ] = False,
    dsn: common.DsnOption = None,
    schema_name: common.SchemaOption = "public",
    table: common.TableOption = "jobs",
    connect_timeout: common.ConnectTimeoutOption = "10s",
    connect_retry: common.ConnectRetryOption = "30s",
    json_output: common.JsonOption = False,
    verbose: common.VerboseOption = False,
) -> None:
    """Cancel jobs: a queued job fails at once ('cancelled') and is never claimed; a
    running one gets no further attempt, and its handler sees job.cancel_requested."""
    from drain.store import producer

    common.configure_logging(verbose)
    target = common.table_of(schema_name, table)
    with common.errors_as_exit_codes(verbose):
        if bool(ids) == (queue_name is not None):
            raise UsageError("give job IDs or --queue, not both or neither")
        if queue_name is not None and not queue_name.strip():
            raise UsageError("--queue is empty: name the queue whose jobs to cancel")
        if ids and any(not 1 <= job_id <= BIGINT_MAX for job_id in ids):
            raise UsageError(f"a job ID is a whole number from 1 to {BIGINT_MAX:,}")
        age = common.duration(older_than, "--older-than")

        def cancel(conn: psycopg.Connection[Any]) -> producer.CancelOutcome:
            with conn.transaction(force_rollback=dry_run):
                return producer.cancel(
                    conn, ids or (), queue=queue_name, older_than=age, table=target
                )

        session = common.open_session(dsn, connect_timeout, connect_retry)
        try:
            outcome = session.call(cancel, attempts=1)
        finally:
            session.close()
    _report(outcome, ids or [], dry_run=dry_run, json_output=json_output)


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
