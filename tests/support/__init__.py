"""Helpers the tests share: DSNs, factories that put jobs in any state, running the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from drain.core.table import JobTable

REPO = Path(__file__).resolve().parents[2]


def with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo.conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return conninfo.make_conninfo("", **params)


def add_jobs(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    queue: str = "default",
    table: JobTable | None = None,
    status: str = "queued",
    attempts: int = 0,
    max_attempts: int = 5,
    run_in: float = 0.0,
    run_at: str | None = None,
    lease_left: float | None = None,
    created_ago: float = 0.0,
    payload: Any = None,
    payload_json: str | None = None,
    last_error: str | None = None,
) -> list[int]:
    """Insert ``count`` jobs in any state with one statement; return their ids.

    Times are offsets on the database clock: ``run_in=-60`` is ready since a
    minute, ``lease_left=-1`` is a lease that ran out a second ago. ``run_at`` takes
    a literal such as ``'-infinity'``. Without a payload each job gets ``{"n": i}``.
    """
    target = table or JobTable()
    if payload_json is None and payload is not None:
        payload_json = json.dumps(payload)
    statement = psycopg.sql.SQL(
        """
        INSERT INTO {table} (queue, payload, status, attempts, max_attempts, run_at,
                             locked_until, created_at, last_error)
        SELECT %(queue)s,
               coalesce(%(payload)s::jsonb, jsonb_build_object('n', g)),
               %(status)s, %(attempts)s, %(max_attempts)s,
               coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(run_in)s)),
               now() + make_interval(secs => %(lease_left)s),
               now() - make_interval(secs => %(created_ago)s),
               %(last_error)s
        FROM generate_series(1, %(count)s) AS g
        RETURNING id
        """
    ).format(table=psycopg.sql.Identifier(target.schema, target.name))
    params = {
        "queue": queue,
        "payload": payload_json,
        "status": status,
        "attempts": attempts,
        "max_attempts": max_attempts,
        "run_at": run_at,
        "run_in": run_in,
        "lease_left": lease_left,
        "created_ago": created_ago,
        "last_error": last_error,
        "count": count,
    }
    return [row[0] for row in conn.execute(statement, params).fetchall()]


def statuses(conn: psycopg.Connection[Any], table: JobTable | None = None) -> dict[str, int]:
    ident = psycopg.sql.Identifier((table or JobTable()).schema, (table or JobTable()).name)
    rows = conn.execute(
        psycopg.sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(ident)
    ).fetchall()
    return {status: count for status, count in rows}


def job(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cursor = conn.execute(
        "SELECT id, queue, status, attempts, max_attempts, locked_until, last_error, "
        "run_at, run_at - now() AS run_in, locked_until - now() AS lease_left "
        "FROM jobs WHERE id = %s",
        (job_id,),
    )
    row = cursor.fetchone()
    assert row is not None, f"job {job_id} does not exist"
    names = [column.name for column in cursor.description or ()]
    return dict(zip(names, row, strict=True))


def drain_cli(
    *args: str,
    dsn: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m drain ARGS`` in a subprocess, as a user would run the command."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    environment.pop("DATABASE_URL", None)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "tests" / "apps"), str(REPO), environment.get("PYTHONPATH", "")]
    )
    if dsn is not None:
        environment["DRAIN_DSN"] = dsn
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "drain", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=cwd or REPO,
        input=input,
    )


def start_cli(*args: str, dsn: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m drain ARGS`` without waiting for it."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "tests" / "apps"), str(REPO), environment.get("PYTHONPATH", "")]
    )
    environment["DRAIN_DSN"] = dsn
    environment.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "drain", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=REPO,
    )


def summary_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON summary a ``drain run --json`` printed."""
    return parse_summary(result.stdout, result.stderr, result.returncode)


def parse_summary(stdout: str, stderr: str, returncode: int | None) -> dict[str, Any]:
    """The JSON summary in a run's stdout; a run that printed none fails the test."""
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"no JSON summary; exit {returncode}\nstdout: {stdout}\nstderr: {stderr}"
        ) from None
    assert isinstance(data, dict)
    return data


def ids_of(rows: Sequence[tuple[Any, ...]]) -> list[int]:
    return [row[0] for row in rows]


LEDGER_DDL = (
    "CREATE TABLE ledger (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL, "
    "at timestamptz NOT NULL DEFAULT clock_timestamp())"
)


def executions(conn: psycopg.Connection[Any]) -> dict[int, int]:
    """How many times each job id appears in the ledger."""
    rows = conn.execute("SELECT job_id, count(*) FROM ledger GROUP BY job_id").fetchall()
    return {job_id: count for job_id, count in rows}
