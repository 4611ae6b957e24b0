"""The command line: enqueueing, bad input, configuration from the environment."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer.main

from drain import __version__
from drain.cli import COMMANDS, app
from drain.core.durations import format_duration, parse_duration
from drain.core.redact import Redactor, redact
from tests.support import drain_cli, job


def test_version(quiet_env: None) -> None:
    result = drain_cli("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"drain {__version__}")


def test_enqueue_one_job_with_delay_and_attempts(conn: psycopg.Connection[Any], dsn: str) -> None:
    result = drain_cli(
        "enqueue",
        "emails",
        '{"to": "a@example.com"}',
        "--delay",
        "5m",
        "--max-attempts",
        "3",
        "--json",
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    created = json.loads(result.stdout)
    row = job(conn, created["id"])
    assert (row["queue"], row["max_attempts"], row["status"]) == ("emails", 3, "queued")
    assert 298 < row["run_in"].total_seconds() <= 300


def test_enqueue_from_a_file_of_json_lines(
    conn: psycopg.Connection[Any], dsn: str, tmp_path: Path
) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(250)) + "\n")
    result = drain_cli("enqueue", "bulk", "--file", str(lines), dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert "enqueued 250 job(s) on bulk" in result.stderr
    assert conn.execute("SELECT count(*) FROM jobs WHERE queue = 'bulk'").fetchone() == (250,)


def test_enqueue_reads_the_dsn_from_database_url(conn: psycopg.Connection[Any], dsn: str) -> None:
    result = drain_cli("enqueue", "q", "{}", env={"DATABASE_URL": dsn})
    assert result.returncode == 0, result.stderr
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["enqueue", "q", "{not json"], "PAYLOAD_JSON is not valid JSON"),
        (["enqueue", "q", "{}", "--delay", "soon"], "--delay: not a duration: 'soon'"),
        (["enqueue", "q", "{}", "--run-at", "tomorrow"], "--run-at: not an ISO 8601 time"),
        (["run", "--exec", "true", "--lease", "0"], "--lease must be at least 1 second"),
        (["run", "--exec", "true", "--archive-mode", "shred"], "--archive-mode must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, dsn: str) -> None:
    result = drain_cli(*args, dsn=dsn)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_bad_lines_in_a_file_name_the_line(dsn: str, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"ok": 1}\n{"broken": \n')
    result = drain_cli("enqueue", "q", "--file", str(lines), dsn=dsn)
    assert result.returncode == 2
    assert f"{lines}:2 is not valid JSON" in result.stderr


@pytest.mark.parametrize("command", [["run", "--exec", "true"], ["enqueue", "q", "{}"], ["init"]])
def test_a_missing_dsn_is_an_error_not_a_fallback(command: list[str], quiet_env: None) -> None:
    result = drain_cli(*command)
    assert result.returncode == 2
    assert result.stderr.startswith("drain: error: no database given: pass --dsn")


def test_an_unreachable_server_is_exit_1_after_the_retry_deadline(quiet_env: None) -> None:
    result = drain_cli(
        "enqueue",
        "q",
        "{}",
        "--dsn",
        "postgresql://nobody@127.0.0.1:1/db",
        "--connect-retry",
        "2s",
    )
    assert result.returncode == 1
    assert "attempts over" in result.stderr
    assert result.stderr.startswith("drain: error: cannot connect to 127.0.0.1:1/db")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("5m", 300),
        ("1h", 3600),
        ("7d", 604800),
        ("1h30m", 5400),
        ("2.5", 2.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m5", "5x", "1h-", "soon", "5 m m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (45, 600, 5400, 172800)] == ["45s", "10m", "1h30m", "2d"]


@pytest.mark.parametrize("password", ["s3cret pass", "p@ss#word", "pa%zzss", "plain-secret"])
def test_redaction_masks_passwords_in_every_form(password: str) -> None:
    from urllib.parse import quote

    url = f"postgresql://app:{quote(password, safe='')}@db.example.com/app"
    keyword = f"host=db user=app password='{password}'"
    for dsn in (url, keyword):
        masked = Redactor(dsn)(f"failed for {dsn}: password {password} rejected")
        assert password not in masked
        assert quote(password, safe="") not in masked
    assert "password=********" in redact("host=x password=hunter2 dbname=y")


def test_drain_help_groups_the_commands_in_workflow_order(quiet_env: None) -> None:
    result = drain_cli("--help", env={"COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"})
    assert result.returncode == 0, result.stderr
    panels = re.findall(r"╭─ (.+?) ─", result.stdout)
    assert panels == ["Options", "Set up and enqueue", "Run and plan", "Look", "Fix", "Try"]
    shown = [
        match.group(1)
        for match in re.finditer(r"^│ (\w+)\s{2,}\S", result.stdout, re.M)
        if match.group(1) in COMMANDS
    ]
    assert sorted(shown) == sorted(COMMANDS)
    assert shown.index("init") < shown.index("run") < shown.index("status") < shown.index("demo")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_summary_is_one_line(name: str) -> None:
    """A summary broken by hand shows as a ragged line in drain --help."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    summary = (command.help or "").split("\n\n")[0]
    assert summary and "\n" not in summary.strip(), (name, summary)
