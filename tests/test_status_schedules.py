"""`drain status` lists the recurring jobs, and keeps working on a table without them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import psycopg

from drain.store import recurring
from tests.support import drain_cli
from tests.test_schema import ARTICLE_DDL

SECTION = (
    "recurring jobs (fire times on each job's clock; late: from a fire to the run that "
    "enqueued it):"
)


def _status(dsn: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = drain_cli("status", "--json", *args, dsn=dsn)
    try:
        return result.returncode, json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"no JSON; exit {result.returncode}\n{result.stdout}\n{result.stderr}"
        ) from None


def _section(stdout: str) -> list[str]:
    """The recurring jobs' lines of the text report, up to the next blank line."""
    lines = stdout.splitlines()
    start = lines.index(SECTION)
    end = lines.index("", start)
    return lines[start + 1 : end]


def _make_due(conn: psycopg.Connection[Any], name: str, ago: str) -> None:
    conn.execute(
        "UPDATE drain_schedules SET next_fire = now() - %s::interval WHERE name = %s", (ago, name)
    )


def test_status_lists_each_recurring_job_and_says_which_are_due(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    recurring.schedule(conn, "digest", "0 7 * * *", "mail", tz="Europe/Berlin")
    recurring.schedule(conn, "sync", "*/5 * * * *", "crm", catch_up="all")
    # Another queue table's schedule shares drain_schedules, and is not this table's.
    conn.execute(
        "INSERT INTO drain_schedules (jobs_table, name, cron, queue, next_fire) "
        "VALUES ('public.other', 'elsewhere', '0 * * * *', 'x', now())"
    )
    _make_due(conn, "sync", "3 minutes")

    code, data = _status(dsn)
    text = drain_cli("status", dsn=dsn)

    assert code == 0, data["attention"]  # a job due between runs is normal, not attention
    assert text.returncode == 0, text.stderr
    jobs = {job["name"]: job for job in data["schedules"]}
    assert sorted(jobs) == ["digest", "sync"]
    database_time = datetime.fromisoformat(data["database_time"])
    for job in jobs.values():
        # read in status's one snapshot: "due" is the same now() as database_time
        assert job["due"] is (datetime.fromisoformat(job["next_fire"]) <= database_time)
    assert jobs["sync"]["due"] is True
    assert jobs["digest"]["due"] is False
    assert jobs["digest"] == {
        "name": "digest",
        "cron": "0 7 * * *",
        "time_zone": "Europe/Berlin",
        "queue": "mail",
        "catch_up": "latest",
        "last_fire": None,
        "late_seconds": None,
        "next_fire": jobs["digest"]["next_fire"],
        "due": False,
    }
    assert datetime.fromisoformat(jobs["digest"]["next_fire"]).astimezone().minute == 0

    rows = _section(text.stdout)
    assert [row.split()[:4] for row in rows[:3]] == [
        ["name", "cron", "zone", "queue"],
        ["digest", "0", "7", "*"],
        ["sync", "*/5", "*", "*"],
    ]
    assert " 07:00 CE" in rows[1]  # the next fire on the job's own clock (CET or CEST)
    assert rows[1].split()[8:10] == ["-", "-"]  # never fired: no last fire, no lateness
    assert rows[2].endswith(", due now")
    assert not rows[1].endswith("due now")
    assert rows[3] == "  1 due now: the next run to start enqueues them"


def test_status_shows_the_last_fire_a_run_enqueued_and_how_late(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    recurring.schedule(conn, "new-year", "0 0 1 1 *", "mail")
    row = conn.execute(
        "SELECT date_trunc('year', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', now()"
    ).fetchone()
    assert row is not None
    new_year, before_run = row
    conn.execute("UPDATE drain_schedules SET next_fire = %s", (new_year,))

    run = drain_cli("run", "--handler", "demo_handlers:ok", "--queue", "none", dsn=dsn)
    _, data = _status(dsn)

    assert run.returncode == 0, run.stderr
    [job] = data["schedules"]
    assert datetime.fromisoformat(job["last_fire"]) == new_year
    assert job["late_seconds"] >= (before_run - new_year).total_seconds()
    assert job["due"] is False
    assert datetime.fromisoformat(job["next_fire"]) > before_run
    text = drain_cli("status", dsn=dsn)
    [_, line] = _section(text.stdout)
    assert f"{new_year:%Y}-01-01 00:00 UTC" in line
    assert "due now" not in line


def test_status_with_no_recurring_jobs_says_how_to_add_one(dsn: str) -> None:
    _, data = _status(dsn)
    text = drain_cli("status", dsn=dsn)

    assert data["schedules"] == []
    assert "recurring jobs: none (drain schedule add makes one)" in text.stdout.splitlines()


def test_status_of_a_table_without_drain_schedules_keeps_working(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    conn.execute("DROP TABLE drain_schedules")

    code, data = _status(dsn)
    text = drain_cli("status", dsn=dsn)

    assert code == 0, data["attention"]
    assert data["schedules"] is None
    assert text.returncode == 0, text.stderr
    assert "recurring jobs" not in text.stdout
    assert "drain: error" not in text.stderr


def test_status_of_a_table_made_by_hand_has_no_recurring_jobs(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)

    code, data = _status(empty_dsn)
    text = drain_cli("status", dsn=empty_dsn)

    assert data["schedules"] is None
    assert data["totals"]["ready"] == 10
    assert text.returncode == code
    assert "recurring jobs" not in text.stdout
