"""``--queue-rate QUEUE=N/s|m|h``: starts per period across every run, kept in the database.

Every run that claims a rated queue takes tokens from the queue's one bucket in
``drain_rates``, in the claim's own transaction, and sleeps (no transaction, no
statement) until the bucket refills. The starts are read from the ledger the
test handlers write, with the database's clock, as they happen.
"""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import pytest

import drain
from drain.core.errors import UsageError
from drain.core.rates import Rate, parse_queue_rate, parse_rate, run_capacity
from drain.core.table import JobTable
from drain.store import rates, sqlfiles
from tests.support import LEDGER_DDL, add_jobs, drain_cli, executions, start_cli, summary_of

RQ = ["--handler", "run_app:default_queue", "--queue", "rq"]


@pytest.fixture
def ledger(conn: psycopg.Connection[Any], dsn: str) -> dict[str, str]:
    conn.execute(LEDGER_DDL)
    return {"LEDGER_DSN": dsn}


def busiest_second(conn: psycopg.Connection[Any]) -> int:
    """The most starts in any one second, over every window of one second that
    starts at a start (not only the seconds of the clock)."""
    row = conn.execute(
        "SELECT max((SELECT count(*) FROM ledger AS b "
        "            WHERE b.at >= a.at AND b.at < a.at + interval '1 second')) "
        "FROM ledger AS a"
    ).fetchone()
    assert row is not None
    return int(row[0] or 0)


def spread_seconds(conn: psycopg.Connection[Any]) -> float:
    row = conn.execute(
        "SELECT extract(epoch FROM max(at) - min(at))::float8 FROM ledger"
    ).fetchone()
    assert row is not None
    return float(row[0])


def count_takes(conn: psycopg.Connection[Any]) -> None:
    """Count every change of a bucket (each claim of a rated queue makes two: the
    refill and the take), so a test can tell a run that sleeps from one that polls."""
    rates.ensure_table(conn, JobTable())
    conn.execute("CREATE TABLE bucket_changes (at timestamptz DEFAULT clock_timestamp())")
    conn.execute(
        "CREATE FUNCTION bucket_changed() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN INSERT INTO bucket_changes DEFAULT VALUES; RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER bucket_changed AFTER INSERT OR UPDATE ON drain_rates "
        "FOR EACH ROW EXECUTE FUNCTION bucket_changed()"
    )


# -- the rate across runs ------------------------------------------------------------------


def test_two_runs_at_once_keep_to_the_rate_together(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 120, queue="rq")
    runs = [
        start_cli("run", *RQ, "--queue-rate", "rq=40/s", "--json", dsn=dsn, env=ledger)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, stderr
        assert json.loads(stdout)["exit_reason"] == "drained"
    claimed = [json.loads(stdout)["claimed"] for stdout, _ in outputs]
    assert sum(claimed) == 120
    assert set(executions(conn).values()) == {1} and len(executions(conn)) == 120
    assert busiest_second(conn) <= 48
    assert spread_seconds(conn) >= 2.0


def test_a_run_sleeps_until_its_bucket_refills_and_never_polls(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    """At 4/s the bucket holds one token: eight jobs are eight claims a quarter of a
    second apart. A run that asked the database while it waited would make many
    more, and a transaction held while waiting would show as idle in transaction."""
    count_takes(conn)
    add_jobs(conn, 8, queue="rq")
    run = start_cli("run", *RQ, "--queue-rate", "rq=4/s", "--json", dsn=dsn, env=ledger)
    states = set()
    while run.poll() is None:
        rows = conn.execute(
            "SELECT state FROM pg_stat_activity "
            "WHERE application_name = 'drain' AND datname = current_database()"
        ).fetchall()
        states |= {row[0] for row in rows}
        time.sleep(0.02)
    stdout, stderr = run.communicate()
    assert run.returncode == 0, stderr
    assert json.loads(stdout)["done"] == 8
    assert "idle in transaction" not in states
    row = conn.execute("SELECT count(*) FROM bucket_changes").fetchone()
    assert row is not None
    # eight claims that found a token, and the last one that found the queue empty;
    # each changes the bucket twice (refill, take); a refund may follow the last
    assert int(row[0]) <= 2 * (8 + 2) + 1, f"{row[0]} bucket changes for 8 jobs"
    assert spread_seconds(conn) >= 1.5  # 8 starts, 1 at once, then 4 a second


def test_a_rate_that_outlasts_the_budget_ends_the_run_with_reason_rate(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    """One start an hour: the run starts one job, sees the next token comes after its
    budget, and ends at once (exit 3, reason rate), without waiting out the budget."""
    add_jobs(conn, 3, queue="rq")
    result = drain_cli(
        "run", *RQ, "--queue-rate", "rq=1/h", "--max-seconds", "60", "--json", dsn=dsn, env=ledger
    )
    assert result.returncode == 3, result.stderr
    summary = summary_of(result)
    assert summary["exit_reason"] == "rate"
    assert summary["done"] == 1
    assert summary["seconds"] < 60
    assert {"code": "paced", "figures": {"rates": "rq=1/h"}} in summary["notes"]
    assert "paced by --queue-rate rq=1/h: ready jobs are left for a later run" in result.stderr


def test_a_budget_spent_pacing_ends_the_run_with_reason_rate(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 200, queue="rq")
    result = drain_cli(
        "run", *RQ, "--queue-rate", "rq=10/s", "--max-seconds", "2", "--json", dsn=dsn, env=ledger
    )
    assert result.returncode == 3, result.stderr
    summary = summary_of(result)
    assert summary["exit_reason"] == "rate"
    assert 0 < summary["done"] <= run_capacity(Rate(10, "s"), 2 + 10)  # budget plus grace


def test_the_python_api_takes_queue_rates(conn: psycopg.Connection[Any], dsn: str) -> None:
    add_jobs(conn, 6, queue="rq")
    started: list[int] = []
    summary = drain.run(
        dsn,
        handlers={"rq": lambda job: started.append(job.id)},
        queue_rates={"rq": "20/s"},
        max_seconds=60,
    )
    assert summary.exit_reason == "drained" and summary.done == 6 and len(started) == 6
    (bucket,) = conn.execute("SELECT starts, period_seconds, burst FROM drain_rates").fetchall()
    assert bucket == (20, 1.0, 4.0)


def test_the_buckets_are_the_runs_own_table_and_status_reads_them(
    conn: psycopg.Connection[Any], dsn: str, ledger: dict[str, str]
) -> None:
    add_jobs(conn, 1, queue="rq")
    ran = drain_cli("run", *RQ, "--queue-rate", "rq=40/s", dsn=dsn, env=ledger)
    assert ran.returncode == 0, ran.stderr
    add_jobs(conn, 120, queue="rq")
    status = drain_cli("status", "--fail-on", "none", dsn=dsn)
    assert status.returncode == 0, status.stderr
    assert "rq: 40/s, 120 ready = 3 s" in status.stdout
    data = json.loads(drain_cli("status", "--fail-on", "none", "--json", dsn=dsn).stdout)
    assert data["rates"] == [
        {"queue": "rq", "rate": "40/s", "ready": 120, "seconds_for_ready": 3.0}
    ]


def test_plan_says_what_a_rate_means() -> None:
    result = drain_cli(
        "plan", "*/5 * * * *", "--max-seconds", "60", "--queue-rate", "rq=40/s", "--json"
    )
    assert result.returncode in (0, 1), result.stderr
    (entry,) = json.loads(result.stdout)["rates"]
    assert entry["starts_per_run"] == 40 * 60 + 8
    assert entry["seconds_per_1000"] == 25
    text = drain_cli("plan", "*/5 * * * *", "--max-seconds", "60", "--queue-rate", "rq=40/s")
    assert "rq: 40/s: a run of 1m starts at most 2,408 of its jobs" in text.stdout


# -- mistakes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "rq=0/s",
            "drain: error: --queue-rate rq: '0/s' allows no start at all; give N of at least 1",
        ),
        (
            "rq=40/d",
            "drain: error: --queue-rate rq: '40/d' is not a rate N/s, N/m or N/h (starts per "
            "second, minute or hour), e.g. emails=40/s",
        ),
        ("=4/s", "drain: error: --queue-rate: '=4/s' is not QUEUE=N/s|m|h, e.g. emails=40/s"),
    ],
)
def test_a_bad_rate_is_refused_in_one_line_before_connecting(value: str, message: str) -> None:
    result = drain_cli("run", *RQ, "--queue-rate", value, dsn="postgresql://nobody@127.0.0.1:1/x")
    assert result.returncode == 2
    assert result.stderr.strip() == message


def test_the_parsers() -> None:
    assert parse_rate("40/s") == Rate(40, "s")
    assert parse_rate(" 600 / m ") == Rate(600, "m")
    assert parse_queue_rate("a=b=3/h") == ("a=b", Rate(3, "h"))
    assert Rate(40, "s").burst == 8 and Rate(3, "m").burst == 1
    for bad in ("0/s", "40/d", "-1/s", "1.5/s", "40"):
        with pytest.raises(UsageError):
            parse_rate(bad)
    with pytest.raises(UsageError, match="at least 1"):
        drain.run(
            "postgresql://nobody@127.0.0.1:1/x", handlers={}, queue_rates={"rq": Rate(0, "s")}
        )


# -- the policy's part (pure: time as input) ------------------------------------------------


def test_a_short_bucket_pauses_its_queue_until_it_refills_and_closes_it_past_the_deadline() -> None:
    from drain.runner.policy import ClaimPolicy

    policy = ClaimPolicy.for_run(["rq", "other"], 100, 1, rates={"rq": Rate(4, "s")}, strict=True)
    first = policy.next_claim(0.0, 60.0, waiting=0, busy=0)
    assert first is not None and first.queue == "rq" and first.rate == Rate(4, "s")
    policy.rate_short("rq", 0.25)
    paused = policy.next_claim(0.1, 60.0, waiting=0, busy=0)
    assert paused is not None and paused.queue == "other" and paused.rate is None
    assert policy.rate_wake(0.1) == pytest.approx(0.15)
    again = policy.next_claim(0.25, 60.0, waiting=0, busy=0)
    assert again is not None and again.queue == "rq"
    policy.rate_short("rq", 61.0)  # the next token comes after the deadline
    assert policy.next_claim(1.0, 60.0, waiting=0, busy=0).queue == "other"  # type: ignore[union-attr]
    assert "rq" not in policy.open_queues and policy.held_by_rate() == ["rq"]


def test_a_run_that_stops_after_a_refill_but_before_its_claim_was_held_by_the_rate() -> None:
    """The budget can run out in the moment between a bucket refilling and the claim
    that uses it: the rate, not the queue, still ended the run (it flaked as budget)."""
    from drain.runner.policy import ClaimPolicy

    policy = ClaimPolicy.for_run(["rq"], 100, 1, rates={"rq": Rate(10, "s")}, strict=True)
    assert policy.next_claim(0.0, 2.0, waiting=0, busy=0) is not None
    policy.rate_short("rq", 0.2)
    assert policy.held_by_rate() == ["rq"]  # stopped while short
    assert policy.rate_wake(0.3) is None  # refilled: the loop would claim next
    assert policy.held_by_rate() == ["rq"]  # stopped before it did
    assert policy.next_claim(0.3, 2.0, waiting=0, busy=0) is not None
    assert policy.held_by_rate() == []  # claimed, and tokens were left


def test_two_runs_that_both_find_no_buckets_both_go_on(dsn: str) -> None:
    """The first run given a rate creates drain_rates; a second that found it missing
    too waits for the first's creation and then uses its table (no error)."""
    import threading

    from psycopg import sql

    table = JobTable()
    with psycopg.connect(dsn) as first:
        first.execute(
            sql.SQL(sqlfiles.text("rate_table")).format(rates=rates.rates_identifier(table))
        )  # created, not yet committed
        failure: list[BaseException] = []

        def second_run() -> None:
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    rates.ensure_table(conn, table)
            except BaseException as exc:  # reported below
                failure.append(exc)

        thread = threading.Thread(target=second_run)
        thread.start()
        time.sleep(0.5)  # the second waits on the first's catalog row
        first.commit()
        thread.join(timeout=30)
    assert not thread.is_alive() and not failure, failure
