"""The run's summary on a GitHub Actions job page: real runs with GITHUB_STEP_SUMMARY set."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import conninfo

from drain.core.summary import Note, Summary
from drain.observe.ci_summary import markdown
from tests.support import add_jobs, drain_cli, summary_of, with_dbname

PASSWORD = "Tr0ub4dor&3:ci-summary"


def _table(text: str) -> dict[str, str]:
    """The one-row table of a section: header cells to value cells."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    header, rule, values = rows
    assert set(rule.replace("|", "").replace("-", "").replace(":", "")) == set()
    names = [cell.strip() for cell in header.strip("|").split("|")]
    cells = [cell.strip() for cell in values.strip("|").split("|")]
    return dict(zip(names, cells, strict=True))


def test_a_run_appends_its_table_and_keeps_what_was_there(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    add_jobs(conn, 4)
    add_jobs(conn, 1, payload={"raise": "the mailer said no"})
    page = tmp_path / "step_summary.md"
    page.write_text("## Earlier step\n\nall good\n")
    env = {"GITHUB_STEP_SUMMARY": str(page)}

    first = summary_of(
        drain_cli("run", "--handler", "trace_handlers:work", "--json", dsn=dsn, env=env)
    )
    text = page.read_text()
    assert text.startswith("## Earlier step\n\nall good\n")
    section = text.removeprefix("## Earlier step\n\nall good\n")
    assert "### drain run: `public.jobs` drained" in section
    assert "Exit **0** (drained)." in section
    table = _table(section)
    assert table["claimed"] == str(first["claimed"]) == "5"
    assert (table["done"], table["retried"], table["failed"]) == ("4", "1", "0")
    assert {"lost", "released", "archived", "seconds", "jobs/s"} <= set(table)
    assert "the mailer said no" not in text  # a job's error is not the run's

    # a second run appends a second section below the first
    drain_cli("run", "--handler", "trace_handlers:work", dsn=dsn, env=env)
    again = page.read_text()
    assert again.startswith(text)
    assert _table(again.removeprefix(text))["claimed"] == "0"


def test_a_failed_run_says_so_without_its_password(server_dsn: str, tmp_path: Path) -> None:
    missing = with_dbname(server_dsn, "no_such_database_for_ci")
    params = conninfo.conninfo_to_dict(missing)
    user, host, port = params.get("user") or "postgres", params.get("host"), params.get("port")
    url = f"postgresql://{user}:{quote(PASSWORD, safe='')}@{host}:{port}/no_such_database_for_ci"
    page = tmp_path / "step_summary.md"
    result = drain_cli(
        "run", "--handler", "trace_handlers:work", dsn=url, env={"GITHUB_STEP_SUMMARY": str(page)}
    )
    assert result.returncode == 1, result.stderr
    text = page.read_text()
    assert "Exit **1** (error)." in text
    assert "no_such_database_for_ci" in text
    for form in (PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD)):
        assert form not in text
    assert url not in text


def test_a_file_that_cannot_be_written_costs_one_warning(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    add_jobs(conn, 2)
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path)}  # a directory
    result = drain_cli("run", "--handler", "trace_handlers:work", "--json", dsn=dsn, env=env)
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 2
    (warning,) = [line for line in result.stderr.splitlines() if "GITHUB_STEP_SUMMARY" in line]
    assert warning.startswith("drain: could not append the run's summary to GITHUB_STEP_SUMMARY")


def test_notes_and_names_cannot_break_the_table() -> None:
    summary = Summary(
        table="odd|schema.jobs",
        claimed=1234,
        done=1234,
        seconds=2.0,
        notes=[
            Note("maintenance_skipped", {"error": "two\nlines | with a bar"}),
            Note("run_not_recorded", {"error": "password=hunter2 was in it"}),
        ],
    )
    text = markdown(summary)
    assert "1,234" in _table(text)["claimed"]
    assert "`odd\\|schema.jobs`" in text
    assert "- maintenance skipped: two lines \\| with a bar" in text
    assert "hunter2" not in text
