"""``drain report``: write the week of runs and awake time as one HTML file.

Reading and drawing live in :mod:`drain.observe.report` and :mod:`drain.planning.drawing`; this
module checks the options, reads the one snapshot on a short connection, writes
the file and says so in one line.
"""

from __future__ import annotations

from typing import Any

import typer

from drain.cli import common
from drain.core.errors import DrainError
from drain.core.settings import commands

EXAMPLES = """\
Examples:

  drain report --html report.html

  drain report --html /var/www/drain/index.html --days 30 --idle-timeout 5m

  drain run --app myapp.jobs --report report.html   # written at the end of each run

Nothing in the file fetches anything (no script, no font, no link), so opening
it never wakes the database. Exit codes: 0 written, 1 the database could not be
read or the file not written, 2 usage error (no database given, a bad option).
"""


@common.command_of(commands.REPORT)
def report_command(
    *, html: str, days: float, idle_timeout: float, verbose: bool, **connection: Any
) -> None:
    """Write the HTML report: attention, the last runs, the awake week.

    The queues, the runs on one time axis with their throughput, the latest runs
    and the failed jobs, all from one snapshot.
    """
    from drain.core.redact import Redactor
    from drain.observe import report

    common.configure_logging(verbose)
    target = common.target_of(connection)
    with common.errors_as_exit_codes(verbose):
        report.check_days(days)
        path = report.report_path(html)
        session = common.session_of(connection, report.APPLICATION_NAME)
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
    typer.echo(report.summary_line(path, found))
