"""``drain report``: write the week of runs and awake time as one HTML file.

Reading and drawing live in :mod:`drain.observe.report` and :mod:`drain.planning.drawing`; this
module checks the options, reads the one snapshot on a short connection, writes
the file and says so in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from drain.cli import common
from drain.core.durations import format_duration
from drain.core.errors import DrainError
from drain.ops import status

if TYPE_CHECKING:
    from drain.core.table import JobTable

EXAMPLES = """\
Examples:

  drain report --html report.html

  drain report --html /var/www/drain/index.html --days 30 --idle-timeout 5m

  drain run --app myapp.jobs --report report.html   # written at the end of each run

Nothing in the file fetches anything (no script, no font, no link), so opening
it never wakes the database. Exit codes: 0 written, 1 the database could not be
read or the file not written, 2 usage error (no database given, a bad option).
"""


def report_command(
    html_file: Annotated[
        str,
        typer.Option(
            "--html",
            envvar="DRAIN_HTML",
            help="The HTML file to write (replaced atomically).",
            show_default=False,
        ),
    ],
    days: Annotated[
        float,
        typer.Option(
            "--days",
            envvar="DRAIN_REPORT_DAYS",
            help="How many days of recorded runs to draw, up to now on the database clock.",
        ),
    ] = 7.0,
    idle_timeout: Annotated[
        str,
        typer.Option(
            "--idle-timeout",
            envvar="DRAIN_IDLE_TIMEOUT",
            help="How long after a run the compute stays awake (shaded after each run).",
        ),
    ] = format_duration(status.DEFAULT_IDLE_TIMEOUT),
    dsn: common.DsnOption = None,
    schema_name: common.SchemaOption = "public",
    table: common.TableOption = "jobs",
    connect_timeout: common.ConnectTimeoutOption = "10s",
    connect_retry: common.ConnectRetryOption = "30s",
    verbose: common.VerboseOption = False,
) -> None:
    """Write the HTML report: attention, the last runs, the awake week.

    The queues, the runs on one time axis with their throughput, the latest runs
    and the failed jobs, all from one snapshot.
    """
    common.configure_logging(verbose)
    target = common.table_of(schema_name, table)
    with common.errors_as_exit_codes(verbose):
        timeout = common.duration(idle_timeout, "--idle-timeout")
        line = _write_report(html_file, days, timeout, target, dsn, connect_timeout, connect_retry)
    typer.echo(line)


def _write_report(
    html_file: str,
    days: float,
    idle_timeout: float,
    target: JobTable,
    dsn: str | None,
    connect_timeout: str,
    connect_retry: str,
) -> str:
    """Check the window and the path, read the snapshot, write the page; its summary line."""
    from drain.core.redact import Redactor
    from drain.observe import report

    report.check_days(days)
    path = report.report_path(html_file)
    session = common.open_session(
        dsn, connect_timeout, connect_retry, application_name=report.APPLICATION_NAME
    )
    try:
        found = session.call(
            lambda conn: report.read(conn, target, days=days, idle_timeout=idle_timeout)
        )
    finally:
        session.close()
    try:
        report.write(path, report.render(found, Redactor(session.options.dsn)))
    except OSError as exc:
        raise DrainError(f"cannot write {path}: {exc.strerror or exc}") from None
    return report.summary_line(path, found)
