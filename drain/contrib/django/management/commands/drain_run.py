"""``manage.py drain_run [drain run's options]``: drain run on the project's own database.

The DSN comes from ``settings.DATABASES`` (``--database`` or ``DRAIN_DATABASE``
names the alias, ``default`` by default), so the project configures its database once. The run
happens in this process, after ``django.setup()``: handlers may use the ORM.
Every other argument goes to ``drain run`` as it is, and its exit code (3: the
budget ran out with work left) is the command's.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import (  # type: ignore[import-untyped]  # no types
    BaseCommand,
    CommandError,
    CommandParser,
)
from django.db import DEFAULT_DB_ALIAS, connections  # type: ignore[import-untyped]

from drain.contrib.django import dsn
from drain.core.errors import DrainError

# Options Django's own command line has already applied before a command runs.
_DJANGO_OPTIONS = ("--settings", "--pythonpath")


def split_arguments(arguments: list[str]) -> tuple[str, list[str]]:
    """This command's ``--database`` (and Django's own options) apart from drain run's."""
    using = os.environ.get("DRAIN_DATABASE") or DEFAULT_DB_ALIAS
    rest: list[str] = []
    position = 0
    while position < len(arguments):
        argument = arguments[position]
        name, equals, value = argument.partition("=")
        if name in ("--database", *_DJANGO_OPTIONS):
            if not equals:
                position += 1
                if position == len(arguments):
                    raise CommandError(f"{name} needs a value")
                value = arguments[position]
            if name == "--database":
                using = value
        else:
            rest.append(argument)
        position += 1
    return using, rest


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Drain the queue once with drain run, on settings.DATABASES[--database]; "
        "every other option is drain run's (see manage.py drain_run --help)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)
        parser.add_argument("drain_args", nargs="*", help="drain run's options, after --")

    def run_from_argv(self, argv: list[str]) -> None:
        """Hand drain run everything but ``--database``, unparsed by Django's argparse.

        Django's parser would refuse drain run's options it does not know (and
        answer ``--help`` with its own options, not drain run's).
        """
        using, rest = split_arguments(argv[2:])
        if "--help" in rest or "-h" in rest:
            from drain.cli.run import django_help

            program = os.path.basename(argv[0])
            program = "python -m django" if program == "__main__.py" else program
            django_help(f"{program} {argv[1]}")
        try:
            self.drain_run(using, rest)
        except CommandError as exc:
            self.stderr.write(f"CommandError: {exc}")
            raise SystemExit(exc.returncode) from None

    def handle(self, *args: Any, **options: Any) -> None:
        """``call_command("drain_run", "--", "--handler", ...)`` from Python code."""
        self.drain_run(options["database"], list(options["drain_args"]))

    def drain_run(self, using: str, arguments: list[str]) -> None:
        """Run drain run's command line with DRAIN_DSN set to the project's database.

        The DSN goes in the environment, not on a command line: never in the
        process list, and an explicit ``--dsn`` still wins. drain run ends the
        process with its exit code (SystemExit).
        """
        from drain.cli import build

        try:
            connection_string = dsn(using)
        except DrainError as exc:
            raise CommandError(str(exc), returncode=exc.exit_code) from None
        # The run opens its own connections; Django's stays closed while it works.
        connections.close_all()
        before = os.environ.get("DRAIN_DSN")
        os.environ["DRAIN_DSN"] = connection_string
        try:
            build("run")(args=["run", *arguments], prog_name="drain")
        finally:
            if before is None:
                os.environ.pop("DRAIN_DSN", None)
            else:
                os.environ["DRAIN_DSN"] = before
