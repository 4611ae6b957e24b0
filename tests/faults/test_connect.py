"""Scenario 10: a slow connect. A server that accepts but answers seconds late, a
port that refuses and opens later (a compute resuming), and ones that never do.

The run either connects within its budget and drains, or exits 1 with the connect
error in time: within its connect retry and its budget, never hanging on
libpq's default wait.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from drain.ops.embedded import free_port
from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.listener import LateListener
from tests.faults.support.processes import Runs, ledger_count
from tests.support import statuses
from tests.support.pgproxy import proxied

pytestmark = pytest.mark.faults


def _upstream(dsn: str) -> tuple[str, int]:
    params = conninfo.conninfo_to_dict(dsn)
    host = str(params.get("host") or "127.0.0.1")
    return (
        "127.0.0.1" if host in ("localhost", "") or host.startswith("/") else host,
        int(params.get("port") or 5432),
    )


def _at_port(dsn: str, port: int) -> str:
    params = conninfo.conninfo_to_dict(dsn)
    params.update(host="127.0.0.1", port=str(port), sslmode="disable", gssencmode="disable")
    return conninfo.make_conninfo("", **params)


def _untouched(conn: psycopg.Connection[Any], jobs: int) -> None:
    assert statuses(conn) == {"queued": jobs}
    assert conn.execute("SELECT max(attempts) FROM jobs").fetchone() == (0,)
    assert ledger_count(conn) == 0


def test_server_answering_late_is_waited_for_within_the_budget(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"n": 1}] * 5)
    with proxied(dsn, accept_delay=2.5) as (proxy, slow_dsn):
        run = runs.run(
            "--connect-timeout", "15s", "--max-seconds", "60", dsn=slow_dsn, ledger_dsn=dsn
        )
    assert run.process.returncode == 0, run.stderr
    assert run.summary()["done"] == 5
    assert proxy.connections >= 1
    ledger_audit.audit(ledger_conn).assert_ok()
    figures("10", variant="accepts after 2.5s", exit_code=0, seconds=round(run.seconds, 1))


def test_server_answering_too_late_is_a_connect_error_in_time(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"n": 1}] * 5)
    with proxied(dsn, accept_delay=60.0) as (_, slow_dsn):
        run = runs.run(
            "--connect-timeout", "2s", "--connect-retry", "3s", dsn=slow_dsn, ledger_dsn=dsn
        )
    assert run.process.returncode == 1, run.stderr
    assert "drain: error: cannot connect to 127.0.0.1:" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert run.seconds < 20, f"gave up after {run.seconds:.1f}s with a 3s connect retry"
    _untouched(ledger_conn, 5)
    figures("10", variant="accepts after 60s", exit_code=1, seconds=round(run.seconds, 1))


def test_refused_port_that_opens_later_is_connected_to(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"n": 1}] * 5)
    port = free_port()
    listener = LateListener(port, _upstream(dsn))
    opener = threading.Timer(2.5, listener.start)
    opener.start()
    try:
        run = runs.run("--connect-retry", "30s", dsn=_at_port(dsn, port), ledger_dsn=dsn)
    finally:
        opener.cancel()
        listener.stop()
    assert run.process.returncode == 0, run.stderr
    assert run.summary()["done"] == 5
    assert listener.accepted >= 1
    ledger_audit.audit(ledger_conn).assert_ok()
    figures("10", variant="refused, opens after 2.5s", exit_code=0, seconds=round(run.seconds, 1))


@pytest.mark.parametrize(
    ("options", "limit"),
    [
        (("--connect-retry", "3s"), "connect retry"),
        (("--connect-retry", "60s", "--max-seconds", "4"), "budget"),
    ],
)
def test_refused_port_that_never_opens_is_a_connect_error_in_time(
    dsn: str,
    ledger_conn: psycopg.Connection[Any],
    runs: Runs,
    options: tuple[str, ...],
    limit: str,
    figures: Figures,
) -> None:
    ledger_audit.add_payload_jobs(ledger_conn, [{"n": 1}] * 5)
    started = time.monotonic()
    run = runs.run(*options, dsn=_at_port(dsn, free_port()), ledger_dsn=dsn)
    took = time.monotonic() - started

    assert run.process.returncode == 1, run.stderr
    assert "drain: error: cannot connect to 127.0.0.1:" in run.stderr, run.stderr
    assert "refused" in run.stderr
    assert "Traceback" not in run.stderr
    assert took < 20, f"gave up after {took:.1f}s although the {limit} was a few seconds"
    _untouched(ledger_conn, 5)
    figures("10", variant=f"refused for good, {limit}", exit_code=1, seconds=round(took, 1))
