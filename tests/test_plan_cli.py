"""`drain plan` through the command line, as a user (or a deploy pipeline) runs it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner, Result

from drain.cli import app
from drain.planning.cron import CatchUp
from drain.store import recurring

MONDAY = ["--start", "2026-11-30"]
DATES = ["11-30", "12-01", "12-02", "12-03", "12-04", "12-05", "12-06"]
FIRST_LINE_OF_ERROR = "drain: error: "


@pytest.fixture(autouse=True)
def no_drain_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No DRAIN_* variable from the environment changes what a test asks for."""
    for name in list(os.environ):
        if name.startswith("DRAIN_") or name == "DATABASE_URL":
            monkeypatch.delenv(name)


def drain_plan(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, ["plan", *args], env=env)


def plan_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = drain_plan(*args, "--json")
    assert result.stderr == "", result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return result.exit_code, data


def assert_usage_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(FIRST_LINE_OF_ERROR)
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def test_hourly_schedule_suspends_and_exits_0() -> None:
    result = drain_plan("0 * * * *", "--run-seconds", "300", "--idle-timeout", "600", *MONDAY)

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    day_row = re.compile(r"(Mon|Tue|Sat|Sun) [\d-]+ +\d+ +\d")
    days = [line.split() for line in lines if day_row.match(line)]
    monday = ["Mon", "2026-11-30", "24", "24", "6.0", "h", "25", "%", "182.5"]
    monday += ["45", "min", "60", "min"]
    assert days[0] == monday
    assert [day[1] for day in days] == ["2026-11-30", "2026-12-01", "2026-12-05", "2026-12-06"]
    assert all(day[2:] == monday[2:] for day in days)
    window = next(line for line in lines if line.startswith("7 days"))
    assert window.split()[2:5] == ["168", "168", "42.0"]
    assert "a day on average: 24 runs, 24 resumes, 6.0 h awake (25 %)" in lines
    assert "verdict: suspends between runs" in lines


def test_hourly_schedule_figures_in_json() -> None:
    code, data = plan_json("0 * * * *", "--run-seconds", "5m", "--idle-timeout", "10m", *MONDAY)

    assert code == 0
    window = data["window"]
    assert (window["runs"], window["resumes"]) == (168, 168)
    assert window["per_day"] == {"runs": 24.0, "resumes": 24.0, "awake_hours": 6.0}
    assert window["awake_share"] == 0.25
    assert window["longest_sleep_seconds"] == 2700
    assert window["worst_wait_seconds"] == 3600
    assert [day["date"] for day in data["days"]] == [f"2026-{d}" for d in DATES]
    assert data["suspends"] is True
    assert data["verdict"] == "suspends between runs"


def test_every_five_minutes_never_suspends_and_exits_1() -> None:
    result = drain_plan("*/5 * * * *", "--run-seconds", "60", *MONDAY)

    assert result.exit_code == 1, result.output
    assert (
        "verdict: never suspends: runs are 5 min apart, a run keeps the compute awake 11 min"
        in result.stdout.splitlines()
    )
    code, data = plan_json("*/5 * * * *", "--run-seconds", "60", *MONDAY)
    assert code == 1
    assert [day["awake_hours"] for day in data["days"]] == [24.0] * 7
    assert (data["gap_seconds"], data["awake_span_seconds"]) == (300, 660)


def test_a_gap_of_exactly_d_plus_t_never_suspends() -> None:
    result = drain_plan("*/15 * * * *", "--run-seconds", "300", "--idle-timeout", "600", *MONDAY)

    assert result.exit_code == 1, result.output
    assert "runs are 15 min apart, a run keeps the compute awake 15 min" in result.stdout
    assert "a day on average: 96 runs, 0 resumes, 24.0 h awake (100 %)" in result.stdout


def test_neon_preset_sets_t_and_prints_its_rule() -> None:
    args = ["*/20 * * * *", "--provider", "neon", "--run-seconds", "120", *MONDAY]
    result = drain_plan(*args)
    code, data = plan_json(*args)

    assert result.exit_code == 0 and code == 0
    assert data["idle_timeout_seconds"] == 300
    for day in data["days"]:
        assert (day["runs"], day["resumes"]) == (72, 72)
        assert day["awake_hours"] == pytest.approx(8.4)
        assert day["awake_share"] == pytest.approx(0.35)
    rule = next(line for line in result.stdout.splitlines() if line.startswith("rule: "))
    assert "5 min without active queries" in rule
    assert "idle-in-transaction session counts as active" in rule
    assert "8.4 h awake (35 %)" in result.stdout


def test_aurora_and_article_presets() -> None:
    _, aurora = plan_json("0 * * * *", "--provider", "aurora", *MONDAY)
    _, article = plan_json("0 * * * *", "--provider", "article", *MONDAY)

    assert aurora["idle_timeout_seconds"] == 300
    assert "no user connection" in aurora["provider_rule"]
    assert "15 s" in aurora["provider_rule"]
    assert article["idle_timeout_seconds"] == 600


def test_an_explicit_idle_timeout_wins_over_the_preset() -> None:
    _, data = plan_json("0 * * * *", "--provider", "neon", "--idle-timeout", "15m", *MONDAY)
    assert data["idle_timeout_seconds"] == 900
    assert data["provider"] == "neon"


def test_two_schedules_merge() -> None:
    code, data = plan_json("0 * * * *", "30 * * * *", "--run-seconds", "300", *MONDAY)

    assert code == 0
    assert (data["window"]["runs"], data["window"]["resumes"]) == (336, 336)
    assert data["window"]["per_day"]["awake_hours"] == 12.0
    assert data["window"]["worst_wait_seconds"] == 1800

    code, data = plan_json("0 * * * *", "5 * * * *", "--run-seconds", "300", *MONDAY)
    assert (data["window"]["runs"], data["window"]["resumes"]) == (336, 168)
    assert data["window"]["per_day"]["awake_hours"] == 8.0


CRONTAB = """\
# the queue's crontab
MAILTO=ops@example.com
SHELL=/bin/sh

0 3 * * * /usr/local/bin/backup.sh --all
*/20 * * * * cd /srv/app && drain run --app app.jobs --max-seconds 120 --lease=10m
@reboot drain run --app app.jobs
"""

CRONJOB = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: drain-settings
data:
  queue: emails
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: drain
spec:
  schedule: "*/20 * * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      activeDeadlineSeconds: 600
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: drain
              image: registry.example.com/app:1.4
              command: ["drain", "run"]
              args: ["--app", "app.jobs", "--lease", "10m"]
              env:
                - name: DRAIN_MAX_SECONDS
                  value: "120"
"""


def figures(data: dict[str, Any]) -> tuple[Any, ...]:
    return data["days"], data["window"], data["verdict"], data["suspends"]


def test_from_a_crontab_and_a_cronjob_gives_the_same_figures(tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text(CRONTAB)
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(CRONJOB)

    _, direct = plan_json("*/20 * * * *", "--run-seconds", "120", *MONDAY)
    _, from_crontab = plan_json("--from", str(crontab), *MONDAY)
    _, from_cronjob = plan_json("--from", str(manifest), *MONDAY)

    assert direct["window"]["per_day"]["runs"] == 72
    assert figures(from_crontab) == figures(direct)
    assert figures(from_cronjob) == figures(direct)
    # Only the line that runs drain counts; the backup job is someone else's.
    [line] = from_crontab["schedules"]
    assert (line["source"], line["max_seconds"], line["lease_seconds"]) == (
        f"{crontab}:6",
        120,
        600,
    )
    [job] = from_cronjob["schedules"]
    assert (job["trigger"], job["deadline_seconds"], job["max_seconds"]) == ("kubernetes", 600, 120)


def test_a_directory_reads_its_schedule_files(tmp_path: Path) -> None:
    (tmp_path / "crontab").write_text(CRONTAB)
    (tmp_path / "cronjob.yaml").write_text(CRONJOB)
    (tmp_path / "README.md").write_text("# deploy\n")

    _, data = plan_json("--from", str(tmp_path), *MONDAY)

    # Each file of a directory on its own timeline, in the order of their names.
    assert [plan["from"] for plan in data["plans"]] == [
        str(tmp_path / "cronjob.yaml"),
        str(tmp_path / "crontab"),
    ]
    assert [[s["trigger"] for s in p["schedules"]] for p in data["plans"]] == [
        ["kubernetes"],
        ["cron"],
    ]
    assert data["skipped"] == [
        {
            "file": "1 other file(s) (README.md)",
            "reason": "not a crontab, a CronJob manifest, a workflow or a systemd timer",
        }
    ]


def test_a_cronjob_time_zone_and_deadline_reach_the_report(tmp_path: Path) -> None:
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(
        CRONJOB.replace('"*/20 * * * *"', '"0 9 * * *"\n  timeZone: Europe/Berlin').replace(
            "activeDeadlineSeconds: 600", "activeDeadlineSeconds: 100"
        )
    )

    result = drain_plan("--from", str(manifest), *MONDAY)

    assert "0 9 * * *  (Europe/Berlin" in result.stdout
    assert "warning: activeDeadlineSeconds (100 s)" in result.stdout
    _, data = plan_json("--from", str(manifest), *MONDAY)
    # 09:00 in Berlin is 08:00 UTC in winter: awake until 08:12, asleep until 08:00 the next day.
    assert data["days"][0]["longest_sleep_seconds"] == 23 * 3600 + 48 * 60


def test_a_systemd_timer_with_its_service(tmp_path: Path) -> None:
    (tmp_path / "drain.timer").write_text("[Timer]\nOnCalendar=*:0/20\nPersistent=true\n")
    (tmp_path / "drain.service").write_text(
        "[Service]\nExecStart=/usr/bin/drain run --app app.jobs --max-seconds 120\n"
    )

    _, direct = plan_json("*/20 * * * *", "--run-seconds", "120", *MONDAY)
    _, timer = plan_json("--from", str(tmp_path / "drain.timer"), *MONDAY)

    assert figures(timer) == figures(direct)


def test_a_service_timeout_shorter_than_the_budget_is_flagged(tmp_path: Path) -> None:
    (tmp_path / "drain.timer").write_text("[Timer]\nOnCalendar=hourly\n")
    (tmp_path / "drain.service").write_text(
        "[Service]\nType=oneshot\nTimeoutStartSec=5min 10s\n"
        "ExecStart=/usr/bin/drain run --max-seconds 300 --grace-seconds 30\n"
    )

    result = drain_plan("--from", str(tmp_path / "drain.timer"), *MONDAY)

    assert "warning: TimeoutStartSec (310 s)" in result.stdout
    assert "budget plus grace (330 s): systemd kills the run" in result.stdout


REPO = Path(__file__).resolve().parents[1]
DEPLOY_EXAMPLES = [
    "deploy/cron/drain.crontab",
    "deploy/systemd/drain.timer",
    "deploy/kubernetes/cronjob.yaml",
    "deploy/github-actions/drain.yml",
    "deploy/keda/scaledjob.yaml",
]


@pytest.mark.parametrize("example", DEPLOY_EXAMPLES)
def test_every_deploy_example_lets_the_compute_sleep(example: str) -> None:
    # Each file's header promises that drain plan --from it exits 0.
    result = drain_plan("--from", str(REPO / example), *MONDAY)

    assert result.exit_code == 0, result.output
    assert "verdict: suspends between runs" in result.stdout
    assert "warning:" not in result.stdout


def test_the_deploy_directory_plans_each_file_on_its_own() -> None:
    """The examples are alternatives: merged, they overlapped and hid each one's figures."""
    code, data = plan_json("--from", str(REPO / "deploy"), *MONDAY)
    result = drain_plan("--from", str(REPO / "deploy"), *MONDAY)

    assert code == 0 and data["suspends"] is True
    plans = {Path(p["from"]).name: p for p in data["plans"]}
    assert sorted(plans) == [
        "cronjob.yaml", "drain.crontab", "drain.timer", "drain.yml", "scaledjob.yaml",
    ]  # fmt: skip
    triggers = {name: [s["trigger"] for s in p["schedules"]] for name, p in plans.items()}
    assert triggers == {
        "cronjob.yaml": ["kubernetes"],
        "drain.crontab": ["cron"],
        "drain.timer": ["systemd"],
        "drain.yml": ["github-actions"],
        "scaledjob.yaml": ["kubernetes"],
    }
    assert all(p["warnings"] == [] for p in data["plans"])
    reasons = {Path(item["file"]).name: item["reason"] for item in data["skipped"]}
    assert 'plan it as: drain plan "7 * * * *" --trigger lambda' in reasons["template.yaml"]
    timer = REPO / "deploy" / "systemd" / "drain.timer"
    assert reasons["drain.service"].endswith(f"its timer does: --from {timer}")
    assert result.exit_code == 0, result.output
    assert "overlap" not in result.stdout
    assert f"== {timer} ==" in result.stdout
    assert f"skipped {REPO / 'deploy' / 'aws-lambda' / 'template.yaml'}: " in result.stdout
    assert result.stdout.rstrip().endswith("each of the 5 plans suspends between runs")


def test_a_systemd_service_points_to_its_timer(tmp_path: Path) -> None:
    (tmp_path / "nightly.service").write_text("[Service]\nExecStart=drain run --app tasks\n")
    (tmp_path / "every-hour.timer").write_text("[Timer]\nOnCalendar=hourly\nUnit=nightly.service\n")

    result = drain_plan("--from", str(tmp_path / "nightly.service"), *MONDAY)

    assert_usage_error(
        result, "a systemd service holds no schedule", f"--from {tmp_path / 'every-hour.timer'}"
    )
    (tmp_path / "every-hour.timer").unlink()
    alone = drain_plan("--from", str(tmp_path / "nightly.service"), *MONDAY)
    assert_usage_error(alone, "plan the .timer that starts nightly.service")


def test_the_help_examples_name_files_that_exist() -> None:
    result = drain_plan("--help")

    named = re.findall(r"drain plan --from (\S+)", result.stdout)
    assert named, result.stdout
    for name in named:
        assert (REPO / name).exists(), name


WORKFLOW = """\
name: drain
on:
  schedule:
    - cron: "*/20 * * * *"
  workflow_dispatch:
jobs:
  drain:
    runs-on: ubuntu-24.04
    timeout-minutes: 2
    steps:
      - uses: actions/checkout@v4
      - env:
          DRAIN_DSN: ${{ secrets.DRAIN_DSN }}
        run: |
          pip install pg-drain
          drain run --app app.jobs --max-seconds 120 --grace-seconds 10
"""


def test_a_github_actions_workflow_runs_in_utc(tmp_path: Path) -> None:
    workflow = tmp_path / "drain.yml"
    workflow.write_text(WORKFLOW)

    _, direct = plan_json("*/20 * * * *", "--run-seconds", "120", *MONDAY)
    _, berlin = plan_json("--from", str(workflow), "--tz", "Europe/Berlin", *MONDAY)
    result = drain_plan("--from", str(workflow), *MONDAY)

    [schedule] = berlin["schedules"]
    assert (schedule["trigger"], schedule["timezone"]) == ("github-actions", "UTC")
    assert berlin["window"]["runs"] == direct["window"]["runs"] == 504
    assert "warning: timeout-minutes (120 s)" in result.stdout
    assert "budget plus grace (130 s): GitHub Actions cancels the run" in result.stdout


def test_suggest_within_an_hour_proposes_the_hourly_schedule_first() -> None:
    args = ["--suggest", "--max-wait", "1h", "--run-seconds", "300", "--idle-timeout", "600"]
    result = drain_plan(*args, *MONDAY)

    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("  ")]
    assert [" ".join(row[:5]) for row in rows] == ["0 * * * *", "*/30 * * * *", "*/20 * * * *"]
    assert "6.0 h awake a day (25 %)" in result.stdout.splitlines()[3]
    code, data = plan_json(*args, *MONDAY)
    assert code == 0
    assert data["suggestions"][0]["expression"] == "0 * * * *"
    assert data["can_sleep"] is True


def test_suggest_within_ten_minutes_says_no_schedule_lets_it_sleep() -> None:
    args = ["--suggest", "--max-wait", "10m", "--run-seconds", "300", "--idle-timeout", "600"]
    result = drain_plan(*args, *MONDAY)

    assert result.exit_code == 1, result.output
    assert (
        "no schedule with a worst wait of at most 10 min lets the compute sleep: "
        "runs would have to be more than 15 min apart"
    ) in result.stdout
    assert "*/20 * * * *" in result.stdout.split("the shortest wait that lets it sleep:")[1]
    code, data = plan_json(*args, *MONDAY)
    assert (code, data["can_sleep"], data["suggestions"]) == (1, False, [])
    assert data["nearest"]["expression"] == "*/20 * * * *"


def test_suggest_needs_max_wait_and_no_schedules() -> None:
    assert_usage_error(drain_plan("--suggest"), "--max-wait")
    assert_usage_error(drain_plan("--suggest", "--max-wait", "1h", "0 * * * *"), "no schedules")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["61 * * * *"], ["bad cron expression '61 * * * *'", "out of range"]),
        (
            ["*/61 * * * *"],
            [
                "bad cron expression '*/61 * * * *': step /61 is out of range: "
                "the minute field takes 0-59, and steps of 1 to 59"
            ],
        ),
        (["0-59/1000 * * * *"], ["step /1000 is out of range: the minute field takes 0-59"]),
        (["0 */25 * * *"], ["step /25 is out of range: the hour field takes 0-23"]),
        (["0-70 * * * *"], ["70 is out of range: the minute field takes 0-59"]),
        (["0 * * *"], ["five fields", "not 4"]),
        (["0"], ["quote the whole expression"]),
        (["0 0 30 2 *"], ["'0 0 30 2 *' never fires"]),
        (["0 0 1 1 *", *MONDAY], ["no schedule fires between 2026-11-30 00:00"]),
        (["0 * * * *", "--run-seconds", "5 minutes"], ["--run-seconds: not a duration"]),
        (["0 * * * *", "--window", "a week"], ["--window: not a duration"]),
        (["0 * * * *", "--idle-timeout", "-1"], ["--idle-timeout"]),
        (["0 * * * *", "--tz", "Europe/Atlantis"], ["unknown time zone"]),
        (["0 * * * *", "--start", "next monday"], ["--start: not an ISO 8601"]),
        (["--from", "/nonexistent/crontab"], ["cannot read /nonexistent/crontab"]),
        ([], ["give a schedule"]),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], fragments: list[str]) -> None:
    assert_usage_error(drain_plan(*args), *fragments)


def test_a_bad_line_in_a_crontab_names_the_file_and_line(tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text("# jobs\n*/10 * * * * drain run --max-seconds soon\n")

    assert_usage_error(drain_plan("--from", str(crontab)), f"{crontab}:2", "--max-seconds")


def test_a_bad_expression_in_a_cronjob_names_the_cronjob(tmp_path: Path) -> None:
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(CRONJOB.replace('"*/20 * * * *"', '"*/20 * * *"'))

    assert_usage_error(
        drain_plan("--from", str(manifest)), f"{manifest}: CronJob drain: bad cron expression"
    )


def test_a_step_beyond_its_field_in_a_deploy_file_names_the_file_and_the_field(
    tmp_path: Path,
) -> None:
    """croniter fires these at the field's first value: hourly, where cron refuses them."""
    crontab = tmp_path / "crontab"
    crontab.write_text("# jobs\n*/61 * * * * drain run --max-seconds 60\n")
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(CRONJOB.replace('"*/20 * * * *"', '"0 */25 * * *"'))

    assert_usage_error(
        drain_plan("--from", str(crontab)),
        f"{crontab}:2",
        "step /61 is out of range: the minute field takes 0-59",
    )
    assert_usage_error(
        drain_plan("--from", str(manifest)),
        f"{manifest}: CronJob drain: bad cron expression '0 */25 * * *': step /25 is out of "
        "range: the hour field takes 0-23",
    )


def test_a_stored_cron_with_a_step_beyond_its_field_is_refused_by_name(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    conn.execute(
        "INSERT INTO drain_schedules (jobs_table, name, cron, queue, next_fire) "
        "VALUES ('public.jobs', 'odd', '0-59/1000 * * * *', 'mail', now())"
    )
    assert_usage_error(
        drain_plan("0 * * * *", "--dsn", dsn, "--schedules-from-db", *MONDAY),
        "recurring job 'odd': bad cron expression '0-59/1000 * * * *': step /1000 is out of range",
    )


def test_schedules_are_checked_before_connecting_for_history() -> None:
    result = drain_plan("61 * * * *", "--dsn", "postgresql://nobody@db.invalid/x")
    assert_usage_error(result, "out of range")


def test_daylight_saving_days_in_berlin() -> None:
    _, spring = plan_json("0 * * * *", "--tz", "Europe/Berlin", "--start", "2026-03-23")
    _, autumn = plan_json("0 * * * *", "--tz", "Europe/Berlin", "--start", "2026-10-19")

    assert [day["runs"] for day in spring["days"]] == [24] * 6 + [23]
    assert spring["days"][6]["date"] == "2026-03-29"
    assert spring["days"][6]["seconds"] == 23 * 3600
    assert [day["runs"] for day in autumn["days"]] == [24] * 6 + [25]
    assert autumn["days"][6]["date"] == "2026-10-25"


def test_trigger_limits_are_checked() -> None:
    lam = drain_plan("0 * * * *", "--trigger", "lambda", "--max-seconds", "15m", *MONDAY)
    gha = drain_plan("*/2 * * * *", "--trigger", "github-actions", "--run-seconds", "30", *MONDAY)

    assert "warning: the budget plus grace (910 s) is over AWS Lambda's limit of 900 s" in (
        lam.stdout
    )
    assert "warning: GitHub Actions runs a schedule at most every 5 min" in gha.stdout


def test_max_wait_without_suggest_warns_about_a_slower_schedule() -> None:
    result = drain_plan("0 */2 * * *", "--max-wait", "1h", *MONDAY)
    assert "warning: a job can wait 2 h for a run, longer than --max-wait 60 min" in result.stdout


def test_every_option_reads_its_environment_variable() -> None:
    env = {
        "DRAIN_RUN_SECONDS": "120",
        "DRAIN_PROVIDER": "neon",
        "DRAIN_START": "2026-11-30",
        "DRAIN_WINDOW": "1d",
        "DRAIN_COMPUTE_UNITS": "2",
    }
    result = drain_plan("*/20 * * * *", "--json", env=env)
    data = json.loads(result.stdout)

    assert data["schedules"][0]["run_seconds"] == 120
    assert data["idle_timeout_seconds"] == 300
    assert len(data["days"]) == 1
    assert data["window"]["compute_hours_per_month"] == pytest.approx(0.35 * 730 * 2)


def test_help_carries_an_example() -> None:
    result = CliRunner().invoke(app, ["plan", "--help"])

    assert result.exit_code == 0
    assert "Examples:" in result.stdout
    assert 'drain plan "*/20 * * * *"' in result.stdout


def test_run_seconds_on_the_command_line_needs_no_database() -> None:
    result = drain_plan(
        "0 * * * *", "--run-seconds", "60", "--dsn", "postgresql://nobody@db.invalid/x", *MONDAY
    )
    assert result.exit_code == 0, result.output
    assert "d = 1 min, --run-seconds" in result.stdout


def record_runs(conn: psycopg.Connection[Any], table: str, seconds: list[float], ago: str) -> None:
    conn.execute(
        "INSERT INTO drain_runs (jobs_table, started_at, finished_at, seconds, claimed, done, "
        "retried, failed, lost, reaped, released, archived, exit_reason, exit_code) "
        "SELECT %s, now() - %s::interval, now() - %s::interval, s, 0, 0, 0, 0, 0, 0, 0, 0, "
        "'drained', 0 FROM unnest(%s::float8[]) AS s",
        (table, ago, ago, seconds),
    )


def test_history_takes_d_from_the_recorded_runs(conn: psycopg.Connection[Any], dsn: str) -> None:
    record_runs(conn, "public.jobs", [10.0 * n for n in range(1, 21)], "1 day")
    record_runs(conn, "public.jobs", [3000.0] * 5, "10 days")
    record_runs(conn, "other.jobs", [3000.0] * 5, "1 hour")

    result = drain_plan("0 * * * *", "--dsn", dsn, *MONDAY)

    # percentile_cont(0.95) of 10, 20, ..., 200 s is 190.5 s, planned as measured.
    assert result.exit_code == 0, result.output
    assert "d = 3 min 10.5 s, the 95th percentile of 20 runs over the last 7 days" in result.stdout
    _, data = plan_json("0 * * * *", "--dsn", dsn, *MONDAY)
    assert data["schedules"][0]["run_seconds"] == 190.5
    assert data["history_runs"] == 20
    assert data["window"]["awake_seconds"] == 168 * (190.5 + 600)

    _, longer = plan_json("0 * * * *", "--dsn", dsn, "--history-days", "30", *MONDAY)
    assert longer["history_runs"] == 25
    assert longer["schedules"][0]["run_seconds"] == 3000


def test_history_keeps_a_short_run_time_as_measured(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    """Runs of 2.2 s are planned as 2.2 s: rounded up to 3 s, d would be a third too long."""
    record_runs(conn, "public.jobs", [2.2] * 10, "1 hour")

    result = drain_plan("0 * * * *", "--dsn", dsn, "--idle-timeout", "60", *MONDAY)
    _, data = plan_json("0 * * * *", "--dsn", dsn, "--idle-timeout", "60", *MONDAY)

    assert result.exit_code == 0, result.output
    assert "d = 2.2 s, the 95th percentile of 10 runs over the last 7 days" in result.stdout
    assert data["schedules"][0]["run_seconds"] == 2.2
    assert data["window"]["awake_seconds"] == pytest.approx(168 * (2.2 + 60))


def test_history_plans_six_runs_of_two_to_three_seconds_with_their_percentile_itself(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    """Six runs of 2.3 to 2.9 s: d = 2.875 s planned as it is, printed 2.9 s, never 3 s."""
    record_runs(conn, "public.jobs", [2.3, 2.5, 2.6, 2.7, 2.8, 2.9], "1 hour")

    result = drain_plan("0 * * * *", "--dsn", dsn, *MONDAY)
    _, data = plan_json("0 * * * *", "--dsn", dsn, *MONDAY)
    suggested = drain_plan("--suggest", "--max-wait", "1h", "--dsn", dsn, *MONDAY)

    assert result.exit_code == 0, result.output
    assert "d = 2.9 s, the 95th percentile of 6 runs over the last 7 days" in result.stdout
    assert data["schedules"][0]["run_seconds"] == pytest.approx(2.875)
    assert data["window"]["awake_seconds"] == pytest.approx(168 * (2.875 + 600))
    assert suggested.exit_code == 0, suggested.output
    assert "d = 2.9 s, the 95th percentile of 6 runs" in suggested.stdout


def test_history_with_no_runs_says_so_and_falls_back(dsn: str) -> None:
    result = drain_plan("0 * * * *", "--dsn", dsn, "--max-seconds", "120", *MONDAY)

    assert result.exit_code == 0, result.output
    assert (
        "d = 2 min, no runs of public.jobs recorded over the last 7 days; the --max-seconds budget"
    ) in result.stdout


def add_schedule(
    conn: psycopg.Connection[Any],
    name: str,
    cron: str,
    *,
    tz: str = "UTC",
    catch_up: CatchUp = "latest",
) -> None:
    recurring.schedule(conn, name, cron, "mail", tz=tz, catch_up=catch_up)


def test_schedules_from_db_say_how_late_each_recurring_job_goes_out(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    add_schedule(conn, "digest", "0 7 * * *")
    add_schedule(conn, "report", "5 7 * * *", tz="Europe/Berlin")
    add_schedule(conn, "sync", "*/5 * * * *", catch_up="all")
    args = ["*/15 * * * *", "--run-seconds", "60", "--dsn", dsn, "--schedules-from-db", *MONDAY]

    result = drain_plan(*args)
    code, data = plan_json(*args)

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index(
        "recurring jobs in public.drain_schedules (for public.jobs), from a fire to the start "
        "of the run that picks it up:"
    )
    assert lines[start + 1 :] == [
        "  digest  0 7 * * *    UTC            worst 0 s, median 0 s over 7 fires",
        "  report  5 7 * * *    Europe/Berlin  worst 10 min, median 10 min over 7 fires",
        "  sync    */5 * * * *  UTC            worst 10 min, median 5 min over 2014 fires; "
        "2 after the last run: not picked up within the window",
        "warning: recurring job 'sync' (*/5 * * * *, UTC) fires more often than drain runs "
        "start: up to 3 of its fires come due for one run; with catch-up all each one is enqueued",
    ]
    assert code == 0
    jobs = {job["name"]: job for job in data["recurring"]["jobs"]}
    assert data["recurring"]["table"] == "public.drain_schedules"
    assert jobs["digest"]["worst_delay_seconds"] == 0
    assert jobs["report"]["worst_delay_seconds"] == 600
    assert jobs["report"]["median_delay_seconds"] == 600
    assert jobs["sync"]["most_fires_per_run"] == 3
    assert data["recurring"]["warnings"] == [jobs["sync"]["warning"]]


def test_dsn_alone_reads_no_recurring_jobs(conn: psycopg.Connection[Any], dsn: str) -> None:
    add_schedule(conn, "digest", "0 7 * * *")

    result = drain_plan("*/15 * * * *", "--run-seconds", "60", "--dsn", dsn, *MONDAY)
    _, data = plan_json("*/15 * * * *", "--run-seconds", "60", "--dsn", dsn, *MONDAY)

    assert result.exit_code == 0, result.output
    assert "recurring jobs" not in result.stdout
    assert "recurring" not in data


def test_schedules_from_db_with_no_recurring_jobs_says_so(dsn: str) -> None:
    result = drain_plan("0 * * * *", "--dsn", dsn, "--schedules-from-db", *MONDAY)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "recurring jobs: none in public.drain_schedules (for public.jobs)"
    )


def test_schedules_from_db_needs_a_dsn_and_a_schedules_table(empty_dsn: str) -> None:
    assert_usage_error(drain_plan("0 * * * *", "--schedules-from-db"), "give --dsn")
    assert_usage_error(
        drain_plan("--suggest", "--max-wait", "1h", "--dsn", empty_dsn, "--schedules-from-db"),
        "--suggest proposes its own",
    )
    assert_usage_error(
        drain_plan("0 * * * *", "--run-seconds", "60", "--dsn", empty_dsn, "--schedules-from-db"),
        "--schedules-from-db: cannot read the recurring jobs: there is no "
        "public.drain_schedules table",
    )


def test_each_file_of_a_directory_gets_its_own_delays(
    conn: psycopg.Connection[Any], dsn: str, tmp_path: Path
) -> None:
    add_schedule(conn, "digest", "5 7 * * *")
    (tmp_path / "hourly.cron").write_text("0 * * * * drain run\n")
    (tmp_path / "fast.cron").write_text("*/5 * * * * drain run\n")

    code, data = plan_json(
        "--from", str(tmp_path), "--run-seconds", "60", "--dsn", dsn, "--schedules-from-db", *MONDAY
    )

    worst = {
        Path(entry["from"]).name: entry["recurring"]["jobs"][0]["worst_delay_seconds"]
        for entry in data["plans"]
    }
    assert code == 1  # runs every 5 min keep the compute awake; the delays are shown all the same
    assert worst == {"hourly.cron": 55 * 60, "fast.cron": 0}
