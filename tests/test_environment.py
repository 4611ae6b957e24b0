"""Every option of every command reads one environment variable, named by one rule.

The rule (docs/reference/options.md, "Every option of every command is also read..."): ``DRAIN_`` and
the option's name, or, for the options listed in ``COMMAND_SCOPED``, ``DRAIN_`` and
the command's name and the option's: a bare ``DRAIN_ALL`` or ``DRAIN_ID`` would be
read by ``drain retry`` from any environment that happened to set it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import typer.main

from drain.cli import app

OPTIONS_PAGE = (
    Path(__file__).resolve().parents[1] / "docs" / "reference" / "options.md"
).read_text()

COMMAND_SCOPED = {
    ("retry", "--id"): "DRAIN_RETRY_ID",
    ("retry", "--all"): "DRAIN_RETRY_ALL",
    ("status", "--errors"): "DRAIN_STATUS_ERRORS",
    ("status", "--runs"): "DRAIN_STATUS_RUNS",
    # a bare DRAIN_QUEUE or DRAIN_STATUS meant for drain run must not filter a listing
    ("jobs", "--queue"): "DRAIN_JOBS_QUEUE",
    ("jobs", "--status"): "DRAIN_JOBS_STATUS",
    ("jobs", "--limit"): "DRAIN_JOBS_LIMIT",
    ("demo", "--jobs"): "DRAIN_DEMO_JOBS",
    ("demo", "--runners"): "DRAIN_DEMO_RUNNERS",
    ("demo", "--naive"): "DRAIN_DEMO_NAIVE",
    ("demo", "--naive-workers"): "DRAIN_DEMO_NAIVE_WORKERS",
    ("demo", "--keep"): "DRAIN_DEMO_KEEP",
    ("demo", "--stop"): "DRAIN_DEMO_STOP",
    # a bare DRAIN_KEY set in some environment would make every enqueue a duplicate
    ("enqueue", "--key"): "DRAIN_ENQUEUE_KEY",
    # a DRAIN_QUEUE meant for drain run must never cancel a whole queue
    ("cancel", "--queue"): "DRAIN_CANCEL_QUEUE",
    ("cancel", "--older-than"): "DRAIN_CANCEL_OLDER_THAN",
    ("cancel", "--dry-run"): "DRAIN_CANCEL_DRY_RUN",
    # a bare DRAIN_DAYS would say nothing of what it counts
    ("report", "--days"): "DRAIN_REPORT_DAYS",
}


def _options(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Option]]:
    """Every option by its command, a group's own too (``drain jobs --queue``)."""
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _options(sub, (*path, name))
        if not path:
            return  # drain's own --version is no command's option
    for param in command.params:
        if isinstance(param, click.Option) and "--help" not in param.opts:
            yield " ".join(path), param


OPTIONS = list(_options(typer.main.get_command(app), ()))


def _expected(command: str, option: click.Option) -> str:
    name = max(option.opts, key=len)
    scoped = COMMAND_SCOPED.get((command, name))
    if scoped is not None:
        return scoped
    return "DRAIN_" + name.removeprefix("--").upper().replace("-", "_")


def test_every_command_has_options_to_check() -> None:
    commands = {command for command, _ in OPTIONS}
    assert {"run", "status", "retry", "plan", "demo", "enqueue", "init"} <= commands


@pytest.mark.parametrize(
    ("command", "option"), OPTIONS, ids=[f"{c}:{max(o.opts, key=len)}" for c, o in OPTIONS]
)
def test_an_option_reads_the_variable_the_rule_names(command: str, option: click.Option) -> None:
    names = [option.envvar] if isinstance(option.envvar, str) else list(option.envvar or [])
    assert names, f"drain {command} {option.opts[0]} reads no environment variable"
    assert names[0] == _expected(command, option)
    if "--dsn" in option.opts and command == "plan":
        # A DSN turns on reading the recorded runs; DATABASE_URL alone must not.
        assert names == ["DRAIN_DSN"]
    elif "--dsn" in option.opts:
        assert names == ["DRAIN_DSN", "DATABASE_URL"]
    else:
        assert len(names) == 1, names


def test_the_option_reference_names_every_exception() -> None:
    for variable in COMMAND_SCOPED.values():
        assert f"`{variable}`" in OPTIONS_PAGE, variable
    # and every exception is in use: a stale entry would hide a rename
    used = {(command, max(option.opts, key=len)) for command, option in OPTIONS}
    assert set(COMMAND_SCOPED) <= used
