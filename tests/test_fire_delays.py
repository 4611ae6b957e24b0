"""How late a recurring job goes out under a drain schedule: exact figures, no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from drain.planning.fire_delays import FireDelays, Recurring, fire_delays
from drain.planning.plan import DAY, Frame, RunSchedule

MONDAY = datetime(2026, 11, 30, tzinfo=UTC)
WEEK = Frame(start=MONDAY)
ONE_DAY = Frame(start=MONDAY, window=DAY)


def delays_of(frame: Frame, drain: str, job: Recurring, zone: str | None = None) -> FireDelays:
    [found] = fire_delays(frame, [RunSchedule(drain, 60.0, timezone=zone)], [job])
    return found


def test_a_daily_job_on_a_drain_run_start_waits_for_nothing() -> None:
    found = delays_of(WEEK, "*/15 * * * *", Recurring("digest", "0 7 * * *"))

    assert (found.fires, found.picked_up) == (7, 7)
    assert (found.worst_seconds, found.median_seconds) == (0.0, 0.0)
    assert found.most_piled == 1
    assert found.warning is None
    assert found.text() == "worst 0 s, median 0 s over 7 fires"


def test_a_job_between_two_starts_waits_for_the_next_one() -> None:
    found = delays_of(WEEK, "*/15 * * * *", Recurring("digest", "5 7 * * *"))

    assert (found.worst_seconds, found.median_seconds) == (600.0, 600.0)
    assert found.text() == "worst 10 min, median 10 min over 7 fires"


def test_the_median_and_the_worst_differ_when_the_waits_do() -> None:
    # Fires at :05, :20 and :50 of 07:00; drain runs on the hour and at :30.
    job = Recurring("three", "5,20,50 7 * * *")
    found = delays_of(ONE_DAY, "0,30 * * * *", job)

    assert found.fires == 3
    assert found.worst_seconds == 25 * 60  # 07:05 waits for 07:30
    assert found.median_seconds == 10 * 60  # 07:20 -> 07:30, 07:50 -> 08:00
    assert found.most_piled == 2  # 07:05 and 07:20 both go to the 07:30 run
    assert found.warning is not None


def test_an_hourly_job_under_runs_every_two_hours_piles_up_and_warns() -> None:
    found = delays_of(ONE_DAY, "0 */2 * * *", Recurring("poll", "0 * * * *", "UTC", "q"))

    # 24 fires, the last (23:00) after the day's last run (22:00).
    assert (found.fires, found.picked_up, found.not_picked_up) == (24, 23, 1)
    assert found.worst_seconds == 3600
    assert found.median_seconds == 0  # 12 fires on a run start, 11 an hour before one
    assert found.most_piled == 2
    assert found.warning == (
        "recurring job 'poll' (0 * * * *, UTC) fires more often than drain runs start: "
        "up to 2 of its fires come due for one run; with catch-up latest only the most "
        "recent is enqueued"
    )
    assert found.text() == (
        "worst 60 min, median 0 s over 23 fires; 1 after the last run: "
        "not picked up within the window"
    )


def test_the_warning_says_what_catch_up_all_does() -> None:
    found = delays_of(ONE_DAY, "0 */2 * * *", Recurring("poll", "0 * * * *", catch_up="all"))

    assert found.warning is not None
    assert found.warning.endswith("with catch-up all each one is enqueued")


def test_drain_runs_slower_than_the_job_but_never_two_fires_in_one_gap_do_not_warn() -> None:
    found = delays_of(WEEK, "0 */6 * * *", Recurring("daily", "30 7 * * *"))

    assert found.most_piled == 1
    assert found.warning is None
    assert found.worst_seconds == 4.5 * 3600  # 07:30 waits for 12:00


def test_a_job_with_no_run_after_its_fires_is_not_picked_up_within_the_window() -> None:
    # One drain run a week, Monday 09:00; the job fires daily at 10:00.
    found = delays_of(WEEK, "0 9 * * 1", Recurring("daily", "0 10 * * *"))

    assert (found.fires, found.picked_up) == (7, 0)
    assert found.worst_seconds is None and found.median_seconds is None
    assert found.text() == "not picked up within the window"
    assert found.as_dict()["worst_delay_seconds"] is None


def test_a_job_that_does_not_fire_in_the_window_says_so() -> None:
    found = delays_of(WEEK, "*/15 * * * *", Recurring("new-year", "0 0 1 1 *"))

    assert found.fires == 0
    assert found.text() == "does not fire within the window"


def test_each_side_fires_in_its_own_time_zone() -> None:
    # 08:00 in Berlin is 07:00 UTC in winter: on a UTC run start.
    on_start = delays_of(WEEK, "*/15 * * * *", Recurring("berlin", "0 8 * * *", "Europe/Berlin"))
    between = delays_of(WEEK, "*/15 * * * *", Recurring("berlin", "3 8 * * *", "Europe/Berlin"))
    # Drain runs at 07:00 Berlin (06:00 UTC); the job at 07:00 UTC waits 23 h, and
    # Sunday's fire comes after the window's last run.
    late = delays_of(WEEK, "0 7 * * *", Recurring("utc", "0 7 * * *"), zone="Europe/Berlin")

    assert on_start.worst_seconds == 0
    assert between.worst_seconds == 12 * 60
    assert (late.picked_up, late.worst_seconds) == (6, 23 * 3600)


def test_several_drain_schedules_merge_into_one_set_of_starts() -> None:
    drains = [RunSchedule("0 * * * *", 60.0), RunSchedule("30 7 * * *", 60.0)]
    [found] = fire_delays(WEEK, drains, [Recurring("digest", "25 7 * * *")])

    assert found.worst_seconds == 5 * 60


def test_the_json_carries_every_figure() -> None:
    found = delays_of(ONE_DAY, "0 */2 * * *", Recurring("poll", "0 * * * *", "UTC", "mail"))

    assert found.as_dict() == {
        "name": "poll",
        "cron": "0 * * * *",
        "time_zone": "UTC",
        "queue": "mail",
        "catch_up": "latest",
        "fires": 24,
        "picked_up": 23,
        "not_picked_up": 1,
        "worst_delay_seconds": 3600.0,
        "median_delay_seconds": 0.0,
        "most_fires_per_run": 2,
        "warning": found.warning,
    }


@pytest.mark.parametrize("job", ["0 * * * *", "*/5 * * * *", "7 3 * * 1-5"])
def test_every_fire_waits_less_than_the_gap_between_runs(job: str) -> None:
    found = delays_of(WEEK, "*/15 * * * *", Recurring("any", job))

    assert found.worst_seconds is not None
    assert 0 <= found.worst_seconds < 15 * 60
