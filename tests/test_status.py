"""``drain status`` against a real database: counts, ages, stuck jobs, sessions, exit codes."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from psycopg import conninfo, sql

from drain.core.literals import replace_literals
from drain.core.settings.defaults import DEFAULT_FAIL_ON
from tests.support import add_jobs, drain_cli


def _status(dsn: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = drain_cli("status", "--json", *args, dsn=dsn)
    try:
        return result.returncode, json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"no JSON; exit {result.returncode}\n{result.stdout}\n{result.stderr}"
        ) from None


def _queue(data: dict[str, Any], name: str) -> dict[str, Any]:
    found = [q for q in data["queues"] if q["queue"] == name]
    assert len(found) == 1, data["queues"]
    return found[0]


def _text_row(stdout: str, queue: str) -> list[str]:
    for line in stdout.splitlines():
        cells = line.split()
        if cells and cells[0] == queue:
            return cells
    raise AssertionError(f"no row for queue {queue!r} in:\n{stdout}")


@pytest.fixture
def every_state(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Jobs in every state on two queues; returns the ids and times the test checks."""
    started = time.monotonic()
    oldest = add_jobs(conn, 1, run_in=-65)
    add_jobs(conn, 2, run_in=-10)
    add_jobs(conn, 2, run_in=300)
    add_jobs(conn, 1, status="running", attempts=1, lease_left=120)
    expired = add_jobs(conn, 1, status="running", attempts=2, lease_left=-30)
    add_jobs(conn, 4, status="done", attempts=1)
    failed = add_jobs(
        conn, 1, status="failed", attempts=5, last_error="SMTP 451: mailbox full for job"
    )
    add_jobs(conn, 2, queue="emails", status="done", attempts=1)
    add_jobs(conn, 1, queue="emails", run_in=-5)
    row = conn.execute("SELECT run_at FROM jobs WHERE id = %s", (oldest[0],)).fetchone()
    assert row is not None
    return {
        "oldest_run_at": row[0],
        "expired": expired[0],
        "failed": failed[0],
        "inserted": started,
    }


def test_status_counts_jobs_in_every_state(dsn: str, every_state: dict[str, Any]) -> None:
    code, data = _status(dsn)
    elapsed = time.monotonic() - every_state["inserted"]

    assert code == 1
    default = _queue(data, "default")
    assert {
        k: default[k] for k in ("ready", "scheduled", "running", "expired", "done", "failed")
    } == {
        "ready": 3,
        "scheduled": 2,
        "running": 2,
        "expired": 1,
        "done": 4,
        "failed": 1,
    }
    emails = _queue(data, "emails")
    assert (emails["ready"], emails["done"], emails["failed"]) == (1, 2, 0)
    assert data["totals"] == {
        "ready": 4,
        "scheduled": 2,
        "running": 2,
        "expired": 1,
        "done": 6,
        "failed": 1,
    }

    # The oldest ready job became ready 65 s before it was inserted, by the database clock.
    database_time = datetime.fromisoformat(data["database_time"])
    expected_age = (database_time - every_state["oldest_run_at"]).total_seconds()
    assert default["oldest_ready_seconds"] == pytest.approx(expected_age, abs=1.0)
    assert 65 - 1 <= default["oldest_ready_seconds"] <= 65 + elapsed + 1
    assert data["oldest_ready_seconds"] == default["oldest_ready_seconds"]
    assert 290 <= default["next_scheduled_seconds"] <= 300

    assert [e["id"] for e in data["expired_leases"]] == [every_state["expired"]]
    assert data["expired_leases"][0]["expired_seconds"] == pytest.approx(30, abs=elapsed + 1)
    assert [f["id"] for f in data["failed_jobs"]] == [every_state["failed"]]
    assert data["failed_jobs"][0]["error"] == "SMTP 451: mailbox full for job"
    assert any("expired lease" in item for item in data["attention"])
    assert any("failed for good in the last 1h" in item for item in data["attention"])
    assert data["exit_code"] == 1


def test_status_text_shows_the_same_numbers(dsn: str, every_state: dict[str, Any]) -> None:
    result = drain_cli("status", dsn=dsn)
    _, data = _status(dsn)

    assert result.returncode == 1, result.stderr
    default = _queue(data, "default")
    row = _text_row(result.stdout, "default")
    numbers = [int(cell.replace(",", "")) for cell in row[1:7]]
    keys = ("ready", "scheduled", "running", "expired", "done", "failed")
    assert numbers == [default[k] for k in keys]
    assert row[7] in ("1m5s", "1m6s", "1m7s", "1m8s"), row
    assert f"job {every_state['expired']} (default), attempt 2 of 5, expired" in result.stdout
    assert f"job {every_state['failed']} (default) after 5 attempt(s): SMTP 451" in result.stdout
    assert "needs attention:" in result.stdout


def test_status_is_healthy_after_a_clean_run(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_jobs(conn, 5)
    add_jobs(conn, 2, run_in=3600)
    run = drain_cli("run", "--handler", "demo_handlers:ok", dsn=dsn)
    assert run.returncode == 0, run.stderr

    result = drain_cli("status", dsn=dsn)
    code, data = _status(dsn)

    assert result.returncode == 0, result.stdout + result.stderr
    assert code == 0
    assert data["attention"] == []
    assert data["totals"]["done"] == 5
    assert data["totals"]["scheduled"] == 2
    assert data["oldest_ready_seconds"] is None
    assert data["runs"][0]["done"] == 5
    assert data["runs"][0]["exit_reason"] == "drained"
    assert data["schema"]["version"] == data["schema"]["expected_version"]
    assert data["schema"]["drift"] == []
    assert "healthy" in result.stdout
    assert re.search(r"drained \(exit 0\) in [\d.]+s: claimed 5, done 5", result.stdout)


def test_status_exit_1_when_a_lease_has_expired(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_jobs(conn, 1, status="running", attempts=1, lease_left=-1)

    code, data = _status(dsn)

    assert code == 1
    assert data["totals"]["expired"] == 1
    assert len(data["attention"]) == 1


@pytest.fixture
def held_open(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A second session with a transaction open that holds vacuum back."""
    with psycopg.connect(dsn, application_name="held-open-by-test") as other:
        other.execute("SELECT txid_current()")
        other.execute("SELECT 'marker-of-the-last-statement' AS marker_column")
        yield other
        other.rollback()


def test_status_names_a_transaction_held_open(
    dsn: str, conn: psycopg.Connection[Any], held_open: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 1, status="done", attempts=1)
    time.sleep(1.1)

    code, data = _status(dsn)

    oldest = data["oldest_transaction"]
    assert oldest is not None
    assert oldest["pid"] == held_open.info.backend_pid
    assert oldest["application_name"] == "held-open-by-test"
    assert oldest["state"] == "idle in transaction"
    assert oldest["transaction_seconds"] >= 1.0
    assert oldest["query"] is None
    awake = [
        group
        for group in data["awake"]["sessions"]
        if group["application_name"] == "held-open-by-test"
    ]
    assert [(g["state"], g["sessions"]) for g in awake] == [("idle in transaction", 1)]
    # Under the threshold the open transaction is reported, not an alarm.
    assert code == 0
    assert data["attention"] == []

    result = drain_cli("status", "--max-transaction-age", "1s", dsn=dsn)
    assert result.returncode == 1
    assert "oldest transaction holding vacuum back: pid" in result.stdout
    assert "held-open-by-test" in result.stdout
    assert "idle in transaction" in result.stdout
    assert "holds vacuum back (over 1s)" in result.stdout
    assert "marker-of-the-last-statement" not in result.stdout

    verbose = drain_cli("status", "--verbose", dsn=dsn)
    assert "its last statement: SELECT $1 AS marker_column" in verbose.stdout
    assert "marker-of-the-last-statement" not in verbose.stdout


def test_status_sees_a_listening_session(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True, application_name="listener-by-test") as other:
        other.execute("LISTEN jobs")
        code, data = _status(dsn)
        result = drain_cli("status", dsn=dsn)

    assert code == 0
    assert data["awake"]["listening"] >= 1
    listeners = [
        g
        for g in data["awake"]["sessions"]
        if g["application_name"] == "listener-by-test" and g["listening"]
    ]
    assert listeners and listeners[0]["state"] == "idle"
    assert "whose last statement was LISTEN" in result.stdout


def test_status_without_a_dsn_says_how_to_give_one(quiet_env: None) -> None:
    result = drain_cli("status")

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("drain: error:")
    assert "--dsn" in lines[0] and "DRAIN_DSN" in lines[0]
    assert result.stdout == ""


def test_status_on_a_database_without_the_table(empty_dsn: str) -> None:
    result = drain_cli("status", dsn=empty_dsn)

    assert result.returncode == 1
    assert "drain init" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def viewer_dsn(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[str]:
    """A DSN for a role that may read the queue but not other roles' session details."""
    role = f"drain_viewer_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
    try:
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(ident))
        yield conninfo.make_conninfo(dsn, user=role)
    finally:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        conn.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_status_as_a_role_that_cannot_see_other_sessions(
    viewer_dsn: str, held_open: psycopg.Connection[Any]
) -> None:
    code, data = _status(viewer_dsn)
    result = drain_cli("status", dsn=viewer_dsn)

    assert code == 0, data
    assert data["awake"]["sees_all_sessions"] is False
    assert data["awake"]["hidden_sessions"] >= 1
    # Every role sees a session's xmin, so the transaction is still named; its age is not.
    oldest = data["oldest_transaction"]
    assert oldest["pid"] == held_open.info.backend_pid
    assert oldest["application_name"] == "held-open-by-test"
    assert (oldest["state"], oldest["transaction_seconds"]) == (None, None)
    assert "its state and age hidden from this role" in result.stdout
    assert "cannot be seen by this role (grant it pg_read_all_stats)" in result.stdout


# -- what makes status exit 1 (--fail-on) ------------------------------------------------


def test_status_an_old_failure_is_listed_but_no_longer_alarms(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """Failed jobs are never archived: counting each forever would alarm forever."""
    failed = add_jobs(conn, 1, status="failed", attempts=5, run_in=-7200, last_error="old")

    code, data = _status(dsn)
    result = drain_cli("status", dsn=dsn)

    assert code == 0, data["attention"]
    assert [f["id"] for f in data["failed_jobs"]] == failed
    assert data["fail_on"] == DEFAULT_FAIL_ON
    assert data["recent_failures"] == 0
    assert result.returncode == 0, result.stdout
    assert f"job {failed[0]} (default) after 5 attempt(s): old" in result.stdout
    assert "healthy: nothing that --fail-on failed-since=1h," in result.stdout

    code, data = _status(dsn, "--fail-on", "failed")
    assert code == 1
    assert data["attention"] == ["1 failed job(s) (see the errors; `drain retry` puts them back)"]
    code, data = _status(dsn, "--fail-on", "failed-since=3h")
    assert code == 1
    assert data["attention"][0].startswith("1 job(s) failed for good in the last 3h")


def test_status_a_failure_a_recent_run_recorded_alarms(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """A job due long ago (a backlog) that a run failed just now counts as recent."""
    add_jobs(conn, 2, run_in=-7200)
    run = drain_cli("run", "--handler", "demo_handlers:broken", dsn=dsn)
    assert run.returncode == 0, run.stderr

    code, data = _status(dsn)

    assert code == 1
    assert data["totals"]["failed"] == 2
    assert data["recent_failures"] == 2
    assert data["attention"] == [
        "2 job(s) failed for good in the last 1h (see the errors; `drain retry` puts them back)"
    ]
    # The same failures, seen through a window that the run ended before: none.
    time.sleep(1.1)
    code, data = _status(dsn, "--fail-on", "failed-since=1s")
    assert (code, data["recent_failures"], data["attention"]) == (0, 0, [])


def test_status_a_ready_job_waiting_too_long_alarms(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 1, run_in=-7200)
    add_jobs(conn, 1, run_in=-60, queue="emails")

    code, data = _status(dsn)
    assert code == 1
    assert len(data["attention"]) == 1
    assert data["attention"][0].startswith("a ready job has waited 2h")
    assert "(over 1h;" in data["attention"][0]

    assert _status(dsn, "--fail-on", "ready-older-than=3h")[0] == 0
    code, data = _status(dsn, "--fail-on", "ready-older-than=30s")
    assert code == 1 and data["fail_on"] == "ready-older-than=30s"


def test_status_fail_on_none_and_from_the_environment(
    dsn: str, every_state: dict[str, Any]
) -> None:
    code, data = _status(dsn, "--fail-on", "none")
    assert (code, data["attention"], data["fail_on"]) == (0, [], "none")
    # The expired lease alone, from DRAIN_FAIL_ON.
    result = drain_cli("status", "--json", dsn=dsn, env={"DRAIN_FAIL_ON": "expired-leases"})
    data = json.loads(result.stdout)
    assert result.returncode == 1
    assert len(data["attention"]) == 1 and "expired lease" in data["attention"][0]
    text = drain_cli("status", "--fail-on", "none", dsn=dsn)
    assert text.returncode == 0
    assert "healthy: nothing that --fail-on none counts" in text.stdout


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("bogus", "unknown condition 'bogus'"),
        ("failed-since", "failed-since needs a duration"),
        ("failed-since=soon", "not a duration"),
        ("expired-leases=1h", "expired-leases takes no value"),
        ("none,failed", "none cannot be combined"),
        (" , ", "--fail-on is empty"),
    ],
)
def test_status_refuses_a_fail_on_it_cannot_read(value: str, says: str) -> None:
    """A misspelt condition is refused before connecting: dropped, it would never alarm."""
    result = drain_cli("status", "--fail-on", value, dsn="postgresql://nobody@127.0.0.1:1/none")

    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drain: error: --fail-on"), result.stderr
    assert says in lines[0]
    assert result.stdout == ""


# --- every literal of another session's statement is replaced (drain.core.literals)

_secret = st.text(min_size=1, max_size=40)
_QUOTINGS = {
    "plain": lambda s: "'" + s.replace("'", "''") + "'",
    "national": lambda s: "N'" + s.replace("'", "''") + "'",
    "unicode": lambda s: "U&'" + s.replace("'", "''") + "'",
    "escape": lambda s: "E'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'",
    "escape, doubled quotes": lambda s: "e'" + s.replace("\\", "\\\\").replace("'", "''") + "'",
    "dollar": lambda s: f"$q${s}$q$",
    "empty dollar tag": lambda s: f"$${s}$$",
}
# Where a quoting form opens: a cut inside the opener shows the opener's letters.
_OPENERS = {"plain": "'", "national": "N'", "unicode": "U&'", "escape": "E'"}
_OPENERS |= {"escape, doubled quotes": "e'", "dollar": "$q$", "empty dollar tag": "$$"}
HEAD, TAIL = "ALTER ROLE r PASSWORD ", " VALID UNTIL now"


def _allowed(shown: str, cut_at: int, literal: str, opener: str) -> bool:
    """What the statement cut after ``cut_at`` characters may show: nothing of the secret."""
    if cut_at <= len(HEAD):
        return shown == (HEAD + literal)[:cut_at]
    inside = cut_at - len(HEAD)
    if inside < len(opener) and shown == HEAD + literal[:inside]:
        return True
    if inside < len(literal):  # a shorter literal may end where the text is cut
        return re.fullmatch(r"(\$\d+)*(\.\.\.)?", shown.removeprefix(HEAD)) is not None
    rest = TAIL[: inside - len(literal)]
    return shown in (HEAD + "$1" + rest, HEAD + "$1...")


@settings(max_examples=300, deadline=None)
@given(secret=_secret, quoting=st.sampled_from(sorted(_QUOTINGS)))
def test_no_literal_survives_whatever_it_holds_and_wherever_the_text_is_cut(
    secret: str, quoting: str
) -> None:
    literal = _QUOTINGS[quoting](secret)
    if quoting.endswith("dollar tag") or quoting == "dollar":
        tag = literal[: literal.index("$", 1) + 1]
        assume(tag not in secret and not secret.endswith(tag[:-1]))
    statement = HEAD + literal + TAIL
    whole = replace_literals(statement)
    cut_short = "\\" in secret and quoting in ("plain", "national", "unicode")
    assert whole == (HEAD + "$1..." if cut_short else HEAD + "$1" + TAIL), whole
    for cut_at in range(len(statement) + 1):
        shown = replace_literals(statement[:cut_at])
        assert _allowed(shown, cut_at, literal, _OPENERS[quoting]), (cut_at, shown)


@given(number=st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False)))
def test_numbers_are_literals_too(number: float) -> None:
    assert replace_literals(f"SELECT set_config('k', {number!r}::text, false)") == (
        "SELECT set_config($1, $2::text, false)"
    ).replace("$2", "-$2" if str(number).startswith("-") else "$2")


def test_comments_are_dropped_and_quoted_identifiers_kept() -> None:
    shown = replace_literals(
        'SELECT "a""b", x$1 /* a /* nested */ \'secret\' */ FROM t -- secret\nWHERE id = $1'
    )
    assert shown == 'SELECT "a""b", x$1   FROM t  \nWHERE id = $1'
    assert replace_literals("SELECT 1, $2, 'x'") == "SELECT $3, $2, $4"
    assert replace_literals("SELECT \"unterminated 'x'") == "SELECT ..."
    assert replace_literals("SELECT $ 'x'") == "SELECT ..."
