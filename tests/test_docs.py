"""The CLI documents itself, and the README documents the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import typer.main

from drain.cli import app

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
COMMAND = typer.main.get_command(app)


def _leaves(command: click.Command, path: str = "") -> dict[str, click.Command]:
    """Every command and subcommand by its full name (``schedule add``), groups too."""
    found = {path: command} if path else {}
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found |= _leaves(sub, f"{path} {name}".strip())
    return found


COMMANDS = _leaves(COMMAND)
NAMES = sorted(COMMANDS)


def test_every_command_is_there() -> None:
    expected = [
        "archive",
        "cancel",
        "demo",
        "enqueue",
        "init",
        "jobs",
        "migrate",
        "plan",
        "purge",
        "report",
        "retry",
        "run",
        "schedule",
        "status",
    ]
    assert sorted(COMMAND.commands) == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", NAMES)
def test_every_command_has_help_with_an_example(name: str) -> None:
    command = COMMANDS[name]
    assert command.help and len(command.help.split()) >= 5
    assert command.epilog and "Example" in command.epilog
    assert f"drain {name}" in command.epilog


@pytest.mark.parametrize("name", NAMES)
def test_every_option_also_reads_an_environment_variable(name: str) -> None:
    command = COMMANDS[name]
    options = [p for p in command.params if p.param_type_name == "option" and p.name != "help"]
    missing = [param.name for param in options if not param.envvar]
    assert missing == []
    for param in options:
        if param.name == "dsn":
            continue
        flag = max(param.opts, key=len).lstrip("-").upper().replace("-", "_")
        names = param.envvar if isinstance(param.envvar, list) else [param.envvar]
        assert names[0].startswith("DRAIN_") and names[0].endswith(flag), (flag, names)


@pytest.mark.parametrize("name", NAMES)
def test_every_command_is_in_the_readme(name: str) -> None:
    assert re.search(rf"`drain {name}\b", README), f"drain {name} is not described in README.md"


def test_the_readme_opens_with_the_demo_and_test_commands() -> None:
    opening = README.split("\n## ", 1)[0]
    assert "drain demo" in opening
    assert "pytest -q" in opening


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "pytest -q" in README
    assert ci.count("pytest -q") >= 2
