"""Recurring jobs (drain_schedules) on a real server: the API, the commands, the catch-up
figures, daylight-saving days, and what a real ``drain run`` fires.

The catch-up figures are computed here independently of drain, with croniter on the
database's ``now()``: each catch-up test fires inside one transaction, where
``now()`` stands still, so the expected count is exact. The daylight-saving test on
the database moves the database's clock for one session only: a ``now()`` of the
test's own put ahead of ``pg_catalog`` on that session's ``search_path``.
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from croniter import croniter
from psycopg import sql

from drain.core.summary import Note
from drain.core.table import JobTable
from drain.observe.words import note_text
from drain.planning import cron
from drain.store import firing, recurring
from tests.faults.support.roles import login_role
from tests.support import LEDGER_DDL, add_jobs, drain_cli, start_cli, statuses, summary_of

BERLIN = ZoneInfo("Europe/Berlin")
TEN_MINUTES = "*/10 * * * *"
APP = ["run", "--app", "run_app", "--json"]


# -- helpers ------------------------------------------------------------------------------


def schedule_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """Everything drain_schedules holds, to compare before and after a refused command."""
    return conn.execute("SELECT * FROM drain_schedules ORDER BY jobs_table, name").fetchall()


def stored(conn: psycopg.Connection[Any], name: str) -> recurring.RecurringJob:
    found = [entry for entry in recurring.schedules(conn) if entry.name == name]
    assert found, f"no schedule {name!r}"
    return found[0]


def set_back(conn: psycopg.Connection[Any], name: str, days: int = 3) -> None:
    """Make the schedule's last fire ``days`` ago (on a ten-minute boundary), its next
    fire the one after it: the compute was asleep since."""
    conn.execute(
        """
        UPDATE drain_schedules
           SET last_fire = date_bin('10 minutes', now(), timestamptz '2000-01-01 00:00Z')
                           - make_interval(days => %(days)s),
               next_fire = date_bin('10 minutes', now(), timestamptz '2000-01-01 00:00Z')
                           - make_interval(days => %(days)s) + interval '10 minutes'
         WHERE name = %(name)s
        """,
        {"name": name, "days": days},
    )


def fires_between(expression: str, first: datetime, now: datetime) -> list[datetime]:
    """Every fire in [first, now], by croniter alone (UTC)."""
    iterator = croniter(expression, first.astimezone(UTC) - timedelta(seconds=1))
    found = []
    while True:
        moment: datetime = iterator.get_next(datetime)
        if moment > now:
            return found
        found.append(moment)


def first_after(expression: str, now: datetime) -> datetime:
    moment: datetime = croniter(expression, now.astimezone(UTC)).get_next(datetime)
    return moment


def scheduled_jobs(conn: psycopg.Connection[Any], queue: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT run_at, payload, max_attempts FROM jobs WHERE queue = %s ORDER BY run_at",
        (queue,),
    ).fetchall()


def one_line_error(result: Any, code: int, says: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and lines[0].startswith("drain: error:"), result.stderr
    assert says in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout


@pytest.fixture
def ledger(conn: psycopg.Connection[Any], dsn: str) -> dict[str, str]:
    """The ledger run_app's handlers write to, and the environment pointing at it."""
    conn.execute(LEDGER_DDL)
    return {"LEDGER_DSN": dsn}


# -- the API, in the caller's transaction -------------------------------------------------


def test_schedule_and_unschedule_are_in_the_callers_transaction(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        assert recurring.schedule(conn, "digest", "0 7 * * *", "emails", {"kind": "digest"})
        assert [s.name for s in recurring.schedules(conn)] == ["digest"]
        conn.rollback()
        assert recurring.schedules(conn) == []
        conn.rollback()

        assert recurring.schedule(conn, "digest", "0 7 * * *", "emails", {"kind": "digest"})
        conn.commit()
        replaced = recurring.schedule(
            conn,
            "digest",
            "30 6 * * 1-5",
            "mail",
            [1, 2],
            tz="Europe/Berlin",
            catch_up="all",
            catch_up_limit=7,
            max_attempts=2,
        )
        assert replaced is False
        conn.commit()
        entry = stored(conn, "digest")
        assert (entry.cron, entry.time_zone, entry.queue, json.loads(entry.payload)) == (
            "30 6 * * 1-5",
            "Europe/Berlin",
            "mail",
            [1, 2],
        )
        assert (entry.catch_up, entry.catch_up_limit, entry.max_attempts) == ("all", 7, 2)
        # The next fire is the first after the update, in the schedule's zone.
        assert entry.next_fire == first_after_in(entry.cron, BERLIN, entry.updated_at)
        conn.commit()

        assert recurring.unschedule(conn, "digest") is True
        conn.rollback()
        assert [s.name for s in recurring.schedules(conn)] == ["digest"]
        assert recurring.unschedule(conn, "digest") is True
        conn.commit()
        assert recurring.unschedule(conn, "digest") is False
        conn.commit()
        assert recurring.schedules(conn) == []


def first_after_in(expression: str, where: ZoneInfo, now: datetime) -> datetime:
    moment: datetime = croniter(expression, now.astimezone(where)).get_next(datetime)
    return moment


# -- the commands ---------------------------------------------------------------------------


def test_add_update_list_and_remove(dsn: str, conn: psycopg.Connection[Any]) -> None:
    added = drain_cli("schedule", "add", "digest", "0 7 * * *", "emails", '{"kind": "d"}', dsn=dsn)
    assert added.returncode == 0, added.stderr
    assert "added schedule 'digest'" in added.stderr
    first = stored(conn, "digest")
    assert (first.cron, first.queue, json.loads(first.payload), first.max_attempts) == (
        "0 7 * * *",
        "emails",
        {"kind": "d"},
        5,
    )

    updated = drain_cli(
        "schedule",
        "add",
        "digest",
        "@hourly",
        "mail",
        '{"kind": "e"}',
        "--tz",
        "Europe/Berlin",
        "--catch-up",
        "all",
        "--catch-up-limit",
        "12",
        "--max-attempts",
        "3",
        dsn=dsn,
    )
    assert updated.returncode == 0, updated.stderr
    assert "updated schedule 'digest'" in updated.stderr
    second = stored(conn, "digest")
    assert (second.cron, second.time_zone, second.queue, json.loads(second.payload)) == (
        "0 * * * *",
        "Europe/Berlin",
        "mail",
        {"kind": "e"},
    )
    assert (second.catch_up, second.catch_up_limit, second.max_attempts) == ("all", 12, 3)
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert len(recurring.schedules(conn)) == 1

    assert drain_cli("schedule", "add", "prune", "*/5 * * * *", "maint", dsn=dsn).returncode == 0
    listed = drain_cli("schedule", "list", dsn=dsn)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "CRON", "ZONE", "QUEUE"]
    assert [line.split()[0] for line in lines[1:]] == ["digest", "prune"]
    as_json = drain_cli("schedule", "list", "--json", dsn=dsn)
    assert as_json.returncode == 0, as_json.stderr
    entries = json.loads(as_json.stdout)
    assert [(e["name"], e["cron"], e["queue"], e["payload"]) for e in entries] == [
        ("digest", "0 * * * *", "mail", {"kind": "e"}),
        ("prune", "*/5 * * * *", "maint", {}),
    ]
    assert entries[0]["next_fire"] == second.next_fire.isoformat()

    removed = drain_cli("schedule", "remove", "digest", dsn=dsn)
    assert removed.returncode == 0 and "removed schedule 'digest'" in removed.stderr
    assert [s.name for s in recurring.schedules(conn)] == ["prune"]
    missing = drain_cli("schedule", "remove", "digest", dsn=dsn)
    one_line_error(missing, 1, "no schedule named 'digest'")
    assert [s.name for s in recurring.schedules(conn)] == ["prune"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("every tuesday", "q"), "bad cron expression"),
        (("61 * * * *", "q"), "bad cron expression"),
        (("*/61 * * * *", "q"), "step /61 is out of range: the minute field takes 0-59"),
        (("0-59/1000 * * * *", "q"), "step /1000 is out of range: the minute field"),
        (("0 */25 * * *", "q"), "step /25 is out of range: the hour field takes 0-23"),
        (("0-70 * * * *", "q"), "70 is out of range: the minute field takes 0-59"),
        (("* * * * * *", "q"), "five fields"),
        (("0 7 * * *", "q", "--tz", "Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
        (("0 7 * * *", "q", "{not json"), "PAYLOAD_JSON is not valid JSON"),
        (("0 0 30 2 *", "q"), "never fires"),
        (("0 7 * * *", "q", "--catch-up", "sometimes"), "--catch-up"),
        (("0 7 * * *", "q", "--catch-up-limit", "0"), "--catch-up-limit"),
        (("0 7 * * *", "q", "--max-attempts", "0"), "--max-attempts"),
        (("0 7 * * *", " "), "QUEUE"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    dsn: str, conn: psycopg.Connection[Any], args: tuple[str, ...], says: str
) -> None:
    assert drain_cli("schedule", "add", "digest", "0 7 * * *", "emails", dsn=dsn).returncode == 0
    before = schedule_rows(conn)
    # Both a new name and a change to the existing one are refused.
    for name in ("fresh", "digest"):
        result = drain_cli("schedule", "add", name, *args, dsn=dsn)
        one_line_error(result, 2, says)
        assert schedule_rows(conn) == before


@pytest.mark.parametrize("expression", ["*/61 * * * *", "0-59/1000 * * * *", "0 */25 * * *"])
def test_a_stored_cron_with_a_step_beyond_its_field_is_not_fired_and_noted(
    dsn: str, conn: psycopg.Connection[Any], ledger: dict[str, str], expression: str
) -> None:
    """Written by hand (or by an older drain, which took it): croniter fired it hourly."""
    conn.execute(
        "INSERT INTO drain_schedules (jobs_table, name, cron, queue, next_fire) "
        "VALUES ('public.jobs', 'odd', %s, 'default', now() - interval '1 minute')",
        (expression,),
    )
    result = drain_cli(*APP, dsn=dsn, env=ledger)
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert summary["fired"] == 0
    [note] = [note for note in summary["notes"] if note["code"] == "schedule_not_fired"]
    assert note["figures"]["schedule"] == "odd"
    assert note["figures"]["error"].startswith(f"bad cron expression {expression!r}: step")
    assert "is out of range: the " in note["figures"]["error"]
    said = note_text(Note(note["code"], note["figures"]))
    assert said.startswith(f"schedule 'odd' not fired: bad cron expression {expression!r}")
    assert said in result.stderr
    assert statuses(conn) == {}


def test_never_firing_cron_is_refused_by_the_api_too(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(cron.ScheduleError, match="never fires"):
        recurring.schedule(conn, "leap", "0 0 30 2 *", "q")
    assert schedule_rows(conn) == []


# -- catch-up after a long sleep, in one transaction (now() stands still) ------------------


def fire_in_one_transaction(
    dsn: str, name: str, runs_ago: list[float] | None = None
) -> tuple[list[firing.Fired], datetime, datetime, float | None]:
    """Set the schedule three days back, record runs started ``runs_ago`` seconds ago,
    and fire: all in one transaction, so now() is the same for drain and the test.
    Returns what fired, that now(), the next fire set back, and the longest
    run-to-run gap the test computes."""
    with psycopg.connect(dsn) as conn:
        set_back(conn, name)
        row = conn.execute(
            "SELECT now(), next_fire FROM drain_schedules WHERE name = %s", (name,)
        ).fetchone()
        assert row is not None
        now: datetime = row[0]
        next_fire: datetime = row[1]
        for ago in runs_ago or []:
            conn.execute(
                "INSERT INTO drain_runs (jobs_table, started_at, seconds, claimed, done, "
                "retried, failed, lost, reaped, released, archived, exit_reason, exit_code) "
                "VALUES ('public.jobs', now() - make_interval(secs => %s), 1, 0, 0, 0, 0, 0, "
                "0, 0, 0, 'empty', 0)",
                (ago,),
            )
        recent = sorted(ago for ago in runs_ago or [] if ago < 86400)
        starts = [0.0, *recent]  # seconds before now, now first
        gap = max((b - a for a, b in itertools.pairwise(starts)), default=None)
        fired = firing.fire_due(conn, JobTable())
        conn.commit()
    return fired, now, next_fire, gap


@pytest.mark.parametrize(
    ("catch_up", "limit"), [("latest", 100), ("all", 100), ("all", 1000), ("all", 5)]
)
def test_catch_up_after_three_days_asleep(
    dsn: str, conn: psycopg.Connection[Any], catch_up: Any, limit: int
) -> None:
    payload = {"report": "hourly", "n": [1, 2]}
    recurring.schedule(
        conn,
        "ten",
        TEN_MINUTES,
        "reports",
        payload,
        catch_up=catch_up,
        catch_up_limit=limit,
        max_attempts=4,
    )
    before = stored(conn, "ten")
    fired, now, next_fire, _ = fire_in_one_transaction(dsn, "ten")

    missed = fires_between(TEN_MINUTES, next_fire, now)
    assert len(missed) == 432  # 3 days of 144, from the fire after the last one
    expected = missed[-1:] if catch_up == "latest" else missed[-min(len(missed), limit) :]
    jobs = scheduled_jobs(conn, "reports")
    assert [row[0] for row in jobs] == expected
    assert all(row[1] == payload and row[2] == 4 for row in jobs)
    [entry] = fired
    assert (entry.name, entry.queue, entry.enqueued, entry.skipped) == (
        "ten",
        "reports",
        len(expected),
        len(missed) - len(expected),
    )
    assert not entry.more_skipped and not entry.raced
    after = stored(conn, "ten")
    assert after.last_fire == missed[-1]
    assert after.next_fire == first_after(TEN_MINUTES, now)
    assert after.fired_at == now and after.updated_at == before.updated_at
    print(f"catch-up {catch_up} limit {limit}: missed {len(missed)}, enqueued {len(expected)}")


@pytest.mark.parametrize(
    "runs_ago",
    [
        [],  # no run recorded: the window is the 60 s floor
        [2 * 86400.0],  # none in the last day: the same
        [25 * 60.0],  # one run 25 minutes ago: the gap up to now covers any fire of */10
        [150.0, 90.0, 30.0],  # runs a minute apart: the floor again
        [45 * 60.0, 40 * 60.0, 200.0],  # a 38-minute gap earlier today
        [300.0],  # five minutes: only a fire of the last five minutes counts
    ],
)
def test_catch_up_none_enqueues_the_latest_fire_only_within_the_run_gap(
    dsn: str, conn: psycopg.Connection[Any], runs_ago: list[float]
) -> None:
    recurring.schedule(conn, "ten", TEN_MINUTES, "reports", {"p": 1}, catch_up="none")
    fired, now, next_fire, gap = fire_in_one_transaction(dsn, "ten", runs_ago)

    missed = fires_between(TEN_MINUTES, next_fire, now)
    assert len(missed) == 432
    window = max(60.0, gap or 0.0)
    latest_age = (now - missed[-1]).total_seconds()
    expected = missed[-1:] if latest_age <= window else []
    jobs = scheduled_jobs(conn, "reports")
    assert [row[0] for row in jobs] == expected
    assert fired[0].enqueued == len(expected) and fired[0].skipped == len(missed) - len(expected)
    after = stored(conn, "ten")
    assert after.last_fire == missed[-1], "the latest due fire is recorded even when skipped"
    assert after.next_fire == first_after(TEN_MINUTES, now)
    if runs_ago == [25 * 60.0]:
        assert len(jobs) == 1
    print(f"catch-up none {runs_ago}: window {window:.0f}s, age {latest_age:.0f}s, {len(jobs)}")


def test_nothing_due_fires_nothing(dsn: str, conn: psycopg.Connection[Any]) -> None:
    recurring.schedule(conn, "ten", TEN_MINUTES, "reports")
    assert firing.fire_due(conn, JobTable()) == []
    assert scheduled_jobs(conn, "reports") == []


# -- daylight-saving days -------------------------------------------------------------------


def step_through_day(expression: str, day: str, step_seconds: int) -> list[datetime]:
    """Fire ``expression`` as runs every ``step_seconds`` would across ``day`` in Berlin."""
    start = datetime.fromisoformat(day).replace(tzinfo=BERLIN)
    end = (start + timedelta(days=1, hours=1)).replace(hour=0)  # the local midnight after
    first = cron.next_fire(expression, BERLIN, start.timestamp() - 1)
    # every step, and a last run a second before midnight
    moments = [*range(int(start.timestamp()), int(end.timestamp()), step_seconds)]
    fires: list[float] = []
    for moment in [*moments, end.timestamp() - 1]:
        due = cron.due_fires(
            expression, BERLIN, first=first, now=moment, catch_up="all", limit=1000, window=60
        )
        fires += due.fires
        if due.latest is not None:
            assert due.following > moment
            first = due.following
    return [datetime.fromtimestamp(stamp, BERLIN) for stamp in fires]


@pytest.mark.parametrize("step_seconds", [60, 300, 1800, 3600])
def test_a_fixed_time_fires_once_on_both_daylight_saving_days(step_seconds: int) -> None:
    spring = step_through_day("30 2 * * *", "2026-03-29", step_seconds)
    assert [f.strftime("%H:%M %Z") for f in spring] == ["03:00 CEST"]
    autumn = step_through_day("30 2 * * *", "2026-10-25", step_seconds)
    assert [f.strftime("%H:%M %Z") for f in autumn] == ["02:30 CEST"]
    assert len({f.timestamp() for f in spring + autumn}) == 2


@pytest.mark.parametrize("step_seconds", [60, 300, 1800, 7200])
def test_a_wildcard_hour_fires_in_both_copies_of_the_repeated_hour(step_seconds: int) -> None:
    spring = step_through_day("*/30 * * * *", "2026-03-29", step_seconds)
    autumn = step_through_day("*/30 * * * *", "2026-10-25", step_seconds)
    # a 23-hour and a 25-hour day: every half hour of real time, none twice
    assert (len(spring), len(autumn)) == (46, 50)
    for fires in (spring, autumn):
        stamps = [f.timestamp() for f in fires]
        assert stamps == sorted(set(stamps))
        assert {b - a for a, b in itertools.pairwise(stamps)} == {1800.0}
    repeated = [f.strftime("%H:%M %Z") for f in autumn if f.hour == 2]
    assert repeated == ["02:00 CEST", "02:30 CEST", "02:00 CET", "02:30 CET"]
    assert not [f for f in spring if f.hour == 2]


CLOCK = """
CREATE SCHEMA test_clock;
CREATE FUNCTION test_clock.now() RETURNS timestamptz LANGUAGE sql STABLE
    AS $$ SELECT current_setting('test_clock.now')::timestamptz $$;
"""


def test_daylight_saving_days_on_the_database(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Runs every five minutes across both change days, on a database clock the test sets:
    the fixed-time schedule fires once each day, the half-hourly one every half hour."""
    conn.execute(CLOCK)
    table = JobTable()
    recurring.schedule(conn, "fixed", "30 2 * * *", "fixed", tz="Europe/Berlin", catch_up="all")
    recurring.schedule(conn, "half", "*/30 * * * *", "half", tz="Europe/Berlin", catch_up="all")
    clocked = psycopg.connect(
        dsn, autocommit=True, options="-c search_path=test_clock,pg_catalog,public"
    )
    with clocked:
        for day in ("2026-03-28T23:00:00+01:00", "2026-10-24T23:00:00+02:00"):
            start = datetime.fromisoformat(day)
            conn.execute(
                "UPDATE drain_schedules SET next_fire = CASE name "
                "WHEN 'fixed' THEN %(fixed)s ELSE %(half)s END",
                {
                    "fixed": datetime.fromtimestamp(
                        cron.next_fire("30 2 * * *", BERLIN, start.timestamp()), UTC
                    ),
                    "half": datetime.fromtimestamp(
                        cron.next_fire("*/30 * * * *", BERLIN, start.timestamp()), UTC
                    ),
                },
            )
            for step in range(0, 26 * 12):
                moment = start + timedelta(minutes=5 * step)
                clocked.execute(
                    "SELECT set_config('test_clock.now', %s, false)", (moment.isoformat(),)
                )
                firing.fire_due(clocked, table)
                # twice at the same moment: the second finds nothing due
                assert firing.fire_due(clocked, table) == []
            assert clocked.execute("SELECT now()").fetchone() == (moment,)
    fixed = [row[0].astimezone(BERLIN) for row in scheduled_jobs(conn, "fixed")]
    assert [f.strftime("%Y-%m-%d %H:%M %Z") for f in fixed] == [
        "2026-03-29 03:00 CEST",
        "2026-10-25 02:30 CEST",
    ]
    half = [row[0] for row in scheduled_jobs(conn, "half")]
    assert len(half) == len(set(half))
    spring_day = [h for h in half if h.astimezone(BERLIN).date().isoformat() == "2026-03-29"]
    autumn_day = [h for h in half if h.astimezone(BERLIN).date().isoformat() == "2026-10-25"]
    assert (len(spring_day), len(autumn_day)) == (46, 50)


# -- real runs ------------------------------------------------------------------------------


def test_a_real_run_catches_up_and_does_the_fired_jobs(
    dsn: str, conn: psycopg.Connection[Any], ledger: dict[str, str]
) -> None:
    recurring.schedule(
        conn, "ten", TEN_MINUTES, "default", {"p": 1}, catch_up="all", catch_up_limit=100
    )
    recurring.schedule(
        conn, "wide", TEN_MINUTES, "default", {"p": 2}, catch_up="all", catch_up_limit=1000
    )
    set_back(conn, "ten")
    set_back(conn, "wide")
    mark = conn.execute("SELECT now()").fetchone()
    assert mark is not None
    next_fire = stored(conn, "ten").next_fire
    assert stored(conn, "wide").next_fire == next_fire
    result = drain_cli(*APP, dsn=dsn, env=ledger)
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    after = {name: stored(conn, name) for name in ("ten", "wide")}
    latest = after["ten"].last_fire
    assert latest is not None and after["wide"].last_fire == latest
    # the run's now() is after the mark, and latest is the ten-minute mark at it
    assert mark[0] - timedelta(minutes=10) < latest <= after["ten"].fired_at
    missed = fires_between(TEN_MINUTES, next_fire, latest)
    assert len(missed) in (432, 433)  # 433 when a ten-minute mark passed before the run
    assert summary["fired"] == 100 + len(missed)
    assert summary["done"] == summary["claimed"] == 100 + len(missed)
    skipped_notes = [note for note in summary["notes"] if note["code"] == "fires_skipped"]
    assert len(skipped_notes) == 1, summary["notes"]
    figures = skipped_notes[0]["figures"]
    assert (figures["schedule"], figures["skipped"]) == ("ten", len(missed) - 100)
    said = note_text(Note("fires_skipped", figures))
    assert said.startswith(f"schedule 'ten': {len(missed) - 100} missed fire(s)")
    assert not [note for note in summary["notes"] if note["figures"].get("schedule") == "wide"]
    ran = conn.execute(
        "SELECT payload->>'p', count(*), count(DISTINCT run_at) FROM jobs "
        "JOIN ledger ON ledger.job_id = jobs.id GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert ran == [("1", 100, 100), ("2", len(missed), len(missed))]
    print(f"real run: missed {len(missed)}, fired {summary['fired']}")


def test_no_schedules_fires_nothing(
    dsn: str, conn: psycopg.Connection[Any], ledger: dict[str, str]
) -> None:
    recurring.schedule(conn, "ten", TEN_MINUTES, "default")
    set_back(conn, "ten")
    before = stored(conn, "ten")
    skipped = drain_cli(*APP, "--no-schedules", dsn=dsn, env=ledger)
    assert skipped.returncode == 0, skipped.stderr
    assert summary_of(skipped)["fired"] == 0
    assert statuses(conn) == {}
    assert stored(conn, "ten")[:-1] == before[:-1]  # all but the database time
    firing = drain_cli(*APP, dsn=dsn, env=ledger)
    assert summary_of(firing)["fired"] == 1
    assert statuses(conn) == {"done": 1}


def test_a_schedule_on_a_queue_without_a_handler_is_fired_and_noted(
    dsn: str, conn: psycopg.Connection[Any], ledger: dict[str, str]
) -> None:
    recurring.schedule(conn, "elsewhere", TEN_MINUTES, "reports", {"r": 1})
    set_back(conn, "elsewhere")
    result = drain_cli(*APP, dsn=dsn, env=ledger)
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert summary["fired"] == 1 and summary["claimed"] == 0
    unhandled = {"schedule": "elsewhere", "enqueued": 1, "queue": "reports"}
    assert {"code": "schedule_queue_unhandled", "figures": unhandled} in summary["notes"]
    said = note_text(Note("schedule_queue_unhandled", unhandled))
    assert "'elsewhere'" in said and "'reports'" in said and "no handler" in said
    assert said in result.stderr
    assert statuses(conn) == {"queued": 1}
    assert [row[1] for row in scheduled_jobs(conn, "reports")] == [{"r": 1}]


def test_a_fire_due_while_the_run_works_is_left_to_the_next_run(
    dsn: str, conn: psycopg.Connection[Any], ledger: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "working"
    [blocker] = add_jobs(conn, 1, payload={"marker": str(marker), "sleep": 4})
    # yearly, so that it cannot come due on its own during the test
    recurring.schedule(conn, "yearly", "0 0 1 1 *", "default", {"scheduled": True})
    run = start_cli(*APP, dsn=dsn, env=ledger)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline and run.poll() is None, "the blocker never started"
        time.sleep(0.02)
    with conn.transaction():
        # made due while the run is provably still working on its first job
        row = conn.execute("SELECT status FROM jobs WHERE id = %s", (blocker,)).fetchone()
        assert row == ("running",)
        conn.execute("UPDATE drain_schedules SET next_fire = '2026-01-01 00:00Z'")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    first = json.loads(out)
    assert (first["fired"], first["done"]) == (0, 1)
    assert conn.execute("SELECT count(*) FROM jobs WHERE payload ? 'scheduled'").fetchone() == (0,)
    second = summary_of(drain_cli(*APP, dsn=dsn, env=ledger))
    assert (second["fired"], second["done"]) == (1, 1)
    assert conn.execute("SELECT run_at FROM jobs WHERE payload ? 'scheduled'").fetchall() == [
        (datetime(2026, 1, 1, tzinfo=UTC),)
    ]


def test_a_table_without_drain_schedules_still_runs(
    dsn: str, conn: psycopg.Connection[Any], ledger: dict[str, str]
) -> None:
    conn.execute("DROP TABLE drain_schedules")
    add_jobs(conn, 3)
    result = drain_cli(*APP, dsn=dsn, env=ledger)
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert (summary["done"], summary["fired"]) == (3, 0)
    assert not [note for note in summary["notes"] if "fire" in note["code"]], summary["notes"]
    listed = drain_cli("schedule", "list", dsn=dsn)
    one_line_error(listed, 1, "drain init")
    assert "drain_schedules" in listed.stderr


def test_print_sql_creates_drain_schedules(quiet_env: None) -> None:
    printed = drain_cli("init", "--print-sql")
    assert printed.returncode == 0, printed.stderr
    assert 'CREATE TABLE IF NOT EXISTS "public"."drain_schedules"' in printed.stdout
    assert 'CREATE INDEX IF NOT EXISTS "drain_schedules_due_idx"' in printed.stdout


def test_a_least_privilege_role_fires_schedules_in_a_real_run(
    dsn: str, conn: psycopg.Connection[Any], ledger: dict[str, str]
) -> None:
    recurring.schedule(
        conn, "ten", TEN_MINUTES, "default", {"p": 1}, catch_up="all", catch_up_limit=3
    )
    set_back(conn, "ten")
    with login_role(dsn, "worker-secret", prefix="sched") as role:
        printed = drain_cli("init", "--print-grants", role.name)
        assert printed.returncode == 0, printed.stderr
        assert "drain_schedules" in printed.stdout
        conn.execute(printed.stdout.encode())
        conn.execute(sql.SQL("GRANT INSERT ON ledger TO {}").format(sql.Identifier(role.name)))
        # the role may not change a schedule, only fire it
        with role.connect() as worker, pytest.raises(psycopg.errors.InsufficientPrivilege):
            worker.execute("UPDATE drain_schedules SET payload = '{}'")
        result = drain_cli(*APP, dsn=role.dsn(), env=ledger)
    assert result.returncode == 0, result.stderr
    summary = summary_of(result)
    assert not [n for n in summary["notes"] if n["code"].endswith("not_fired")], summary["notes"]
    assert (summary["fired"], summary["done"]) == (3, 3)
    assert stored(conn, "ten").fired_at is not None


@pytest.mark.parametrize(
    "args",
    [
        ("add", "digest", "0 7 * * *", "emails", "--table", "nope"),
        ("list", "--table", "nope"),
        ("remove", "digest", "--table", "nope"),
    ],
)
def test_a_queue_table_that_does_not_exist_is_an_error_not_a_schedule(
    dsn: str, conn: psycopg.Connection[Any], args: tuple[str, ...]
) -> None:
    """A schedule for a table no run drains would never fire: say so, write nothing."""
    result = drain_cli("schedule", *args, dsn=dsn)
    one_line_error(result, 1, "queue table public.nope does not exist")
    assert "drain init" in result.stderr
    assert schedule_rows(conn) == []
