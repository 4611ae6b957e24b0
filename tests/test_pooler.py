"""Through PgBouncer in transaction mode: the queue statements need no session state."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from drain.ops.embedded import free_port
from tests.support import add_jobs, programs, start_cli, statuses


@pytest.fixture
def bouncer_dsn(dsn: str) -> Iterator[str]:
    """``dsn`` reached through a PgBouncer of the test's own, pool_mode = transaction."""
    pgbouncer = programs.need("pgbouncer", package="pgbouncer")
    # A directory the unprivileged account pgbouncer switches to can read.
    tmp_path = Path(tempfile.mkdtemp(prefix="drain-bouncer-"))
    params = conninfo.conninfo_to_dict(dsn)
    port = free_port()
    user = str(params.get("user") or "postgres")
    (tmp_path / "users.txt").write_text(f'"{user}" ""\n')
    (tmp_path / "pgbouncer.ini").write_text(
        f"""
[databases]
* = host={params.get("host", "127.0.0.1")} port={params.get("port", 5432)}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {tmp_path / "users.txt"}
pool_mode = transaction
default_pool_size = 4
max_client_conn = 100
ignore_startup_parameters = extra_float_digits
"""
    )
    command = [pgbouncer, str(tmp_path / "pgbouncer.ini")]
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        account = "nobody"
        os.chmod(tmp_path, 0o755)
        for name in ("users.txt", "pgbouncer.ini"):
            os.chmod(tmp_path / name, 0o644)
        command = [pgbouncer, "-u", account, str(tmp_path / "pgbouncer.ini")]
        pwd.getpwnam(account)
    bouncer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    through = conninfo.make_conninfo(dsn, host="127.0.0.1", port=str(port), sslmode="disable")
    deadline = time.monotonic() + 15
    while True:
        try:
            psycopg.connect(through, prepare_threshold=None).close()
            break
        except psycopg.OperationalError:
            assert bouncer.poll() is None, bouncer.communicate()[0]
            assert time.monotonic() < deadline, "pgbouncer did not start"
            time.sleep(0.1)
    try:
        yield through
    finally:
        bouncer.terminate()
        bouncer.communicate(timeout=10)
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_runs_drain_through_a_transaction_pooler(
    conn: psycopg.Connection[Any], bouncer_dsn: str, dsn: str
) -> None:
    conn.execute(
        "CREATE TABLE ledger (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL, at timestamptz DEFAULT now())"
    )
    add_jobs(conn, 600)
    add_jobs(conn, 1, payload={"raise": "boom"}, max_attempts=1)
    runs = [
        start_cli(
            "run",
            "--app",
            "run_app",
            "--pooler",
            "--batch-size",
            "25",
            "--json",
            dsn=bouncer_dsn,
            env={"LEDGER_DSN": dsn},
        )
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]

    assert [run.returncode for run in runs] == [0, 0, 0], [err for _, err in outputs]
    summaries = [json.loads(out) for out, _ in outputs]
    assert sum(s["done"] for s in summaries) == 600
    assert statuses(conn) == {"done": 600, "failed": 1}
    duplicates = conn.execute(
        "SELECT count(*) FROM (SELECT job_id FROM ledger GROUP BY job_id HAVING count(*) > 1) d"
    ).fetchone()
    assert duplicates == (0,)


def test_max_runners_is_refused_behind_a_pooler(bouncer_dsn: str) -> None:
    from tests.support import drain_cli

    result = drain_cli("run", "--exec", "true", "--pooler", "--max-runners", "2", dsn=bouncer_dsn)
    assert result.returncode == 2
    assert "--max-runners needs session advisory locks" in result.stderr
