"""The ``drain`` command: a thin typer skin over the package.

Each command lives in its own module here; it parses options (every one also
read from a ``DRAIN_*`` environment variable), builds a configuration, calls one
function, renders text or JSON, and maps drain's errors to exit codes.
"""

from __future__ import annotations

import typer

from drain.cli import common

app = typer.Typer(
    name="drain",
    help=(
        "A one-shot batch drainer for PostgreSQL job queues, built for databases that "
        "scale to zero."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.callback()(common.root)


def _register() -> None:
    from drain.cli import database, demo, maintenance, plan, run, status

    app.command("init", epilog=database.INIT_EXAMPLES)(database.init_command)
    app.command("enqueue", epilog=database.ENQUEUE_EXAMPLES)(database.enqueue_command)
    app.command("run", epilog=run.EXAMPLES)(run.run_command)
    app.command("plan", epilog=plan.EXAMPLES)(plan.plan_command)
    app.command("status", epilog=status.EXAMPLES)(status.status_command)
    app.command("retry", epilog=maintenance.RETRY_EXAMPLES)(maintenance.retry_command)
    app.command("archive", epilog=maintenance.ARCHIVE_EXAMPLES)(maintenance.archive_command)
    app.command("demo", epilog=demo.EXAMPLES)(demo.demo_command)


_register()


def main() -> None:
    """Console-script entry point."""
    app()
