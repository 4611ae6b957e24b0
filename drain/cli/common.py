"""What every command shares: the version flag, DSN and table options, error mapping.

Every command's options are made from its rows in :mod:`drain.core.settings`
(names, variables, defaults, parsers, help, panel): :func:`command_of` builds
them and hands the command its values parsed, so a command that shares an option
with another (``--dsn``, ``--table``) spells, defaults and reads it the same.
Nothing here loads the database driver at import: ``drain plan`` uses this module
and never connects unless asked to.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import click
import typer
from click.core import ParameterSource

from drain import __version__
from drain.core.errors import EXIT_USAGE, DrainError, UsageError
from drain.core.settings import (
    APPLICATION_NAME,
    DEFAULT_CONNECT_RETRY,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SCHEMA,
    DEFAULT_TABLE,
    DSN_VARIABLES,
    Flag,
    Names,
    Paths,
    Setting,
    from_options,
)

if TYPE_CHECKING:
    from drain.core.table import JobTable
    from drain.store.db import Session

DSN_ON_COMMAND_LINE = (
    "drain: warning: the password given with --dsn is visible to other users in the "
    "process list; pass the DSN in DRAIN_DSN instead, or the password in ~/.pgpass "
    "(or the file PGPASSFILE names)"
)


def warn_password_on_command_line(
    ctx: typer.Context, param: typer.CallbackParam, value: str | None
) -> str | None:
    """Warn (once, on stderr, never echoing it) when --dsn itself carries a password.

    Only an option typed on the command line is in the process list: the same
    DSN from DRAIN_DSN or DATABASE_URL draws no warning.
    """
    if (
        value
        and not ctx.resilient_parsing
        and param.name is not None
        and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
    ):
        from drain.core.redact import has_password

        if has_password(value):
            typer.echo(DSN_ON_COMMAND_LINE, err=True)
    return value


class _CommaSeparated(click.types.StringParamType):
    """Text of a repeatable option whose variable is a comma-separated list.

    click splits a repeatable option's variable on blanks, which once made
    ``DRAIN_QUEUE="emails, reports"`` the queues ``emails,`` and ``reports``; the
    setting's own parser then splits every value on commas and strips the blanks.
    """

    envvar_list_splitter = ","


# What rich reads as a markup tag: ``[metrics]``, ``[/]``, ``[#fff]``, ``[@click]``
# (the pattern rich.markup.escape looks for; importing rich for it would cost every
# command, help or not, about 8 ms of start-up).
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def escape_markup(text: str) -> str:
    """``text`` with every markup tag escaped, so rich prints it as written."""
    return _MARKUP_TAG.sub(r"\1\1\\\2", text)


def option(setting: Setting, **extra: Any) -> Any:
    """The typer option of ``setting``: its names, variables, panel and help from the table.

    The help is escaped for rich: ``pip install 'pg-drain[metrics]'`` must show
    its extra, not lose ``[metrics]`` as a markup tag.
    """
    names = (setting.option, setting.short) if setting.short else (setting.option,)
    envvar = list(setting.envvars) if len(setting.envvars) > 1 else setting.envvar
    if setting.option == "--dsn":
        extra = {"callback": warn_password_on_command_line, **extra}
    if setting.metavar is not None:
        extra = {**extra, "metavar": setting.metavar}
    if setting.required:
        extra = {**extra, "show_default": False}
    return typer.Option(
        *names,
        envvar=envvar,
        help=escape_markup(setting.help),
        rich_help_panel=setting.panel,
        **extra,
    )


def takes_settings(settings: Iterable[Setting]) -> Callable[[Any], Any]:
    """Decorator: the command takes one option per setting, as keywords named by ``param``.

    typer reads the signature made here as if the options were written out. A
    flag is a flag (off unless given); a list repeats and splits on commas;
    everything else arrives as text and is parsed by the setting itself, so a bad
    value is one line naming the option, as every other usage error is.
    """
    signature = inspect.Signature([_parameter(setting) for setting in settings])

    def decorate(command: Any) -> Any:
        command.__signature__ = signature
        return command

    return decorate


def command_of(settings: Iterable[Setting]) -> Callable[[Any], Any]:
    r"""Decorator: the command's options are ``settings``, handed over parsed, by key.

    The command declares its arguments (typer ``Argument``\ s), then one keyword
    per setting named by :attr:`Setting.key`, and receives each value parsed (a
    duration in seconds, a list as a tuple). A value that does not parse is one
    usage line naming where it came from: the option, or the variable that set it.
    """
    table = tuple(settings)

    def decorate(command: Any) -> Any:
        own = [
            parameter
            for parameter in inspect.signature(command, eval_str=True).parameters.values()
            if _is_argument(parameter)
        ]

        def parse_then_call(**given: Any) -> Any:
            arguments = {parameter.name: given[parameter.name] for parameter in own}
            try:
                values = from_options(given, table, given_names(table))
            except UsageError as exc:
                fail_usage(str(exc))
            return command(**arguments, **values)

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(parse_then_call, attribute, getattr(command, attribute))
        parse_then_call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [*own, *map(_parameter, table)]
        )
        return parse_then_call

    return decorate


def _is_argument(parameter: inspect.Parameter) -> bool:
    """A parameter the command declares itself: an argument, or the click context."""
    if parameter.annotation is typer.Context:
        return True
    metadata = getattr(parameter.annotation, "__metadata__", ())
    return any(isinstance(item, typer.models.ArgumentInfo) for item in metadata)


def given_names(table: Iterable[Setting]) -> dict[str, str]:
    """For each option its variable gave, that variable's name (``DRAIN_MAX_SECONDS``).

    A value from the environment is refused naming the variable, not an option
    the user never typed.
    """
    context = click.get_current_context(silent=True)
    if context is None:
        return {}
    names: dict[str, str] = {}
    for setting in table:
        if context.get_parameter_source(setting.param) is ParameterSource.ENVIRONMENT:
            names[setting.param] = next(
                (name for name in setting.envvars if os.environ.get(name)), setting.envvar
            )
    return names


def _parameter(setting: Setting) -> inspect.Parameter:
    kind = setting.kind
    annotation: Any
    default: Any
    if isinstance(kind, Flag):
        annotation, default = Annotated[bool, option(setting)], False
    elif isinstance(kind, Names):
        metavar = setting.metavar or getattr(kind, "metavar", None) or "TEXT"
        # a list splits on commas; paths are taken whole (click splits their variable on blanks)
        click_type = click.STRING if isinstance(kind, Paths) else _CommaSeparated()
        details = option(setting, click_type=click_type, metavar=metavar)
        annotation, default = Annotated[list[str] | None, details], None
    elif setting.required:
        annotation, default = Annotated[str, option(setting)], inspect.Parameter.empty
    elif setting.default is None:
        metavar = {} if setting.metavar else {"metavar": kind.metavar}
        annotation, default = Annotated[str | None, option(setting, **metavar)], None
    else:
        metavar = {} if setting.metavar else {"metavar": kind.metavar}
        annotation = Annotated[str, option(setting, **metavar)]
        default = setting.shown_default
    return inspect.Parameter(
        setting.param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def open_session(
    dsn: str | None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    connect_retry: float = DEFAULT_CONNECT_RETRY,
    *,
    application_name: str = APPLICATION_NAME,
    pooler: bool = False,
) -> Session:
    """A session for a command, named in pg_stat_activity; it connects on first use."""
    from drain.core.config import ConnectOptions
    from drain.store.db import Session, resolve_dsn

    options = ConnectOptions(
        dsn=resolve_dsn(dsn),
        connect_timeout=connect_timeout,
        retry_for=connect_retry,
        application_name=application_name,
        pooler=pooler,
        retry_notice=sys.stderr.isatty(),
    )
    return Session(options)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"drain {__version__}")
        raise typer.Exit()


def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """drain: reap, claim, run, release, archive, close, exit."""


def target_of(connection: Mapping[str, Any]) -> JobTable:
    """The queue table a command's ``--schema`` and ``--table`` name."""
    return table_of(connection["schema"], connection["table"])


def session_of(connection: Mapping[str, Any], application_name: str = APPLICATION_NAME) -> Session:
    """A session from a command's connection settings (the shared rows), named for it."""
    return open_session(
        connection["dsn"],
        connection["connect_timeout"],
        connection["retry_for"],
        application_name=application_name,
        pooler=connection.get("pooler", False),
    )


def table_of(schema: str = DEFAULT_SCHEMA, table: str = DEFAULT_TABLE) -> JobTable:
    from drain.core.table import JobTable

    for option_name, name in (("--schema", schema), ("--table", table)):
        if not name.strip():
            fail_usage(f"{option_name} is empty: name the queue table's {option_name[2:]}")
    try:
        return JobTable(schema=schema, name=table)
    except UsageError as exc:  # a name PostgreSQL would cut short
        fail_usage(str(exc))


def fail_usage(message: str) -> NoReturn:
    typer.echo(f"drain: error: {scrub(message, sys.argv[1:])}", err=True)
    raise typer.Exit(EXIT_USAGE)


def configure_logging(verbose: bool, log_format: str = "text", **fields: Any) -> None:
    """Log lines go to stderr; --verbose adds the details.

    ``log_format`` json makes each line one JSON object (time, level, message and
    ``fields``, the run's own such as its table), for a log pipeline to parse;
    the message is redacted as the text lines are, and no payload is ever logged.
    """
    from drain.core.redact import redact

    handler = logging.StreamHandler(sys.stderr)
    _LOG_FIELDS.clear()
    if log_format == "json":
        _LOG_FIELDS.update(fields)
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(_RedactingFormatter("drain: %(message)s", redact))
    logger = logging.getLogger("drain")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False
    # The driver logs what it ignores while a broken connection is torn down;
    # drain already says what happened in its own words, so those lines show
    # only with --verbose (and through the same redaction).
    driver = logging.getLogger("psycopg")
    driver.handlers[:] = [handler] if verbose else [logging.NullHandler()]
    driver.propagate = False


# The run's own fields every JSON log line carries (its table), set by configure_logging.
_LOG_FIELDS: dict[str, Any] = {}


def json_line(level: str, message: str, created: float | None = None, **fields: Any) -> str:
    """One log line as a JSON object: time, level, message, the run's fields, ``fields``."""
    import time as clock
    from datetime import UTC, datetime

    from drain.core.redact import redact

    moment = datetime.fromtimestamp(clock.time() if created is None else created, UTC)
    entry = {
        "time": moment.isoformat(timespec="milliseconds"),
        "level": level,
        "message": redact(message),
        **_LOG_FIELDS,
        **fields,
    }
    return json.dumps(entry, default=str)


def say(message: str, *, as_log: bool, level: str = "info", **fields: Any) -> None:
    """A line of the command's own on stderr: ``drain: message``, or a JSON log line."""
    if as_log:
        typer.echo(json_line(level, message, **fields), err=True)
    else:
        typer.echo(f"drain: {message}", err=True)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json_line(record.levelname.lower(), record.getMessage(), record.created)


class _RedactingFormatter(logging.Formatter):
    def __init__(self, fmt: str, redact: Callable[[str], str]) -> None:
        super().__init__(fmt)
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


@contextlib.contextmanager
def errors_as_exit_codes(
    verbose: bool = False, secrets: list[str] | None = None, *, as_log: bool = False
) -> Iterator[None]:
    """Turn drain's expected errors into one line on stderr and their exit code.

    ``as_log``: the line is a JSON log line (``--log-format json``).
    """
    try:
        yield
    except DrainError as exc:
        from drain.core.redact import redact

        if verbose:
            trace = "".join(traceback.format_exception(exc))
            typer.echo(redact(trace, secrets), err=True)
        message = scrub(redact(str(exc), secrets), sys.argv[1:])
        if as_log:
            typer.echo(json_line("error", message, exit_code=exc.exit_code), err=True)
        else:
            typer.echo(f"drain: error: {message}", err=True)
        raise typer.Exit(exc.exit_code) from None


# What a value typed where a DSN does not belong looks like.
_DSN_SHAPED = re.compile(r"://|\bpassword\s*=", re.I)
DSN_NOT_SHOWN = "<a DSN, not shown>"


def looks_like_dsn(value: str) -> bool:
    """Whether ``value`` is, or holds, a connection string: it is never echoed back."""
    if _DSN_SHAPED.search(value):
        return True
    given = {os.environ.get(name) for name in DSN_VARIABLES}
    return value in given - {None, ""}


def scrub(message: str, arguments: Iterable[str] = ()) -> str:
    """``message`` without any DSN-shaped argument or DSN the environment gives.

    A usage error quotes the value it refused; when that value is a DSN (a
    password and all), it is replaced whole, raw or already redacted, and what is
    left is redacted as every error text is.
    """
    from drain.core.redact import redact

    candidates = [*arguments, *(os.environ.get(name) or "" for name in DSN_VARIABLES)]
    for value in sorted({v for v in candidates if v and looks_like_dsn(v)}, key=len, reverse=True):
        for form in (value, redact(value)):
            message = message.replace(form, DSN_NOT_SHOWN)
    return " ".join(redact(message).split())


# typer suggests a command, and click does too: "Did you mean 'run'? Did you mean 'run'?"
_SUGGESTED_TWICE = re.compile(r"(Did you mean [^?]+\?)(?:\s+\1)+")


def _once(message: str) -> str:
    """``message`` with a suggestion said once."""
    return _SUGGESTED_TWICE.sub(r"\1", message)


def usage_line(exc: click.ClickException, arguments: Iterable[str]) -> str:
    """click's error as drain's one line, pointing at the help of the command in use."""
    message = _once(exc.format_message()).rstrip(".")
    line = f"drain: error: {scrub(message, arguments)}"
    context = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and context is not None:
        line += f" (see '{context.command_path} --help')"
    return line


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str, sort_keys=False))
