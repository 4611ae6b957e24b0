"""The planning model on its own: exact figures from fixed inputs, no clock, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from drain.planning.cron import ScheduleError, fire_times, normalize
from drain.planning.plan import (
    PROVIDERS,
    Frame,
    Plan,
    ProviderName,
    RunSchedule,
    Trigger,
    make_plan,
    span_text,
)
from drain.planning.suggestions import suggest_in

MONDAY = datetime(2026, 11, 30, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3600.0
DAY = 86400.0


def plan_of(*expressions: str, d: float = 300, idle: float = 600, **options: Any) -> Plan:
    start = options.pop("start", MONDAY)
    schedules = [RunSchedule(expression, run_seconds=d) for expression in expressions]
    return make_plan(schedules, start=start, idle_timeout=idle, **options)


def test_hourly_runs_let_the_compute_sleep_three_quarters_of_the_time() -> None:
    result = plan_of("0 * * * *", d=300, idle=600)

    window = result.window
    assert (window.runs, window.resumes) == (168, 168)
    assert window.per_day(window.awake_seconds) == 6 * HOUR
    assert window.awake_share == 0.25
    assert window.longest_sleep_seconds == 45 * 60
    assert window.worst_wait_seconds == 60 * 60
    assert window.compute_hours_per_month == pytest.approx(182.5)
    assert result.suspends
    assert result.verdict == "suspends between runs"
    assert [day.start.date().isoformat() for day in result.days] == [
        "2026-11-30",
        "2026-12-01",
        "2026-12-02",
        "2026-12-03",
        "2026-12-04",
        "2026-12-05",
        "2026-12-06",
    ]
    for day in result.days:
        assert (day.runs, day.resumes, day.awake_seconds) == (24, 24, 6 * HOUR)
        assert (day.longest_sleep_seconds, day.worst_wait_seconds) == (45 * 60, 60 * 60)


def test_every_five_minutes_keeps_the_compute_awake_around_the_clock() -> None:
    result = plan_of("*/5 * * * *", d=60, idle=600)

    assert not result.suspends
    assert result.verdict == (
        "never suspends: runs are 5 min apart, a run keeps the compute awake 11 min"
    )
    assert [day.awake_seconds for day in result.days] == [DAY] * 7
    assert result.window.longest_sleep_seconds == 0
    # Awake since before the window started: not one resume in a week.
    assert result.window.resumes == 0
    assert result.window.runs == 7 * 288


def test_a_gap_equal_to_d_plus_t_is_not_enough_to_sleep() -> None:
    at_the_boundary = plan_of("*/15 * * * *", d=300, idle=600)
    one_second_shorter = plan_of("*/15 * * * *", d=299, idle=600)

    assert not at_the_boundary.suspends
    assert at_the_boundary.window.awake_share == 1.0
    # Each run's awake span ends as the next run starts: one span, no resume.
    assert at_the_boundary.window.resumes == 0
    assert one_second_shorter.suspends
    assert one_second_shorter.window.resumes == 7 * 96
    assert one_second_shorter.window.longest_sleep_seconds == 1


def test_neon_every_twenty_minutes() -> None:
    neon = PROVIDERS[ProviderName.NEON]
    result = plan_of("*/20 * * * *", d=120, idle=neon.idle_timeout, provider=neon)

    assert neon.idle_timeout == 300
    for day in result.days:
        assert (day.runs, day.resumes) == (72, 72)
        assert day.awake_seconds == pytest.approx(8.4 * HOUR)
        assert day.awake_share == pytest.approx(0.35)
    assert result.window.longest_sleep_seconds == 13 * 60
    assert result.provider is neon


def test_two_schedules_half_an_hour_apart_each_get_a_resume() -> None:
    result = plan_of("0 * * * *", "30 * * * *", d=300, idle=600)

    window = result.window
    assert (window.runs, window.resumes) == (336, 336)
    assert window.per_day(window.awake_seconds) == 12 * HOUR
    assert window.longest_sleep_seconds == 15 * 60
    assert window.worst_wait_seconds == 30 * 60
    assert result.verdict == "suspends between runs"


def test_runs_close_together_merge_into_one_awake_span() -> None:
    result = plan_of("0 * * * *", "5 * * * *", d=300, idle=600)

    window = result.window
    assert (window.runs, window.resumes) == (336, 168)
    # Awake from :00 to :20 every hour (the :05 run keeps it up until :20).
    assert window.per_day(window.awake_seconds) == 8 * HOUR
    assert window.longest_sleep_seconds == 40 * 60
    assert window.worst_wait_seconds == 55 * 60
    assert result.verdict == (
        "suspends between some runs: 168 of 336 runs start while the compute is still "
        "awake from an earlier one"
    )


def test_the_same_schedule_twice_doubles_the_runs_but_not_the_awake_time() -> None:
    once = plan_of("0 * * * *")
    twice = plan_of("0 * * * *", "0 * * * *")

    assert twice.window.runs == 2 * once.window.runs
    assert twice.window.resumes == once.window.resumes
    assert twice.window.awake_seconds == once.window.awake_seconds
    assert any("at the same time" in warning for warning in twice.warnings)


def test_day_of_month_and_day_of_week_combine_with_or() -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    result = plan_of("0 0 1,15 * 1", start=start, window=31 * DAY)

    days_with_runs = [day.start.day for day in result.days if day.runs]
    # The 1st and the 15th, and every Monday (the 7th, 14th, 21st, 28th).
    assert days_with_runs == [1, 7, 14, 15, 21, 28]


def test_worst_wait_per_day_counts_from_the_day_and_sleeps_count_whole() -> None:
    result = plan_of("0 9 * * 1-5", d=300, idle=600)

    monday, tuesday, _, _, friday, saturday, sunday = result.days
    # Monday opens in the weekend's sleep: from Friday 09:15 to Monday 09:00, whole.
    weekend = 3 * DAY - 15 * 60
    assert monday.longest_sleep_seconds == weekend
    assert tuesday.longest_sleep_seconds == DAY - 15 * 60
    assert friday.longest_sleep_seconds == weekend
    assert monday.worst_wait_seconds == 24 * HOUR
    # A job enqueued just after Friday's run waits until Monday 09:00.
    assert friday.worst_wait_seconds == 72 * HOUR
    assert saturday.worst_wait_seconds == 24 * HOUR + 33 * HOUR
    assert (saturday.runs, saturday.awake_seconds) == (0, 0)
    assert saturday.longest_sleep_seconds == sunday.longest_sleep_seconds == weekend
    assert sunday.worst_wait_seconds == 33 * HOUR
    assert result.window.worst_wait_seconds == 72 * HOUR


def test_the_longest_sleep_is_whole_at_the_window_s_edges() -> None:
    """Office hours over a week from Monday: the weekend's sleep is 63.75 h, not 54.75 h.

    Cut at the window's end it would run from Friday 17:15 to Monday 00:00 only;
    it ends at Monday 09:00, the first run after the window, as the worst wait does.
    """
    result = plan_of("0 9-17 * * 1-5", d=300, idle=600)

    weekend = 63 * HOUR + 45 * 60
    assert result.window.longest_sleep_seconds == weekend
    nights = [day.longest_sleep_seconds for day in result.days]
    assert nights[:4] == [weekend, 15 * HOUR + 45 * 60, 15 * HOUR + 45 * 60, 15 * HOUR + 45 * 60]
    assert nights[4:] == [weekend] * 3
    # A window that opens mid-sleep counts it from the last run before the window.
    weekend_first = plan_of("0 9-17 * * 1-5", start=MONDAY + timedelta(days=5), window=3 * DAY)
    assert [day.longest_sleep_seconds for day in weekend_first.days] == [weekend] * 3


def test_a_run_just_before_the_window_keeps_the_compute_awake_into_it() -> None:
    result = plan_of("55 23 * * *", d=300, idle=600)

    monday = result.days[0]
    # Sunday 23:55 keeps it awake until Monday 00:10; Monday's own run starts at 23:55.
    assert monday.awake_seconds == 10 * 60 + 5 * 60
    assert (monday.runs, monday.resumes) == (1, 1)


def test_macros_are_the_expressions_they_stand_for() -> None:
    assert normalize("@hourly") == "0 * * * *"
    assert normalize("@DAILY") == "0 0 * * *"
    assert plan_of("@hourly").window == plan_of("0 * * * *").window


def test_spring_forward_day_has_23_hourly_runs() -> None:
    start = datetime(2026, 3, 23, tzinfo=BERLIN)
    result = plan_of("0 * * * *", start=start, timezone="Europe/Berlin")

    assert [day.runs for day in result.days] == [24, 24, 24, 24, 24, 24, 23]
    sunday = result.days[-1]
    assert sunday.start.date().isoformat() == "2026-03-29"
    assert sunday.seconds == 23 * HOUR
    assert sunday.awake_share == 0.25
    # Seven days on the wall clock, one hour short of 168 real hours.
    assert result.window.seconds == 167 * HOUR


def test_fall_back_day_has_25_hourly_runs() -> None:
    # Cron runs a job whose hour field is '*' in both copies of the repeated hour,
    # and that day really has 25 hours: 25 runs is right.
    start = datetime(2026, 10, 19, tzinfo=BERLIN)
    result = plan_of("0 * * * *", start=start, timezone="Europe/Berlin")

    assert [day.runs for day in result.days] == [24, 24, 24, 24, 24, 24, 25]
    assert result.days[-1].seconds == 25 * HOUR
    assert result.window.seconds == 169 * HOUR


def test_a_fixed_time_job_runs_once_when_the_clock_falls_back() -> None:
    begin = datetime(2026, 10, 25, tzinfo=BERLIN).timestamp()
    fires, _ = fire_times("30 2 * * *", BERLIN, begin, begin + 25 * HOUR)

    assert [datetime.fromtimestamp(f, BERLIN).isoformat() for f in fires] == [
        "2026-10-25T02:30:00+02:00"
    ]


def test_a_fixed_time_job_in_the_skipped_hour_runs_at_three() -> None:
    begin = datetime(2026, 3, 29, tzinfo=BERLIN).timestamp()
    fires, following = fire_times("30 2 * * *", BERLIN, begin, begin + 23 * HOUR)

    assert [datetime.fromtimestamp(f, BERLIN).isoformat() for f in fires] == [
        "2026-03-29T03:00:00+02:00"
    ]
    assert datetime.fromtimestamp(following, BERLIN).isoformat() == "2026-03-30T02:30:00+02:00"


def test_a_schedule_fires_in_its_own_time_zone() -> None:
    berlin_nine = RunSchedule("0 9 * * *", run_seconds=300, timezone="Europe/Berlin")
    result = make_plan([berlin_nine], start=MONDAY, window=DAY, timezone="UTC")

    begin = MONDAY.timestamp()
    fires, _ = fire_times("0 9 * * *", BERLIN, begin, begin + DAY)
    assert datetime.fromtimestamp(fires[0], UTC).hour == 8
    # Awake 08:00 to 08:15 UTC, so the sleep runs from 08:15 to the next day's 08:00.
    assert result.days[0].longest_sleep_seconds == 23 * HOUR + 45 * 60


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("61 * * * *", "out of range"),
        ("* * *", "five fields"),
        ("0 * * * * *", "five fields"),
        ("@reboot", "@hourly"),
        ("", "five fields"),
    ],
)
def test_a_bad_expression_is_refused_with_the_reason(expression: str, reason: str) -> None:
    with pytest.raises(ScheduleError, match=reason) as caught:
        plan_of(expression)
    assert "\n" not in str(caught.value)


def test_a_schedule_that_never_fires_is_refused() -> None:
    with pytest.raises(ScheduleError, match="never fires"):
        plan_of("0 0 30 2 *")


def test_a_schedule_that_does_not_fire_in_the_window_is_refused() -> None:
    with pytest.raises(ScheduleError, match="no schedule fires between 2026-11-30"):
        plan_of("0 0 1 1 *")


def test_a_schedule_outside_the_window_is_fine_next_to_one_inside() -> None:
    result = plan_of("0 0 1 1 *", "0 * * * *")
    assert result.window.runs == 168


def test_the_window_start_must_carry_a_time_zone() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        plan_of("0 * * * *", start=datetime(2026, 11, 30))


def test_unknown_time_zone_is_a_usage_error() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'"):
        plan_of("0 * * * *", timezone="Mars/Olympus")


def warnings_of(schedule: RunSchedule, **options: Any) -> tuple[str, ...]:
    return make_plan([schedule], start=MONDAY, window=DAY, **options).warnings


def test_overlapping_runs_are_flagged_and_back_to_back_runs_are_not() -> None:
    longer = warnings_of(RunSchedule("*/5 * * * *", run_seconds=301))
    back_to_back = warnings_of(RunSchedule("*/5 * * * *", run_seconds=300))

    assert any(w.startswith("runs can overlap") and "5 min apart" in w for w in longer)
    assert not any("overlap" in w for w in back_to_back)


def test_a_lease_shorter_than_the_budget_is_flagged() -> None:
    short = warnings_of(RunSchedule("0 * * * *", 300, max_seconds=600, lease_seconds=300))
    equal = warnings_of(RunSchedule("0 * * * *", 300, max_seconds=300, lease_seconds=300))

    assert any("lease (5 min) is shorter than the budget (10 min)" in w for w in short)
    assert not any("lease" in w for w in equal)


def test_lambda_budget_over_900_seconds_is_flagged() -> None:
    over = RunSchedule("0 * * * *", 300, max_seconds=895, grace_seconds=10, trigger=Trigger.LAMBDA)
    within = RunSchedule(
        "0 * * * *", 300, max_seconds=890, grace_seconds=10, trigger=Trigger.LAMBDA
    )
    not_lambda = RunSchedule("0 * * * *", 300, max_seconds=1800, trigger=Trigger.CRON)

    assert any("Lambda's limit of 900 s" in w for w in warnings_of(over))
    assert not any("Lambda" in w for w in warnings_of(within))
    assert not any("Lambda" in w for w in warnings_of(not_lambda))


def test_github_actions_cannot_run_more_often_than_every_five_minutes() -> None:
    too_often = RunSchedule("*/2 * * * *", 60, trigger=Trigger.GITHUB_ACTIONS)
    fine = RunSchedule("*/5 * * * *", 60, trigger=Trigger.GITHUB_ACTIONS)

    assert any("GitHub Actions" in w and "every 2 min" in w for w in warnings_of(too_often))
    assert not any("GitHub" in w for w in warnings_of(fine))


def test_kubernetes_deadline_shorter_than_budget_plus_grace_is_flagged() -> None:
    def job(deadline: float) -> RunSchedule:
        return RunSchedule(
            "0 * * * *",
            300,
            max_seconds=300,
            grace_seconds=10,
            deadline_seconds=deadline,
            trigger=Trigger.KUBERNETES,
            source="cronjob.yaml: CronJob drain",
        )

    assert any(
        w.startswith("activeDeadlineSeconds (300 s) of cronjob.yaml: CronJob drain")
        and "Kubernetes kills the run" in w
        for w in warnings_of(job(300))
    )
    assert not any("activeDeadlineSeconds" in w for w in warnings_of(job(310)))


def test_aurora_cannot_pause_after_less_than_300_seconds() -> None:
    aurora = PROVIDERS[ProviderName.AURORA]
    notes = warnings_of(RunSchedule("0 * * * *", 300), provider=aurora, idle_timeout=120)
    assert any("Aurora's auto-pause delay is 300 s to 1 day" in w for w in notes)


def test_a_wait_longer_than_max_wait_is_flagged() -> None:
    notes = warnings_of(RunSchedule("0 * * * *", 300), max_wait=1800)
    assert any("wait 60 min for a run, longer than --max-wait 30 min" in w for w in notes)


def test_suggest_within_an_hour_proposes_hourly_first() -> None:
    found = suggest_in(Frame(MONDAY, idle_timeout=600), RunSchedule("", 300), max_wait=HOUR)

    labels = [candidate.label for candidate, _ in found.sleeping]
    assert labels == ["every hour", "every 30 min", "every 20 min"]
    first, plan = found.sleeping[0]
    assert first.expression == "0 * * * *"
    assert plan.window.per_day(plan.window.awake_seconds) == 6 * HOUR
    assert "every 15 min" in [candidate.label for candidate in found.sleepless]
    assert found.nearest is None


def test_suggest_says_when_no_schedule_within_the_wait_lets_it_sleep() -> None:
    found = suggest_in(Frame(MONDAY, idle_timeout=600), RunSchedule("", 300), max_wait=600)

    assert found.sleeping == ()
    assert [c.label for c in found.sleepless] == [
        "every 1 min",
        "every 2 min",
        "every 3 min",
        "every 4 min",
        "every 5 min",
        "every 6 min",
        "every 10 min",
    ]
    assert found.nearest is not None
    assert found.nearest[0].expression == "*/20 * * * *"


def test_suggest_with_a_day_to_spare_proposes_once_a_day() -> None:
    found = suggest_in(Frame(MONDAY, idle_timeout=600), RunSchedule("", 300), max_wait=DAY)
    assert found.sleeping[0][0].expression == "0 0 * * *"


def test_suggest_for_github_actions_skips_what_it_cannot_run() -> None:
    template = RunSchedule("", 60, trigger=Trigger.GITHUB_ACTIONS)
    found = suggest_in(Frame(MONDAY, idle_timeout=120), template, max_wait=600)

    proposed = [c.interval for c, _ in found.sleeping] + [c.interval for c in found.sleepless]
    assert min(proposed) == 300


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (42, "42 s"),
        (90, "1 min 30 s"),
        (300, "5 min"),
        (660, "11 min"),
        (3600, "60 min"),
        (8.4 * HOUR, "8 h 24 min"),
        (72 * HOUR, "3 d"),
    ],
)
def test_span_text(seconds: float, text: str) -> None:
    assert span_text(seconds) == text
