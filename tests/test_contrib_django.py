"""drain.contrib.django on Django 5.2 and the test's database, in processes of their own.

Each scenario (tests/apps/django_scenarios.py) runs in a fresh interpreter with
tests/apps/django_site/settings.py, so Django's global settings and connections
never leak into this process or between tests. ``manage.py drain_run`` is run as
``python -m django drain_run``, the same command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from tests.support import LEDGER_DDL, REPO, drain_cli, executions, statuses


def django_env(dsn: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    environment.pop("DATABASE_URL", None)
    environment["DJANGO_SETTINGS_MODULE"] = "django_site.settings"
    environment["DRAIN_TEST_DJANGO_DSN"] = dsn
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests" / "apps"), str(REPO)])
    return environment


def scenario(dsn: str, name: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "django_scenarios", name],
        capture_output=True,
        text=True,
        timeout=120,
        env=django_env(dsn),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


@pytest.fixture
def notes(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """A table the scenarios write to through Django's cursor, beside the job."""
    conn.execute("CREATE TABLE notes (note text NOT NULL)")
    return conn


def test_a_job_enqueued_in_atomic_commits_with_the_orm_write(
    dsn: str, notes: psycopg.Connection[Any]
) -> None:
    seen = scenario(dsn, "commit")
    assert seen["seen_inside"] == 0  # not visible to others before the commit
    assert seen["seen_after"] == 1
    row = notes.execute("SELECT queue, payload, status FROM jobs WHERE id = %s", (seen["id"],))
    assert row.fetchone() == ("emails", {"order": 1}, "queued")
    assert notes.execute("SELECT note FROM notes").fetchall() == [("committed",)]


def test_a_job_enqueued_in_atomic_rolls_back_with_it(
    dsn: str, notes: psycopg.Connection[Any]
) -> None:
    seen = scenario(dsn, "rollback")
    assert seen["seen_after"] == 0
    assert statuses(notes) == {}
    assert notes.execute("SELECT count(*) FROM notes").fetchone() == (0,)


def test_kick_on_commit_runs_once_committed_and_never_on_rollback(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seen = scenario(dsn, "kick")
    assert seen["before_commit"] == []
    # the kick ran once, after the commit, when the job was visible to others
    assert seen["after_commit"] == [1]
    assert seen["in_the_end"] == [1]  # the rolled-back block's kick never ran
    assert statuses(conn) == {"queued": 1}


def test_enqueue_many_and_dedupe_keys_pass_through(dsn: str, conn: psycopg.Connection[Any]) -> None:
    init = drain_cli("init", "--with", "dedupe", dsn=dsn)
    assert init.returncode == 0, init.stderr
    seen = scenario(dsn, "many_and_keys")
    assert seen["many"] == 3
    job_id, duplicate = seen["first"]
    assert duplicate is False
    assert seen["second"] == [job_id, True]
    assert seen["seen_after"] == 4


def test_the_dsn_is_built_from_the_project_settings(dsn: str) -> None:
    built = scenario(dsn, "dsn")["dsn"]
    given = psycopg.conninfo.conninfo_to_dict(dsn)
    assert built == {**given, "application_name": "django-site"}


def test_drain_run_drains_with_the_project_database_and_handlers_use_the_orm(
    dsn: str, notes: psycopg.Connection[Any]
) -> None:
    conn = notes
    conn.execute(LEDGER_DDL)
    committed = scenario(dsn, "commit")
    command = ["drain_run", "--handler", "django_handlers:record", "--queue", "emails"]
    result = subprocess.run(
        [sys.executable, "-m", "django", *command, "--max-seconds", "30", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=django_env(dsn),  # no DRAIN_DSN, no DATABASE_URL: only the settings
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["done"] == 1, summary
    assert executions(conn) == {committed["id"]: 1}
    assert statuses(conn) == {"done": 1}


def test_drain_run_passes_a_usage_error_through_with_drain_runs_exit_code(dsn: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "django", "drain_run", "--no-such-option"],
        capture_output=True,
        text=True,
        timeout=120,
        env=django_env(dsn),
        cwd=REPO,
    )
    assert result.returncode == 2
    assert "--no-such-option" in result.stderr


def test_drain_run_names_a_database_alias_settings_lack(dsn: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "django", "drain_run", "--database", "replica"],
        capture_output=True,
        text=True,
        timeout=120,
        env=django_env(dsn),
        cwd=REPO,
    )
    assert result.returncode == 2, result.stderr
    assert "settings.DATABASES has no 'replica' database" in result.stderr


def test_importing_drain_and_its_async_api_loads_neither_django_nor_sqlalchemy() -> None:
    code = (
        "import sys, drain, drain.store.aio, drain.contrib\n"
        "drain.enqueue_async, drain.enqueue\n"
        "print(sorted(m for m in ('django', 'sqlalchemy') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- manage.py migrate: drain's tables from drain's own steps ---------------------------


def manage(dsn: str, *args: str, extras: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = django_env(dsn)
    if extras is not None:
        environment["DRAIN_TEST_DJANGO_EXTRAS"] = extras
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        cwd=REPO,
    )


def drains(shape: dict[str, Any]) -> dict[str, Any]:
    """The catalog's shape without Django's own table of applied migrations."""
    relations = [name for name in shape["relations"] if not name.startswith("django_")]
    return {**shape, "relations": relations}


def test_manage_py_migrate_creates_drains_tables_and_undoing_is_refused(
    empty_dsn: str, dsn: str
) -> None:
    from tests.test_migrate import catalog

    result = manage(empty_dsn, "migrate", "drain")
    assert result.returncode == 0, result.stderr
    assert "Applying drain.0003_priority... OK" in result.stdout
    made = drain_cli("init", "--with", "dedupe", "--with", "priority", dsn=dsn)
    assert made.returncode == 0, made.stderr
    assert drains(catalog(empty_dsn)) == catalog(dsn)
    # The README's Django example, keys and all, on the tables migrate made.
    seen = scenario(empty_dsn, "many_and_keys")
    assert seen["seen_after"] == 4
    again = manage(empty_dsn, "migrate", "drain")
    assert again.returncode == 0 and "No migrations to apply" in again.stdout
    undo = manage(empty_dsn, "migrate", "drain", "zero")
    assert undo.returncode != 0 and "irreversible" in undo.stderr.lower()
    assert drains(catalog(empty_dsn)) == catalog(dsn)
    status = drain_cli("migrate", dsn=empty_dsn)
    assert status.returncode == 0 and "is current" in status.stderr


def test_manage_py_migrate_upgrades_the_table_drain_init_made_and_keeps_its_jobs(
    empty_dsn: str,
) -> None:
    from tests.test_migrate import catalog, load_dump

    load_dump(empty_dsn)
    result = manage(empty_dsn, "migrate", "drain", extras="priority")
    assert result.returncode == 0, result.stderr
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert statuses(conn) == {"queued": 1000, "failed": 250, "done": 250}
    shape = catalog(empty_dsn)
    assert "jobs_priority_idx" in shape["relations"]
    assert "jobs_dedupe_idx" not in shape["relations"]  # left out by DRAIN_EXTRAS
    after = drain_cli("migrate", "--with", "priority", dsn=empty_dsn)
    assert after.returncode == 0 and "is current (schema version 1 with priority)" in after.stderr
