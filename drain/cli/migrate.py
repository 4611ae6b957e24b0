"""``drain migrate``: bring a queue table to this drain's schema version and extras, live."""

from __future__ import annotations

from typing import Annotated

import typer

from drain.cli import common
from drain.core.errors import UsageError
from drain.core.table import JobTable
from drain.store import migrations

# A lock a migration waits longer than this for belongs to something that is not a
# run; more attempts than this and the table is busy with something else.
MAX_ATTEMPTS = 1000

EXAMPLES = """\
Examples:

  drain migrate --dsn postgresql://app@db.example.com/app

  drain migrate --dry-run                         # print the SQL it would apply

  drain migrate --with priority                   # add an extra too (live, no rewrite)

  drain migrate --print-sql --from 0 > 0043_drain.sql   # the steps, for your own tool

Exit codes: 0 the table is current (now, or already); 1 the table cannot be
migrated (missing, newer than this drain, another shape, a lock not had in
time); 2 a usage error (an unknown extra, --from out of range).
"""


def migrate_command(
    dsn: common.DsnOption = None,
    schema_name: common.SchemaOption = "public",
    table: common.TableOption = "jobs",
    extras: Annotated[
        list[str] | None,
        typer.Option(
            "--with",
            metavar="EXTRA",
            envvar="DRAIN_WITH",
            help="Also add an optional extra (repeatable): dedupe, priority. An extra "
            "partly there already is finished without being named.",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            envvar="DRAIN_DRY_RUN",
            help="Print the SQL the table needs and change nothing.",
        ),
    ] = False,
    print_sql: Annotated[
        bool,
        typer.Option(
            "--print-sql",
            envvar="DRAIN_PRINT_SQL",
            help="Print the steps from --from on, without connecting (for your own migration tool).",
        ),
    ] = False,
    from_version: Annotated[
        int | None,
        typer.Option(
            "--from",
            metavar="N",
            envvar="DRAIN_FROM",
            help="With --print-sql: the schema version the table is at (0: made by hand "
            "from the article).",
            show_default=False,
        ),
    ] = None,
    lock_timeout: Annotated[
        str,
        typer.Option(
            "--lock-timeout",
            envvar="DRAIN_LOCK_TIMEOUT",
            help="How long one statement waits for its lock before it gives up its place "
            "in the queue (and holds no run back) and tries again.",
        ),
    ] = "2s",
    lock_attempts: Annotated[
        int,
        typer.Option(
            "--lock-attempts",
            metavar="N",
            envvar="DRAIN_LOCK_ATTEMPTS",
            help="How many times a statement tries for its lock before the migration stops.",
        ),
    ] = migrations.DEFAULT_ATTEMPTS,
    connect_timeout: common.ConnectTimeoutOption = "10s",
    connect_retry: common.ConnectRetryOption = "30s",
    json_output: common.JsonOption = False,
    verbose: common.VerboseOption = False,
) -> None:
    """Bring a queue table of an earlier schema version to this drain's, live.

    Each missing step of sql/migrations/ is applied in order while runs drain
    the table: each statement on its own under a short lock timeout (tried
    again when the lock is busy), indexes built CONCURRENTLY, nothing
    rewritten. A table already current is left alone (exit 0); a table newer
    than this drain is refused: drain never downgrades.
    """
    common.configure_logging(verbose)
    target = common.table_of(schema_name, table)
    with common.errors_as_exit_codes(verbose):
        chosen = migrations.check_extras([name.strip() for name in extras or []])
        if print_sql:
            if dry_run:
                raise UsageError("give --print-sql or --dry-run, not both")
            if from_version is None:
                raise UsageError(
                    "--print-sql needs --from N, the version the table is at "
                    "(drain status shows it; 0 for a table made by hand)"
                )
            typer.echo(migrations.print_sql(target, from_version, chosen), nl=False)
            return
        if from_version is not None:
            raise UsageError(
                "--from goes with --print-sql (drain migrate reads the table's version)"
            )
        seconds = common.duration(lock_timeout, "--lock-timeout")
        if seconds <= 0:
            raise UsageError("--lock-timeout must be above 0, e.g. 2s")
        if not 1 <= lock_attempts <= MAX_ATTEMPTS:
            raise UsageError(f"--lock-attempts must be between 1 and {MAX_ATTEMPTS}")
        session = common.open_session(dsn, connect_timeout, connect_retry)
        try:
            if dry_run:
                text = session.call(lambda conn: migrations.dry_run(conn, target, chosen))
                _print_dry_run(target, text, json_output)
                return
            report = session.call(
                lambda conn: migrations.migrate(
                    conn, target, chosen, lock_timeout=seconds, attempts=lock_attempts
                )
            )
        finally:
            session.close()
    _print_report(report, json_output)


def _print_dry_run(target: JobTable, text: str, json_output: bool) -> None:
    if json_output:
        common.print_json({"table": target.qualified, "dry_run": True, "sql": text})
        return
    if not text:
        typer.echo(f"drain: {target.qualified} is current; nothing to apply", err=True)
        return
    typer.echo(text, nl=False)
    typer.echo(
        f"drain: dry run: the SQL above is what {target.qualified} needs; nothing was changed",
        err=True,
    )


def _print_report(report: migrations.Report, json_output: bool) -> None:
    name = report.before.table.qualified
    if json_output:
        common.print_json(
            {
                "table": name,
                "from_version": report.before.version,
                "version": report.after.version,
                "extras": list(report.after.done),
                "applied": [
                    {"step": a.step, "seconds": round(a.seconds, 3), "lock_retries": a.retries}
                    for a in report.applied
                ],
                "seconds": round(report.seconds, 3),
            }
        )
        return
    if not report.applied:
        typer.echo(f"drain: {name} is current ({report.after.describe()}); nothing to do", err=True)
        return
    for applied in report.applied:
        retries = f", {applied.retries} lock retries" if applied.retries else ""
        typer.echo(f"drain: applied {applied.step} ({applied.seconds:.3f} s{retries})", err=True)
    typer.echo(
        f"drain: migrated {name} from {report.before.describe()} to {report.after.describe()} "
        f"in {report.seconds:.3f} s",
        err=True,
    )
