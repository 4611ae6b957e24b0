"""``drain migrate``: bring a queue table to this drain's schema version and extras, live."""

from __future__ import annotations

from typing import Any

import typer

from drain.cli import common
from drain.core.errors import UsageError
from drain.core.settings import commands
from drain.core.settings.defaults import MAX_LOCK_ATTEMPTS
from drain.core.table import JobTable
from drain.store import migrations

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


@common.command_of(commands.MIGRATE)
def migrate_command(
    *,
    extras: tuple[str, ...],
    dry_run: bool,
    print_sql: bool,
    from_version: int | None,
    lock_timeout: float,
    lock_attempts: int,
    json: bool,
    verbose: bool,
    **connection: Any,
) -> None:
    """Bring a queue table of an earlier schema version to this drain's, live.

    Each missing step of sql/migrations/ is applied in order while runs drain
    the table: each statement on its own under a short lock timeout (tried
    again when the lock is busy), indexes built CONCURRENTLY, nothing
    rewritten. A table already current is left alone (exit 0); a table newer
    than this drain is refused: drain never downgrades.
    """
    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        chosen = migrations.check_extras([name.strip() for name in extras])
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
        seconds = lock_timeout
        if seconds <= 0:
            raise UsageError("--lock-timeout must be above 0, e.g. 2s")
        if not 1 <= lock_attempts <= MAX_LOCK_ATTEMPTS:
            raise UsageError(f"--lock-attempts must be between 1 and {MAX_LOCK_ATTEMPTS}")
        session = common.session_of(connection)
        try:
            if dry_run:
                text = session.call(lambda conn: migrations.dry_run(conn, target, chosen))
                _print_dry_run(target, text, json)
                return
            report = session.call(
                lambda conn: migrations.migrate(
                    conn, target, chosen, lock_timeout=seconds, attempts=lock_attempts
                )
            )
        finally:
            session.close()
    _print_report(report, json)


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
