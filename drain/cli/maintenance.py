"""``drain retry``, ``drain archive`` and ``drain purge``: the hands-on maintenance steps.

``retry`` puts failed jobs back once their cause is fixed; ``archive`` runs the
archive step of ``drain run`` on its own (say, from a nightly job while runs use
``--archive-mode off``), and with ``--failed-after`` archives old failures too;
``purge`` empties the archive of what is old enough to forget. None of them
guesses: retry needs a filter or ``--all``, purge a retention.
"""

from __future__ import annotations

from typing import Any

import typer

from drain.cli import common
from drain.core.durations import format_duration
from drain.core.errors import UsageError
from drain.core.settings import ArchiveMode, commands
from drain.ops import maintenance

RETRY_EXAMPLES = """\
Examples:

  drain retry --queue emails --dry-run     # what would go back; no change

  drain retry --queue emails

  drain retry --id 4182 --id 4190

  drain retry --error-contains "SMTP 451"  # case-insensitive

  drain retry --all                        # every failed job

Filters given together must all match. A retried job runs at once, with
as many tries as it had (max_attempts is raised to attempts + max_attempts;
attempts itself never goes down), and its last_error cleared.
"""

ARCHIVE_EXAMPLES = """\
Examples:

  drain archive                # done jobs older than 7d into jobs_archive

  drain archive --archive-after 1d --archive-mode delete

  drain archive --archive-batch 1000 --json

  drain archive --failed-after 30d   # also failed jobs last due 30 days ago

A failed job counts from its run_at (when its last attempt was due): the
table keeps no failure time.

Exit codes: 0 archived (or nothing to archive), 1 failed (no archive
table, no permission), 2 usage error.
"""


PURGE_EXAMPLES = """\
Examples:

  drain purge --archive-older-than 90d --dry-run   # how many rows; no change

  drain purge --archive-older-than 90d

  drain purge --archive-older-than 30d --archive-batch 1000 --json

Rows go by archived_at (when drain archive or a run moved them), in batches
of one short transaction each. Exit codes: 0 purged (or nothing to purge),
1 failed (no archive table, no permission), 2 usage error.
"""


def _ids_text(ids: list[int], total: int) -> str:
    shown = ", ".join(str(i) for i in ids)
    return shown + (", ..." if total > len(ids) else "")


@common.command_of(commands.RETRY)
def retry_command(
    *,
    queues: tuple[str, ...],
    ids: tuple[int, ...],
    error_contains: str | None,
    all_jobs: bool,
    dry_run: bool,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Put failed jobs back to queued, to run at once with as many tries as they had.

    Choose them by queue, by id or by error text; with none of these, --all is
    required, so a slip of the keyboard never requeues every failure. The
    attempt counter is kept (a run frozen on an old attempt must never see its
    number handed out again); max_attempts grows instead.
    """
    common.configure_logging(verbose)
    target = common.target_of(connection)
    chosen = maintenance.Filters(queues, ids, error_contains or None)
    with common.errors_as_exit_codes(verbose):
        if chosen.empty and not all_jobs:
            raise UsageError(
                "say which failed jobs to retry: --queue, --id or --error-contains, "
                "or --all for every one"
            )
        if any(not name.strip() for name in chosen.queues):
            raise UsageError("--queue is empty: name the queue whose failed jobs to retry")
        if any(not 1 <= job_id < 2**63 for job_id in chosen.ids):
            raise UsageError("--id must be a job id (a whole number from 1)")
        if all_jobs and not chosen.empty:
            raise UsageError("--all retries every failed job; give it without other filters")
        session = common.session_of(connection, "drain retry")
        try:
            outcome: maintenance.Preview | list[int] = session.call(
                lambda conn: (
                    maintenance.preview(conn, target, chosen)
                    if dry_run
                    else maintenance.retry(conn, target, chosen)
                ),
                attempts=1,
            )
        finally:
            session.close()
    if isinstance(outcome, maintenance.Preview):
        _show_preview(outcome, target.qualified, json)
    else:
        _show_retried(outcome, target.qualified, json)


def _show_preview(found: maintenance.Preview, table: str, json_output: bool) -> None:
    if json_output:
        common.print_json(
            {
                "table": table,
                "dry_run": True,
                "would_retry": found.jobs,
                "sample_ids": found.sample,
                "per_queue": found.per_queue,
            }
        )
        return
    if not found.jobs:
        typer.echo(f"drain: no failed job in {table} matches; nothing would change", err=True)
        return
    queues = ", ".join(f"{name} {count:,}" for name, count in sorted(found.per_queue.items()))
    typer.echo(
        f"drain: would retry {found.jobs:,} failed job(s) in {table} ({queues}): "
        f"ids {_ids_text(found.sample, found.jobs)}; dry run, nothing changed",
        err=True,
    )


def _show_retried(ids: list[int], table: str, json_output: bool) -> None:
    if json_output:
        common.print_json({"table": table, "dry_run": False, "retried": len(ids), "ids": ids})
        return
    if not ids:
        typer.echo(f"drain: no failed job in {table} matches; nothing changed", err=True)
        return
    sample = ids[: maintenance.PREVIEW_SAMPLE]
    typer.echo(
        f"drain: retried {len(ids):,} failed job(s) in {table}: ids {_ids_text(sample, len(ids))}",
        err=True,
    )


@common.command_of(commands.ARCHIVE)
def archive_command(
    *,
    archive_after: float,
    archive_mode: ArchiveMode,
    archive_batch: int,
    failed_after: float | None,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Move done jobs older than the retention into the archive table (or delete them).

    The same step `drain run` takes after its work, in batches of one short
    transaction each, so claims and completions go on meanwhile. With
    --failed-after, failed jobs go the same way once their last attempt was due
    that long ago.
    """
    common.configure_logging(verbose)
    target = common.target_of(connection)
    older_than, failed_seconds = archive_after, failed_after
    with common.errors_as_exit_codes(verbose):
        if archive_batch < 1:
            raise UsageError("--archive-batch must be at least 1")
        session = common.session_of(connection, "drain archive")
        try:
            report = session.call(
                lambda conn: maintenance.archive(
                    conn, target, older_than, archive_batch, archive_mode, failed_seconds
                ),
                attempts=1,
            )
        finally:
            session.close()
    outcome, failed = report.done, report.failed
    destination = (
        f"into {target.schema}.{target.archive_name}" if archive_mode == "move" else "deleted"
    )
    if json:
        common.print_json(
            {
                "table": target.qualified,
                "mode": archive_mode,
                "older_than_seconds": older_than,
                "archived": outcome.archived,
                "batches": outcome.batches,
                "complete": outcome.complete,
                "dead_rows": outcome.health.dead_rows if outcome.health else None,
                "live_rows": outcome.health.live_rows if outcome.health else None,
                "failed_after_seconds": failed_seconds,
                "failed_archived": failed.rows if failed else None,
                "failed_batches": failed.batches if failed else None,
                "failed_complete": failed.complete if failed else None,
            }
        )
    else:
        complete = outcome.complete and (failed is None or failed.complete)
        rest = "" if complete else "; stopped early (statement timeout), run it again"
        also = ""
        batches = outcome.batches
        if failed is not None and failed_seconds is not None:
            also = (
                f" and {failed.rows:,} failed job(s) last due more than "
                f"{format_duration(failed_seconds)} ago"
            )
            batches += failed.batches
        typer.echo(
            f"drain: archived {outcome.archived:,} done job(s) older than "
            f"{format_duration(older_than)}{also} from {target.qualified} ({destination}) in "
            f"{batches} batch(es){rest}",
            err=True,
        )


@common.command_of(commands.PURGE)
def purge_command(
    *,
    archive_older_than: float | None,
    archive_batch: int,
    dry_run: bool,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Delete rows from the archive table that were archived before the retention.

    In batches of one short transaction each, walking the archive's primary key,
    so a large purge never holds many locks for long. The retention is required:
    a slip of the keyboard never empties the archive.
    """
    common.configure_logging(verbose)
    target = common.target_of(connection)
    archive = f"{target.schema}.{target.archive_name}"
    with common.errors_as_exit_codes(verbose):
        if archive_older_than is None:
            raise UsageError(
                "say which archive rows to purge: --archive-older-than DURATION (e.g. 90d)"
            )
        older_than = archive_older_than
        if archive_batch < 1:
            raise UsageError("--archive-batch must be at least 1")
        session = common.session_of(connection, "drain purge")
        try:
            outcome: maintenance.PurgePreview | maintenance.Batched = session.call(
                lambda conn: (
                    maintenance.purge_preview(conn, target, older_than)
                    if dry_run
                    else maintenance.purge(conn, target, older_than, archive_batch)
                ),
                attempts=1,
            )
        finally:
            session.close()
    age = format_duration(older_than)
    if isinstance(outcome, maintenance.PurgePreview):
        if json:
            common.print_json(
                {
                    "archive": archive,
                    "dry_run": True,
                    "older_than_seconds": older_than,
                    "would_purge": outcome.rows,
                }
            )
        else:
            typer.echo(
                f"drain: would purge {outcome.rows:,} row(s) archived more than {age} ago "
                f"from {archive}; dry run, nothing changed",
                err=True,
            )
        return
    if json:
        common.print_json(
            {
                "archive": archive,
                "dry_run": False,
                "older_than_seconds": older_than,
                "purged": outcome.rows,
                "batches": outcome.batches,
                "complete": outcome.complete,
            }
        )
        return
    rest = "" if outcome.complete else "; stopped early (statement timeout), run it again"
    typer.echo(
        f"drain: purged {outcome.rows:,} row(s) archived more than {age} ago from {archive} "
        f"in {outcome.batches} batch(es){rest}",
        err=True,
    )
