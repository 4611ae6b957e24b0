"""Passwords drain was never told: found by their shape, in a URL, wherever they show.

The other secret tests use the run's own DSN, whose password drain knows and
masks by value; these use a password that appears only in an error text (a
handler's, or a server's quoting another database), so only the URL rule of
:func:`drain.core.redact.redact` can mask it.
"""

from __future__ import annotations

from typing import Any

import psycopg

from drain.core.redact import Redactor, redact, storable_error
from tests.support import LEDGER_DDL, add_jobs, drain_cli, job, summary_of

UNSEEN = "NeverSeen"
URL = f"postgresql://u:{UNSEEN}@db.internal/app"


def test_a_url_password_no_dsn_named_is_masked() -> None:
    text = f"could not reach {URL}: timeout"
    assert UNSEEN not in redact(text)
    assert UNSEEN not in Redactor("postgresql://drain:known@127.0.0.1/test")(text)
    assert UNSEEN not in storable_error(text)
    assert "postgresql://u:" in redact(text) and "@db.internal/app" in redact(text)


def test_a_handler_error_quoting_an_unseen_url_password_is_masked_everywhere(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """In last_error, the --verbose log line and the JSON summary of a real run."""
    conn.execute(LEDGER_DDL)
    (job_id,) = add_jobs(conn, 1, payload={"raise": f"replica {URL} refused"}, max_attempts=1)

    result = drain_cli(
        "run", "--app", "run_app", "--verbose", "--json", dsn=dsn, env={"LEDGER_DSN": dsn}
    )

    assert result.returncode == 0, result.stderr
    assert summary_of(result)["failed"] == 1
    last_error = job(conn, job_id)["last_error"]
    assert "replica postgresql://u:" in last_error and UNSEEN not in last_error, last_error
    assert "replica postgresql://u:" in result.stderr, result.stderr
    assert UNSEEN not in result.stderr and UNSEEN not in result.stdout
