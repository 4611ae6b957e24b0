"""``drain run``: drain the queue once and exit with a code a scheduler can act on."""

# Every option comes from the table of settings (drain.core.settings): the command's
# parameters are made from it, so no option is named, defaulted or parsed here
# (tests/test_settings.py holds `drain run --help` to the table).
import contextlib
import os
import sys
import time
from typing import Any

import click
import typer
import typer.main
from click.core import ParameterSource

from drain import runner
from drain.cli import common
from drain.core import config, settings
from drain.core.settings import DEFAULT_SCHEMA, DEFAULT_TABLE, SETTINGS, commands
from drain.observe import words
from drain.store.db import resolve_dsn

EXAMPLES = """\
Examples:

  drain run --app myapp.jobs --max-seconds 300

  drain run --handler myapp.jobs:send_email --queue emails --concurrency 8

  drain run --exec "python scripts/render.py" --queue reports --lease 15m

Exit codes: 0 drained (or nothing to do), 3 stopped with work left (budget or
signal: a scheduler may start another run), 1 the run failed, 2 usage error.
"""


def process_age() -> float:
    """Seconds since this process started (Linux), so start-up counts against the budget.

    A scheduler's timeout covers the whole process; interpreter and import time
    are part of what the budget must fit in.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            now = float(uptime.read().split()[0])
        return max(0.0, now - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _handler_spelling() -> dict[str, str]:
    """The handler sources named as given: ``DRAIN_EXEC`` when the variable gave --exec."""
    context = click.get_current_context()
    from_variables = [
        setting.key
        for setting in SETTINGS
        if setting.key in config.HANDLER_SOURCES
        and context.get_parameter_source(setting.param) is ParameterSource.ENVIRONMENT
    ]
    return config.handler_spelling(variables=from_variables)


@common.takes_settings(SETTINGS)
def run_command(**given: Any) -> None:
    """Drain the queue once: reap, claim and run until empty or out of budget, then exit.

    Connects (retrying while a suspended compute resumes), reaps expired leases,
    claims batches and runs them, releases what it did not start, archives old
    done jobs, vacuums when needed, records the run and closes its connection.
    """
    verbose = bool(given.get("verbose"))
    json_logs = given.get("log_format") == "json"
    common.configure_logging(
        verbose,
        "json" if json_logs else "text",
        table=f"{given.get('schema') or DEFAULT_SCHEMA}.{given.get('table') or DEFAULT_TABLE}",
    )
    with common.errors_as_exit_codes(verbose, as_log=json_logs):
        values = config.run_keywords(
            settings.from_options(given, SETTINGS, common.given_names(SETTINGS))
        )
        json_output = values.pop("json")
        del values["verbose"], values["log_format"]
        sources = {key: values.pop(key) for key in config.HANDLER_SOURCES}
        config.check_handler_sources(sources, _handler_spelling(), os.environ)
        run_config = config.RunConfig.of(
            resolve_dsn(values.pop("dsn")),
            progress=sys.stderr.isatty() and not json_output,
            retry_notice=sys.stderr.isatty(),
            **values,
        )
        run_config.validate()
        # With --json, stdout is drain's alone: what a handler prints (or its module
        # prints on import) goes to stderr, as an --exec program's output does.
        handler_output = (
            contextlib.redirect_stdout(sys.stderr) if json_output else contextlib.nullcontext()
        )
        with handler_output:
            handlers = runner.resolve_handlers(
                **sources, queues=run_config.queues, config=run_config
            )
            started = time.monotonic() - process_age()
            summary = runner.Runner(
                run_config, handlers, started=started, backlog=json_output
            ).run()
    for note in summary.notes:
        common.say(words.note_text(note), as_log=json_logs, level="warning")
    if summary.error:
        common.say(f"error: {summary.error}", as_log=json_logs, level="error")
    counts = summary.as_dict()
    del counts["notes"], counts["table"]
    if summary.exit_reason != "usage":  # a usage error is one line, as at start-up
        common.say(words.summary_line(summary).removeprefix("drain: "), as_log=json_logs, **counts)
    if json_output:
        common.print_json(summary.as_dict())
    raise typer.Exit(summary.exit_code)


DJANGO_EXAMPLES = """\
Examples:

  python manage.py drain_run --app myproject.jobs --max-seconds 300

  python manage.py drain_run --database queue --handler myproject.jobs:send --queue emails

Exit codes: those of drain run: 0 drained, 3 stopped with work left, 1 the
run failed, 2 usage error.
"""


def django_help(prog_name: str = "manage.py drain_run") -> None:
    """``manage.py drain_run --help``: drain run's options and ``--database``, under its own name.

    The command hands drain run everything but ``--database``; its help must
    say so, with the usage line a Django user types, not ``drain run``'s.
    """

    def drain_run(**given: Any) -> None:
        """Drain the queue once on the project's own database, in this process.

        The DSN comes from settings.DATABASES[--database]; handlers may use the
        ORM (django.setup() has run). Every other option is drain run's.
        """

    application = typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    application.command(epilog=DJANGO_EXAMPLES)(
        common.takes_settings(commands.DJANGO_RUN)(drain_run)
    )
    typer.main.get_command(application).main(["--help"], prog_name=prog_name)
