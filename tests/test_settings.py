"""One table of settings: ``drain run``, the serverless entry point and the table agree.

The settings used to be known in four places with four parsers, and they drifted:
``DRAIN_QUEUE="emails, reports"`` gave ``drain run`` the queues ``emails,`` and
``reports``. These tests hold the real ``drain run --help`` to
:data:`drain.core.settings.SETTINGS`, read every setting's variable through both
entry points, and drain two queues named in one variable through both.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple, get_args, get_origin, get_type_hints

import click
import psycopg
import pytest
import rich.markup
import typer.main

from drain import serverless
from drain.cli import app
from drain.core import config, settings
from drain.core.errors import UsageError
from drain.core.rates import Rate
from drain.core.settings import (
    SETTINGS,
    Caps,
    Choice,
    Duration,
    Flag,
    Integer,
    Names,
    Rates,
    Setting,
    Size,
    Text,
)
from tests.support import REPO, add_jobs, drain_cli

RUN = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
SERVERLESS_ONLY = ("DRAIN_SAFETY_MARGIN",)
FLAG_SPELLINGS = ["1", "0", "true", "false", "t", "f", "yes", "no", "y", "n", "on", "off"]
FLAG_SPELLINGS += ["TRUE", " Yes ", "Off"]


@pytest.fixture(autouse=True)
def no_run_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No variable of the table from the environment changes what a test reads."""
    for setting in SETTINGS:
        for name in setting.envvars:
            monkeypatch.delenv(name, raising=False)
    for name in SERVERLESS_ONLY:
        monkeypatch.delenv(name, raising=False)


# -- drain run --help and the table -------------------------------------------------------


class HelpRow(NamedTuple):
    """One option of the rendered help: its short name, variables and shown default."""

    short: str | None
    envvars: tuple[str, ...]
    default: str | None


# A project's manage.py, as django-admin startproject writes it (less the settings line).
MANAGE_PY = REPO / "tests" / "apps" / "manage.py"


def help_text(*command: str) -> str:
    """``drain COMMAND --help`` as a user sees it, in a wide terminal."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    environment.update(COLUMNS="1000", NO_COLOR="1", TERM="dumb")
    program = [sys.executable, "-m", "drain"]
    if command[0] == "manage.py":  # the Django face: a project's manage.py
        program = [sys.executable, str(MANAGE_PY)]
        command = command[1:]
        environment.update(
            DJANGO_SETTINGS_MODULE="django_site.settings",
            DRAIN_TEST_DJANGO_DSN="dbname=unused",
            PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "apps"), str(REPO)]),
        )
    return subprocess.run(
        [*program, *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        cwd=REPO,
        check=True,
    ).stdout


def help_panels(*command: str) -> dict[str, dict[str, HelpRow]]:
    """The options of every panel of ``drain COMMAND --help``, read from its text."""
    panels: dict[str, dict[str, HelpRow]] = {}
    for box in re.finditer(r"╭─ (.+?) ─+╮\n(.*?)╰", help_text(*command), re.S):
        entries: list[str] = []
        for line in box.group(2).splitlines():
            cell = line.strip().strip("│").strip().lstrip("*").strip()  # * marks a required one
            if cell.startswith("--"):
                entries.append(cell)
            elif entries and cell:
                entries[-1] += " " + cell
        rows: dict[str, HelpRow] = {}
        for entry in entries:
            names = re.match(r"(--[\w-]+)(?:\s+(-\w)\b)?", entry)
            assert names is not None, entry
            envvar = re.search(r"\[env var: ([^\]]+)\]", entry)
            default = re.search(r"\[default: ([^\]]+)\]", entry)
            rows[names.group(1)] = HelpRow(
                names.group(2),
                tuple(envvar.group(1).split(", ")) if envvar else (),
                default.group(1) if default else None,
            )
        if rows:
            panels[box.group(1)] = rows
    return panels


def in_help_order(table: list[Setting]) -> dict[str, list[str]]:
    """The table's options by panel, as the help shows them: its own panel first."""
    panels: dict[str, list[str]] = {"Options": []}
    for setting in table:
        panels.setdefault(setting.panel or "Options", []).append(setting.option)
    panels["Options"].append("--help")
    return panels


@pytest.mark.parametrize("command", list(settings.COMMANDS))
def test_every_help_option_is_a_row_of_the_table_and_every_row_in_the_help(command: str) -> None:
    """What ``drain COMMAND --help`` lists is exactly ``settings_of(COMMAND)``, in order."""
    table = settings.settings_of(command)
    panels = help_panels(*command.split())
    shown = {panel: list(rows) for panel, rows in panels.items()}
    assert shown == in_help_order(table)
    rows = {option: row for panel in panels.values() for option, row in panel.items()}
    for setting in table:
        assert rows[setting.option] == (
            setting.short,
            setting.envvars,
            None if setting.required else setting.shown_default,
        ), (command, setting.option)


def test_drain_run_help_is_in_panels() -> None:
    assert list(help_panels("run")) == [
        "Options",
        "Handlers",
        "Budget and leases",
        "Archive and vacuum",
        "Observability",
        "Connection",
    ]


def test_the_extras_show_as_written_in_the_help() -> None:
    """rich markup once swallowed ``[metrics]``: the help told users to install 'pg-drain'."""
    shown = " ".join(help_text("run").split())
    for extra in ("metrics", "otel", "sentry"):
        assert f"pip install 'pg-drain[{extra}]'" in shown


def test_the_batch_size_help_says_how_claims_start() -> None:
    """The help's figures are the claim policy's, not a guess."""
    from drain.runner import policy

    text = settings.BY_KEY["batch_size"].help
    assert f"start at {policy.FIRST_CLAIM_PER_WORKER} per worker" in text
    assert f"at most {policy.FIRST_CLAIM})" in text


def test_settings_of_an_unknown_command_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="run"):
        settings.settings_of("rnu")


def test_every_option_of_drain_run_is_a_setting_and_every_setting_an_option() -> None:
    options = {p.name: p for p in RUN.params if isinstance(p, click.Option) and p.name != "help"}
    assert sorted(options) == sorted(setting.param for setting in SETTINGS)
    for setting in SETTINGS:
        param = options[setting.param]
        names = param.envvar if isinstance(param.envvar, list) else [param.envvar]
        assert tuple(names) == setting.envvars
        assert sorted(param.opts) == sorted(filter(None, [setting.option, setting.short]))
        assert param.help == rich.markup.escape(setting.help)
        if isinstance(setting.kind, Flag):
            assert param.is_flag and setting.from_option(param.default) == setting.default
        else:
            assert setting.from_option(param.default) == setting.default, setting.option


def test_the_defaults_are_those_of_the_run() -> None:
    """The table's defaults, RunConfig's and ConnectOptions' are one set of values."""
    run = config.RunConfig.of("")
    values = config.run_keywords({s.key: s.default for s in SETTINGS})
    for key, value in values.items():
        if key in ("app", "handler", "exec_command", "dsn", "json", "verbose", "log_format"):
            continue
        owner = run.connect if key in run.connect._fields else run
        assert getattr(owner, key) == value, key
    fields = {f.name for f in dataclasses.fields(config.RunConfig)} - {"connect", "progress"}
    assert fields <= set(values), fields - set(values)


@pytest.mark.parametrize("key", ["archive_mode", "vacuum"])
def test_a_choice_allows_what_the_run_takes(key: str) -> None:
    """The table's choices are the values RunConfig's annotation allows, no more, no less."""
    kind = settings.BY_KEY[key].kind
    assert isinstance(kind, Choice)
    annotation = get_type_hints(config.RunConfig)[key]
    literals = get_args(annotation) if get_origin(annotation) is Literal else ()
    allowed = literals or tuple(v for part in get_args(annotation) for v in get_args(part))
    assert kind.choices == allowed


# -- one variable, one meaning, whichever entry point reads it ------------------------------


def cli_keywords(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict[str, Any]:
    """What ``drain run`` makes of ``env``: its real option parser, then its settings."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    context = RUN.make_context("run", [])
    return config.run_keywords(settings.from_options(context.params))


def samples(setting: Setting) -> list[tuple[str, Any]]:
    """Values to give the setting's variable, and what they mean."""
    kind = setting.kind
    if isinstance(kind, Duration):
        return [("90", 90.0), ("90s", 90.0), ("1h30m", 5400.0), ("7d", 604800.0)]
    if isinstance(kind, Integer):
        return [("7", 7), (" 12 ", 12)]
    if isinstance(kind, Size):
        return [("4096", 4096), ("64KiB", 65536), ("16MiB", 16 << 20), ("1MB", 10**6)]
    if isinstance(kind, Choice):
        return [(choice, choice) for choice in kind.choices] + [
            (kind.choices[-1].upper(), kind.choices[-1])
        ]
    if isinstance(kind, Caps):
        two_caps = (("emails", 7), ("reports", 1))
        return [("emails=7, reports=1", two_caps), (" emails = 7 ,, reports=1", two_caps)]
    if isinstance(kind, Rates):
        two_rates = (("emails", Rate(40, "s")), ("reports", Rate(3, "h")))
        return [
            ("emails=40/s, reports=3/h", two_rates),
            (" emails = 40 / s ,, reports=3/h", two_rates),
        ]
    if isinstance(kind, Names):
        two = ("emails", "reports")
        return [("emails, reports", two), ("emails,reports", two), (" emails ,, reports, ", two)]
    if isinstance(kind, Flag):
        return [(text, kind.parse(text, setting.envvar)) for text in FLAG_SPELLINGS]
    assert isinstance(kind, Text)
    return [("some.module:thing", "some.module:thing")]


READ_BY_BOTH = [s for s in SETTINGS if not s.command_only]


def _keyword(setting: Setting) -> str:
    return "table" if setting.key in ("schema", "table") else setting.key


@pytest.mark.parametrize("setting", READ_BY_BOTH, ids=[s.envvar for s in READ_BY_BOTH])
def test_every_variable_is_read_the_same_way_by_drain_run_and_the_function(
    setting: Setting, monkeypatch: pytest.MonkeyPatch
) -> None:
    for text, meaning in samples(setting):
        env = {setting.envvar: text}
        from_function = serverless.settings_from_environment(env)
        from_cli = cli_keywords(monkeypatch, env)
        key = _keyword(setting)
        assert from_function[key] == from_cli[key], (setting.envvar, text)
        if key != "table":
            assert from_cli[key] == meaning, (setting.envvar, text)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DRAIN_LEASE", "soon"),
        ("DRAIN_CONCURRENCY", "four"),
        ("DRAIN_ARCHIVE_MODE", "shred"),
        ("DRAIN_VACUUM", "sometimes"),
        ("DRAIN_QUEUE_CAP", "emails"),
        ("DRAIN_QUEUE_CAP", "emails=0"),
        ("DRAIN_QUEUE_RATE", "emails=0/s"),
        ("DRAIN_QUEUE_RATE", "emails=40/d"),
        ("DRAIN_QUEUE_ORDER", "random"),
    ],
)
def test_a_value_one_entry_point_refuses_the_other_refuses_too(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UsageError, match=name):
        serverless.settings_from_environment({name: value})
    with pytest.raises(UsageError, match=settings.BY_KEY[_key_of(name)].option):
        cli_keywords(monkeypatch, {name: value})


def _key_of(name: str) -> str:
    return next(s.key for s in SETTINGS if name in s.envvars)


def test_the_dsn_variables_keep_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    both = {"DRAIN_DSN": "dbname=first", "DATABASE_URL": "dbname=second"}
    assert serverless.settings_from_environment(both)["dsn"] == "dbname=first"
    assert cli_keywords(monkeypatch, both)["dsn"] == "dbname=first"
    monkeypatch.delenv("DRAIN_DSN")
    only_url = {"DATABASE_URL": "dbname=second"}
    assert serverless.settings_from_environment(only_url)["dsn"] == "dbname=second"
    assert cli_keywords(monkeypatch, only_url)["dsn"] == "dbname=second"


def test_a_repeated_queue_option_splits_on_commas_too() -> None:
    context = RUN.make_context("run", ["-q", "emails, reports", "--queue", "audit"])
    assert settings.from_options(context.params)["queues"] == ("emails", "reports", "audit")


# -- two queues in one variable, drained by both entry points ------------------------------


@pytest.fixture
def two_queues(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    add_jobs(conn, 3, queue="emails")
    add_jobs(conn, 2, queue="reports")
    yield conn


def done_by_queue(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT queue, count(*) FROM jobs WHERE status = 'done' GROUP BY queue"
    ).fetchall()
    return dict(rows)


def test_drain_run_drains_both_queues_of_drain_queue(
    dsn: str, two_queues: psycopg.Connection[Any]
) -> None:
    result = drain_cli(
        "run",
        "--exec",
        "cat > /dev/null",
        "--json",
        dsn=dsn,
        env={"DRAIN_QUEUE": "emails, reports"},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["done"] == 5
    assert done_by_queue(two_queues) == {"emails": 3, "reports": 2}


def test_the_function_drains_both_queues_of_drain_queue(
    dsn: str, two_queues: psycopg.Connection[Any]
) -> None:
    handler = serverless.lambda_handler(
        exec_command="cat > /dev/null",
        environ={"DRAIN_DSN": dsn, "DRAIN_QUEUE": "emails, reports", "DRAIN_MAX_SECONDS": "60"},
    )
    result = handler({}, None)
    assert result["done"] == 5
    assert done_by_queue(two_queues) == {"emails": 3, "reports": 2}


# -- the planner stays off the database driver ---------------------------------------------


def test_importing_the_plan_command_loads_no_database_driver() -> None:
    probe = "import drain.cli.plan, sys; assert 'psycopg' not in sys.modules, 'psycopg loaded'"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr


# -- every command: a bad value from a variable names the variable ------------------------

# What each command needs on its command line before its options are read.
ARGUMENTS = {
    "enqueue": ("q", "{}"),
    "jobs show": ("1",),
    "report": ("--html", "report.html"),
    "schedule add": ("nightly", "@daily", "reports"),
    "schedule remove": ("nightly",),
}
PARSED = (Duration, Integer, settings.Number, Choice, settings.Ids)


def _parsed_setting(command: str) -> Setting:
    return next(s for s in settings.settings_of(command) if isinstance(s.kind, PARSED))


@pytest.mark.parametrize("command", [c for c in settings.COMMANDS if not c.startswith("manage")])
def test_a_bad_value_from_a_variable_names_the_variable(command: str, tmp_path: Any) -> None:
    setting = _parsed_setting(command)
    result = drain_cli(
        *command.split(),
        *ARGUMENTS.get(command, ()),
        env={setting.envvar: "not-a-value", "DRAIN_DSN": "postgresql://nobody@127.0.0.1:1/x"},
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"drain: error: {setting.envvar}"), result.stderr
    assert "'not-a-value'" in lines[0]


def test_the_same_value_on_the_command_line_names_the_option(tmp_path: Any) -> None:
    result = drain_cli("run", "--exec", "true", "--max-seconds", "abc", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("drain: error: --max-seconds: not a duration: 'abc'")


# -- the table's words are those of the layers that act on them ---------------------------


def test_the_choices_of_the_table_are_those_of_the_planner() -> None:
    from drain.planning import cron, plan

    providers = settings.setting_of("plan", "provider").kind
    triggers = settings.setting_of("plan", "trigger").kind
    catch_up = settings.setting_of("schedule add", "catch_up").kind
    assert isinstance(providers, Choice) and isinstance(triggers, Choice)
    assert isinstance(catch_up, Choice)
    assert providers.choices == tuple(p.value for p in plan.ProviderName)
    assert triggers.choices == tuple(t.value for t in plan.Trigger)
    assert catch_up.choices == cron.CATCH_UP_POLICIES


def test_the_max_attempts_limit_is_one_for_every_command() -> None:
    """enqueue, schedule add and the recurring jobs a run fires refuse the same number."""
    from drain.planning.cron import ScheduleError
    from drain.store import recurring

    assert settings.setting_of("enqueue", "max_attempts").default == settings.DEFAULT_MAX_ATTEMPTS
    with pytest.raises(ScheduleError, match=f"{settings.MAX_ATTEMPTS:,}"):
        recurring.checked(
            "n",
            "@daily",
            "q",
            tz="UTC",
            catch_up="latest",
            catch_up_limit=1,
            max_attempts=settings.MAX_ATTEMPTS + 1,
        )
    result = drain_cli("enqueue", "q", "{}", "--max-attempts", str(settings.MAX_ATTEMPTS + 1))
    assert result.returncode == 2
    assert f"between 1 and {settings.MAX_ATTEMPTS:,}" in result.stderr


def test_every_row_of_every_command_follows_the_variable_rule() -> None:
    """Each variable is DRAIN_ and its option (or the command's scoped name), never another's."""
    for command, table in settings.COMMANDS.items():
        options = [s.option for s in table]
        assert len(options) == len(set(options)), command
        for setting in table:
            assert setting.envvar.startswith("DRAIN_"), (command, setting.option)


def test_manage_py_drain_run_help_is_its_own() -> None:
    """Its usage line is the command a Django user types, and it lists --database."""
    shown = help_text("manage.py", "drain_run")
    assert "Usage: manage.py drain_run [OPTIONS]" in shown
    assert "Usage: drain run" not in shown
    assert "--database" in help_panels("manage.py", "drain_run")["Connection"]
