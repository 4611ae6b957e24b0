"""The ``drain`` command: a thin typer skin over the package.

Each command lives in its own module here; it parses options (every one also
read from a ``DRAIN_*`` environment variable), builds a configuration, calls one
function, renders text or JSON, and maps drain's errors to exit codes.

A scheduled ``drain run`` pays for its own start-up every time, on a compute that
is billed while awake, so :func:`main` imports only the command it was asked for
(the planner, the demo and the status report stay unloaded during a run). The
full app, with every command, is built for ``drain --help`` and on first access
to :data:`app`.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click
import typer
import typer.core

from drain.cli import common

# The help's panels, in the order a user meets them: set the table up and put
# work in, run it (and plan the schedule), look at what happened, fix what went
# wrong, try it all on a throwaway server.
SET_UP = "Set up and enqueue"
RUN = "Run and plan"
LOOK = "Look"
FIX = "Fix"
TRY = "Try"

# command name: (module in drain.cli, command function or typer group, examples
# epilog, help panel), in the order drain --help lists them.
COMMANDS = {
    "init": ("database", "init_command", "INIT_EXAMPLES", SET_UP),
    "enqueue": ("database", "enqueue_command", "ENQUEUE_EXAMPLES", SET_UP),
    "migrate": ("migrate", "migrate_command", "EXAMPLES", SET_UP),
    "schedule": ("schedule", "app", "EXAMPLES", SET_UP),
    "run": ("run", "run_command", "EXAMPLES", RUN),
    "plan": ("plan", "plan_command", "EXAMPLES", RUN),
    "status": ("status", "status_command", "EXAMPLES", LOOK),
    "jobs": ("jobs", "app", "EXAMPLES", LOOK),
    "report": ("report", "report_command", "EXAMPLES", LOOK),
    "retry": ("maintenance", "retry_command", "RETRY_EXAMPLES", FIX),
    "cancel": ("cancel", "cancel_command", "EXAMPLES", FIX),
    "archive": ("maintenance", "archive_command", "ARCHIVE_EXAMPLES", FIX),
    "purge": ("maintenance", "purge_command", "PURGE_EXAMPLES", FIX),
    "demo": ("demo", "demo_command", "EXAMPLES", TRY),
}


class DrainGroup(typer.core.TyperGroup):
    """The command group, whose usage errors are drain's one line, not click's box.

    click's box runs to five lines and quotes the offending value, which may be a
    DSN with its password (``-c postgresql://...`` typed for ``--dsn``, or a DSN
    left as a stray argument): the message goes through :func:`common.usage_line`,
    which never shows a DSN-shaped value and redacts what is left.
    """

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        arguments = list(sys.argv[1:] if args is None else args)
        try:
            result = super().main(
                arguments,
                prog_name=prog_name or "drain",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        except click.exceptions.NoArgsIsHelpError as exc:
            # click's way of showing the help when no command is given
            if not standalone_mode:
                raise
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            if not standalone_mode:
                raise
            click.echo(common.usage_line(exc, arguments), err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            if not standalone_mode:
                raise
            click.echo("drain: error: aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


def build(only: str | None = None) -> typer.Typer:
    """The typer app with every command, or with just ``only``."""
    application = typer.Typer(
        name="drain",
        cls=DrainGroup,
        help=(
            "A one-shot batch drainer for PostgreSQL job queues, built for databases that "
            "scale to zero."
        ),
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    application.callback()(common.root)
    for name, (module_name, function, epilog, panel) in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"drain.cli.{module_name}")
        command = getattr(module, function)
        if isinstance(command, typer.Typer):  # a group of subcommands (drain schedule ...)
            application.add_typer(command, name=name, rich_help_panel=panel)
        else:
            application.command(name, epilog=getattr(module, epilog), rich_help_panel=panel)(
                command
            )
    return application


@functools.cache
def _full_app() -> typer.Typer:
    return build()


def __getattr__(name: str) -> Any:
    if name == "app":
        return _full_app()
    raise AttributeError(name)


def _requested_command(arguments: list[str]) -> str | None:
    for argument in arguments:
        if not argument.startswith("-"):
            return argument if argument in COMMANDS else None
    return None


def main() -> None:
    """Console-script entry point."""
    build(_requested_command(sys.argv[1:]))()
