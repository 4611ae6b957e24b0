"""A busier server for docs/how-to/operate.md: what ``drain status`` shows of it.

``python busy_server.py start`` makes what a busy deployment has beside the queue:
a job held by a run that died (running, its lease expired a minute ago), a
dashboard's session left idle in a transaction (``metabase``) and a web app's
pooled session (``web``), the two held open by a process in a session of its own
whose process group is in ``busy_server.pid``. ``python busy_server.py stop`` ends
those sessions and removes the job, so the page's later examples see the queue as
before.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import background
import psycopg

PID_FILE = Path("busy_server.pid")
JOB_FILE = Path("busy_server.job")
READY_FILE = Path("busy_server.ready")


def start() -> None:
    dsn = os.environ["DATABASE_URL"]
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "INSERT INTO jobs (queue, payload, status, attempts, locked_until)"
            " VALUES ('reports', '{\"month\": \"2026-10\"}', 'running', 1,"
            " now() - interval '63 seconds') RETURNING id"
        ).fetchone()
    assert row is not None
    JOB_FILE.write_text(str(row[0]))
    READY_FILE.unlink(missing_ok=True)
    background.start(
        [sys.executable, __file__, "hold"],
        PID_FILE,
        READY_FILE.exists,
        "the busy server's sessions",
    )
    time.sleep(1)  # so their ages read as ages


def hold() -> None:
    """Keep the two sessions open until told to stop (at most ten minutes)."""
    dsn = os.environ["DATABASE_URL"]
    dashboard = psycopg.connect(dsn, application_name="metabase")
    dashboard.execute("SELECT txid_current()")  # idle in transaction, holding an xid
    web = psycopg.connect(dsn, application_name="web", autocommit=True)
    web.execute("SELECT 1")
    READY_FILE.write_text("")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    time.sleep(600)


def stop() -> None:
    background.stop(PID_FILE)
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("DELETE FROM jobs WHERE id = %s", (int(JOB_FILE.read_text()),))
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name IN ('metabase', 'web')"
        ).fetchone() != (0,):
            time.sleep(0.05)


if __name__ == "__main__":
    {"start": start, "stop": stop, "hold": hold}[sys.argv[1]]()
