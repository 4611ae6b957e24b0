"""``drain plan``: will the database get to sleep under this schedule?

The arithmetic lives in :mod:`drain.plan` and the file formats in
:mod:`drain.schedules`; this module turns options into their inputs, reads the
clock for a default window start (the one thing the model may not do), and
renders the answer as a report or JSON with an exit code a deploy can test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from zoneinfo import ZoneInfo

import typer

from drain import plan
from drain.cli import common
from drain.config import DEFAULT_GRACE_SECONDS, DEFAULT_MAX_SECONDS
from drain.db import ConnectOptions, resolve_dsn
from drain.errors import EXIT_FAILURE, EXIT_OK, UsageError
from drain.queue import DEFAULT_LEASE

if TYPE_CHECKING:
    from drain.schedules import FoundSchedule

EXAMPLES = """\
Examples:

  drain plan "*/20 * * * *" --run-seconds 2m --provider neon

  drain plan --from deploy/cronjob.yaml --tz Europe/Berlin --json

  drain plan --suggest --max-wait 1h --max-seconds 300

Exit codes: 0 the compute can suspend, 1 it never does, 2 usage error (a bad
expression or duration, or a schedule that never fires in the window).
"""


@dataclass(frozen=True)
class RunSettings:
    """What the command line says about the runs; ``None`` leaves it to the file."""

    run_seconds: float | None
    max_seconds: float | None
    grace_seconds: float | None
    lease_seconds: float | None
    trigger: plan.Trigger | None


@dataclass(frozen=True)
class RunSecondsSource:
    """Where ``d`` came from, said in the report so nobody mistakes a guess for a measure."""

    text: str
    runs: int | None = None
    history_days: float | None = None


@dataclass(frozen=True)
class Sources:
    """Where ``d`` and ``T`` came from."""

    run_seconds: RunSecondsSource
    idle_timeout: str


def plan_command(
    expressions: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SCHEDULE",
            help='Cron expressions, each quoted: "*/20 * * * *", or @hourly, @daily, ...',
            show_default=False,
        ),
    ] = None,
    files: Annotated[
        list[Path] | None,
        typer.Option(
            "--from",
            envvar="DRAIN_FROM",
            help="Read the schedules of a crontab, a Kubernetes CronJob manifest or a systemd "
            "timer (repeatable; a directory reads its files).",
        ),
    ] = None,
    run_seconds: Annotated[
        str | None,
        typer.Option(
            "--run-seconds",
            envvar="DRAIN_RUN_SECONDS",
            help="How long a run works (d). Default: the --max-seconds budget.",
        ),
    ] = None,
    max_seconds: Annotated[
        str | None,
        typer.Option(
            "--max-seconds",
            envvar="DRAIN_MAX_SECONDS",
            help="The run's budget. Default: what the --from file says, else 300.",
        ),
    ] = None,
    grace_seconds: Annotated[
        str | None,
        typer.Option(
            "--grace-seconds",
            envvar="DRAIN_GRACE_SECONDS",
            help="The run's grace after its budget. Default: the file's, else 10.",
        ),
    ] = None,
    lease: Annotated[
        str | None,
        typer.Option(
            "--lease", envvar="DRAIN_LEASE", help="The run's lease. Default: the file's, else 5m."
        ),
    ] = None,
    idle_timeout: Annotated[
        str | None,
        typer.Option(
            "--idle-timeout",
            envvar="DRAIN_IDLE_TIMEOUT",
            help="How long the compute stays awake after a run (T). Default: the provider's, "
            "else 10m.",
        ),
    ] = None,
    provider: Annotated[
        plan.ProviderName | None,
        typer.Option(
            "--provider",
            envvar="DRAIN_PROVIDER",
            help="Use a platform's suspend rule: sets T and prints the rule.",
            case_sensitive=False,
        ),
    ] = None,
    tz: Annotated[
        str,
        typer.Option("--tz", envvar="DRAIN_TZ", help="Time zone of the schedules and the days."),
    ] = "UTC",
    window: Annotated[
        str, typer.Option("--window", envvar="DRAIN_WINDOW", help="How long a stretch to plan.")
    ] = "7d",
    start: Annotated[
        str | None,
        typer.Option(
            "--start",
            envvar="DRAIN_START",
            help="Start of the window (ISO 8601, read in --tz when it has no offset). "
            "Default: the next Monday 00:00.",
        ),
    ] = None,
    compute_units: Annotated[
        float,
        typer.Option(
            "--compute-units",
            envvar="DRAIN_COMPUTE_UNITS",
            help="Compute size, for compute-hours per month.",
        ),
    ] = 1.0,
    trigger: Annotated[
        plan.Trigger | None,
        typer.Option(
            "--trigger",
            envvar="DRAIN_TRIGGER",
            help="What starts the runs, to check its limits. Default: the --from file's kind.",
            case_sensitive=False,
        ),
    ] = None,
    suggest_mode: Annotated[
        bool,
        typer.Option(
            "--suggest",
            envvar="DRAIN_SUGGEST",
            help="Propose schedules whose worst wait is within --max-wait, least awake first.",
        ),
    ] = False,
    max_wait: Annotated[
        str | None,
        typer.Option(
            "--max-wait",
            envvar="DRAIN_MAX_WAIT",
            help="The longest a job may wait for a run (needed by --suggest; else a warning).",
        ),
    ] = None,
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="DRAIN_DSN",
            callback=common.warn_password_on_command_line,
            help="Take d from the runs recorded in this database (the 95th percentile). "
            "DATABASE_URL alone does not turn this on.",
        ),
    ] = None,
    history_days: Annotated[
        float,
        typer.Option(
            "--history-days", envvar="DRAIN_HISTORY_DAYS", help="With --dsn: days of runs to read."
        ),
    ] = 7,
    schema_name: common.SchemaOption = "public",
    table: common.TableOption = "jobs",
    connect_timeout: common.ConnectTimeoutOption = "10s",
    json_output: common.JsonOption = False,
    verbose: common.VerboseOption = False,
) -> None:
    """Check a schedule before you deploy it: does the compute ever suspend?

    A run starts at each fire time, works d seconds, and the compute stays awake
    T more seconds; the compute sleeps only in gaps longer than d + T. Prints, per
    day and over the window, the runs, resumes, awake hours, compute-hours, the
    longest sleep and the worst wait for a job, then the verdict and warnings.
    """
    common.configure_logging(verbose)
    with common.errors_as_exit_codes(verbose):
        frame = _frame(tz, window, start, idle_timeout, provider, compute_units)
        settings = RunSettings(
            run_seconds=_optional_duration(run_seconds, "--run-seconds"),
            max_seconds=_optional_duration(max_seconds, "--max-seconds"),
            grace_seconds=_optional_duration(grace_seconds, "--grace-seconds"),
            lease_seconds=_optional_duration(lease, "--lease"),
            trigger=trigger,
        )
        wait = _optional_duration(max_wait, "--max-wait")
        # Every schedule is read and checked before anything connects to a database.
        found = _requested(suggest_mode, wait, expressions or [], files or [])
        settings, d_source = _run_seconds(
            settings, dsn, schema_name, table, history_days, connect_timeout
        )
        sources = Sources(d_source, frame.idle_source)
        if suggest_mode and wait is not None:
            suggestions = _suggest(frame, _template(settings), wait)
            _show_suggestions(suggestions, sources, json_output)
            raise typer.Exit(EXIT_OK if suggestions.sleeping else EXIT_FAILURE)
        result = _plan(frame, [_resolve(entry, settings) for entry in found], wait)
        _show_plan(result, sources, json_output)
        raise typer.Exit(EXIT_OK if result.suspends else EXIT_FAILURE)


# -- inputs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """The window a plan covers and the platform it assumes, whatever the schedules."""

    start: datetime
    window: float
    timezone: str
    idle_timeout: float
    idle_source: str
    compute_units: float
    provider: plan.Provider | None


def _frame(
    tz: str,
    window: str,
    start: str | None,
    idle_timeout: str | None,
    provider: plan.ProviderName | None,
    compute_units: float,
) -> Frame:
    chosen = plan.PROVIDERS[provider] if provider is not None else None
    idle, idle_source = _idle_timeout(idle_timeout, chosen)
    return Frame(
        start=_start(start, plan.zone(tz)),
        window=common.duration(window, "--window"),
        timezone=tz,
        idle_timeout=idle,
        idle_source=idle_source,
        compute_units=compute_units,
        provider=chosen,
    )


def _requested(
    suggest_mode: bool, wait: float | None, expressions: list[str], files: list[Path]
) -> list[FoundSchedule]:
    """The schedules to plan, or none for --suggest, which proposes its own."""
    if not suggest_mode:
        return _schedules(expressions, files)
    if expressions or files:
        raise UsageError("--suggest proposes schedules; give it no schedules of your own")
    if wait is None:
        raise UsageError("--suggest needs --max-wait, e.g. --max-wait 1h")
    return []


def _plan(frame: Frame, schedules: list[plan.Schedule], wait: float | None) -> plan.Plan:
    return plan.make_plan(
        schedules,
        start=frame.start,
        window=frame.window,
        timezone=frame.timezone,
        idle_timeout=frame.idle_timeout,
        compute_units=frame.compute_units,
        provider=frame.provider,
        max_wait=wait,
    )


def _suggest(frame: Frame, template: plan.Schedule, wait: float) -> plan.Suggestions:
    return plan.suggest(
        template,
        max_wait=wait,
        start=frame.start,
        window=frame.window,
        timezone=frame.timezone,
        idle_timeout=frame.idle_timeout,
        compute_units=frame.compute_units,
        provider=frame.provider,
    )


def _optional_duration(text: str | None, option: str) -> float | None:
    return None if text is None else common.duration(text, option)


def _idle_timeout(text: str | None, provider: plan.Provider | None) -> tuple[float, str]:
    if text is not None:
        return common.duration(text, "--idle-timeout"), "--idle-timeout"
    if provider is not None:
        return provider.idle_timeout, f"{provider.name.value}'s default"
    return plan.DEFAULT_IDLE_TIMEOUT, "the default (the article's platform)"


def _start(text: str | None, zone: ZoneInfo) -> datetime:
    """The window's start; by default the coming Monday, so the days line up with a week."""
    if text is None:
        today = datetime.now(zone).date()
        monday = today + timedelta(days=(7 - today.weekday()) % 7)
        return datetime(monday.year, monday.month, monday.day, tzinfo=zone)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--start: not an ISO 8601 date or time: {text!r}, e.g. 2026-11-30 or "
            "2026-11-30T08:00+01:00"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def _run_seconds(
    settings: RunSettings,
    dsn: str | None,
    schema_name: str,
    table: str,
    days: float,
    connect_timeout: str,
) -> tuple[RunSettings, RunSecondsSource]:
    """Settle ``d``: --run-seconds, else the recorded runs (with --dsn), else the budget."""
    if settings.run_seconds is not None:
        return settings, RunSecondsSource("--run-seconds")
    if dsn is None:
        return settings, RunSecondsSource("the --max-seconds budget")
    if days <= 0:
        raise UsageError("--history-days must be above 0")
    target = common.table_of(schema_name, table)
    options = ConnectOptions(
        dsn=resolve_dsn(dsn),
        connect_timeout=common.duration(connect_timeout, "--connect-timeout"),
    )
    from drain import history  # psycopg-facing; only with --dsn

    measured = history.run_durations(options, target, days)
    over = f"the last {days:g} days"
    if measured.run_seconds is None:
        return settings, RunSecondsSource(
            f"no runs of {target.qualified} recorded over {over}; the --max-seconds budget",
            runs=0,
            history_days=days,
        )
    text = f"the 95th percentile of {measured.runs} runs over {over}"
    return (
        RunSettings(
            measured.run_seconds,
            settings.max_seconds,
            settings.grace_seconds,
            settings.lease_seconds,
            settings.trigger,
        ),
        RunSecondsSource(text, runs=measured.runs, history_days=days),
    )


def _schedules(expressions: list[str], files: list[Path]) -> list[FoundSchedule]:
    from drain.schedules import FoundSchedule  # YAML and friends load only when planning

    if not expressions and not files:
        raise UsageError('give a schedule, e.g. drain plan "*/20 * * * *", or --from FILE')
    found = [FoundSchedule(_checked(text), "argument", plan.Trigger.CRON) for text in expressions]
    for path in files:
        found.extend(_read(path))
    for entry in found:
        _check_from_file(entry)
    return found


def _check_from_file(entry: FoundSchedule) -> None:
    """A bad expression read from a file is reported with the file and line it came from."""
    if entry.source == "argument":
        return
    try:
        plan.normalize(entry.expression)
    except plan.ScheduleError as exc:
        raise plan.ScheduleError(f"{entry.source}: {exc}") from None


def _checked(expression: str) -> str:
    """The expression, checked early so an unquoted one gets a hint about quoting."""
    try:
        plan.normalize(expression)
    except plan.ScheduleError as exc:
        if " " not in expression.strip() and not expression.startswith("@"):
            raise plan.ScheduleError(f'{exc}; quote the whole expression: "*/20 * * * *"') from None
        raise
    return expression


def _read(path: Path) -> list[FoundSchedule]:
    """A file's schedules; a directory's, from the schedule files anywhere below it."""
    from drain.schedules import read_schedules

    if not path.is_dir():
        return read_schedules(path)
    found: list[FoundSchedule] = []
    for entry in sorted(path.rglob("*")):
        if entry.is_file() and _looks_like_schedule_file(entry):
            found.extend(read_schedules(entry))
    if not found:
        raise UsageError(f"no crontab, CronJob manifest or systemd timer found in {path}")
    return found


def _looks_like_schedule_file(path: Path) -> bool:
    if path.suffix in {".timer", ".cron"} or "crontab" in path.name:
        return True
    if path.suffix in {".yaml", ".yml"}:
        text = path.read_text(encoding="utf-8", errors="replace")
        return "CronJob" in text or re.search(r"^\s*-?\s*cron\s*:", text, re.MULTILINE) is not None
    return False


def _resolve(entry: FoundSchedule, settings: RunSettings) -> plan.Schedule:
    """The command line wins over the file, and the file over drain run's defaults."""
    budget = _first(settings.max_seconds, entry.max_seconds, DEFAULT_MAX_SECONDS)
    return plan.Schedule(
        expression=entry.expression,
        run_seconds=_first(settings.run_seconds, budget),
        timezone=entry.timezone,
        max_seconds=budget,
        grace_seconds=_first(settings.grace_seconds, entry.grace_seconds, DEFAULT_GRACE_SECONDS),
        lease_seconds=_first(settings.lease_seconds, entry.lease_seconds, DEFAULT_LEASE),
        deadline_seconds=entry.deadline_seconds,
        trigger=settings.trigger or entry.trigger,
        source=entry.source,
    )


def _template(settings: RunSettings) -> plan.Schedule:
    from drain.schedules import FoundSchedule

    return _resolve(FoundSchedule("* * * * *", "suggestion", plan.Trigger.CRON), settings)


def _first(*values: float | None) -> float:
    return next(value for value in values if value is not None)


# -- output -----------------------------------------------------------------------------


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _share(fraction: float) -> str:
    return f"{fraction * 100:.1f} %" if 0 < fraction < 0.1 else f"{fraction * 100:.0f} %"


def _count(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


_COLUMNS = (
    ("day", "<", 15),
    ("runs", ">", 5),
    ("resumes", ">", 7),
    ("awake", ">", 7),
    ("share", ">", 6),
    ("CU-h/month", ">", 10),
    ("longest sleep", ">", 13),
    ("worst wait", ">", 10),
)


def _row(cells: list[str]) -> str:
    return "  ".join(
        f"{cell:{align}{width}}" for cell, (_, align, width) in zip(cells, _COLUMNS, strict=True)
    ).rstrip()


def _figure_cells(label: str, figures: plan.Figures) -> list[str]:
    return [
        label,
        str(figures.runs),
        str(figures.resumes),
        _hours(figures.awake_seconds),
        _share(figures.awake_share),
        f"{figures.compute_hours_per_month:.1f}",
        plan.span_text(figures.longest_sleep_seconds),
        plan.span_text(figures.worst_wait_seconds),
    ]


def _window_label(figures: plan.Figures) -> str:
    days = figures.seconds / plan.DAY
    return "1 day" if days == 1 else f"{days:.3g} days"


def _schedule_line(schedule: plan.Schedule, default_zone: str, with_d: bool) -> str:
    d_text = f", d = {plan.span_text(schedule.run_seconds)}" if with_d else ""
    origin = "" if schedule.source == "argument" else f", from {schedule.source}"
    return f"  {schedule.expression}  ({schedule.timezone or default_zone}{d_text}{origin})"


def _settings_line(result: plan.Plan, sources: Sources, one_d: bool) -> str:
    d_text = f"d = {plan.span_text(result.schedules[0].run_seconds)}, " if one_d else "d: "
    return (
        f"{d_text}{sources.run_seconds.text}; "
        f"T = {plan.span_text(result.idle_timeout)}, {sources.idle_timeout}"
    )


def _plan_text(result: plan.Plan, sources: Sources) -> list[str]:
    window = result.window
    label = _window_label(window)
    one_d = len({s.run_seconds for s in result.schedules}) == 1
    lines = [
        f"{window.start:%a %Y-%m-%d %H:%M} to {window.end:%a %Y-%m-%d %H:%M} "
        f"{result.timezone} ({label}), compute-hours at {window.compute_units:g} CU",
        *(_schedule_line(s, result.timezone, not one_d) for s in result.schedules),
        _settings_line(result, sources, one_d),
        "",
        _row([name for name, _, _ in _COLUMNS]),
        *(_row(_figure_cells(f"{day.start:%a %Y-%m-%d}", day)) for day in result.days),
        _row(_figure_cells(label, window)),
        f"a day on average: {_count(window.per_day(window.runs))} runs, "
        f"{_count(window.per_day(window.resumes))} resumes, "
        f"{_hours(window.per_day(window.awake_seconds))} awake ({_share(window.awake_share)})",
        "",
        f"verdict: {result.verdict}",
    ]
    if result.provider is not None:
        lines.append(f"rule: {result.provider.rule}")
    lines.extend(f"warning: {warning}" for warning in result.warnings)
    return lines


def _figures_dict(figures: plan.Figures) -> dict[str, Any]:
    return {
        "date": figures.start.date().isoformat(),
        "start": figures.start.isoformat(),
        "end": figures.end.isoformat(),
        "seconds": figures.seconds,
        "runs": figures.runs,
        "resumes": figures.resumes,
        "awake_seconds": figures.awake_seconds,
        "awake_hours": figures.awake_seconds / 3600,
        "awake_share": figures.awake_share,
        "compute_hours_per_month": figures.compute_hours_per_month,
        "longest_sleep_seconds": figures.longest_sleep_seconds,
        "worst_wait_seconds": figures.worst_wait_seconds,
    }


def _per_day_dict(figures: plan.Figures) -> dict[str, float]:
    return {
        "runs": figures.per_day(figures.runs),
        "resumes": figures.per_day(figures.resumes),
        "awake_hours": figures.per_day(figures.awake_seconds) / 3600,
    }


def _schedule_dict(schedule: plan.Schedule, default_zone: str) -> dict[str, Any]:
    return {
        "expression": schedule.expression,
        "timezone": schedule.timezone or default_zone,
        "source": schedule.source,
        "run_seconds": schedule.run_seconds,
        "max_seconds": schedule.max_seconds,
        "grace_seconds": schedule.grace_seconds,
        "lease_seconds": schedule.lease_seconds,
        "deadline_seconds": schedule.deadline_seconds,
        "trigger": schedule.trigger.value if schedule.trigger else None,
    }


def _sources_dict(sources: Sources) -> dict[str, Any]:
    d_source = sources.run_seconds
    return {
        "run_seconds_from": d_source.text,
        "history_runs": d_source.runs,
        "history_days": d_source.history_days,
        "idle_timeout_from": sources.idle_timeout,
    }


def _plan_dict(result: plan.Plan, sources: Sources) -> dict[str, Any]:
    return {
        "timezone": result.timezone,
        "idle_timeout_seconds": result.idle_timeout,
        "compute_units": result.window.compute_units,
        "provider": result.provider.name.value if result.provider else None,
        "provider_rule": result.provider.rule if result.provider else None,
        **_sources_dict(sources),
        "schedules": [_schedule_dict(s, result.timezone) for s in result.schedules],
        "days": [_figures_dict(day) for day in result.days],
        "window": {**_figures_dict(result.window), "per_day": _per_day_dict(result.window)},
        "suspends": result.suspends,
        "verdict": result.verdict,
        "gap_seconds": result.gap_seconds,
        "awake_span_seconds": result.awake_span_seconds,
        "warnings": list(result.warnings),
    }


def _show_plan(result: plan.Plan, sources: Sources, json_output: bool) -> None:
    if json_output:
        common.print_json(_plan_dict(result, sources))
        return
    typer.echo("\n".join(_plan_text(result, sources)))


def _suggestion_dict(candidate: plan.Candidate, result: plan.Plan | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "expression": candidate.expression,
        "label": candidate.label,
        "interval_seconds": candidate.interval,
    }
    if result is not None:
        entry["suspends"] = result.suspends
        entry["window"] = {**_figures_dict(result.window), "per_day": _per_day_dict(result.window)}
    return entry


def _suggest_dict(found: plan.Suggestions, sources: Sources) -> dict[str, Any]:
    return {
        "max_wait_seconds": found.max_wait,
        **_sources_dict(sources),
        "awake_span_seconds": found.awake_span,
        "can_sleep": bool(found.sleeping),
        "suggestions": [_suggestion_dict(c, p) for c, p in found.sleeping],
        "never_suspend": [_suggestion_dict(c, None) for c in found.sleepless],
        "nearest": _suggestion_dict(*found.nearest) if found.nearest else None,
    }


def _suggestion_row(candidate: plan.Candidate, result: plan.Plan) -> str:
    window = result.window
    return (
        f"  {candidate.expression:<13} {candidate.label:<13}"
        f"{_hours(window.per_day(window.awake_seconds)):>7} awake a day ({_share(window.awake_share)}), "
        f"{_count(window.per_day(window.resumes))} resumes, "
        f"{window.compute_hours_per_month:.1f} CU-h/month, "
        f"worst wait {plan.span_text(window.worst_wait_seconds)}"
    )


def _suggest_text(found: plan.Suggestions, sources: Sources) -> list[str]:
    wait = plan.span_text(found.max_wait)
    span = plan.span_text(found.awake_span)
    d_text = plan.span_text(found.awake_span - found.idle_timeout)
    lines = [
        f"schedules whose worst wait is at most {wait}, least awake first",
        f"a run keeps the compute awake {span}: d = {d_text}, {sources.run_seconds.text}; "
        f"T = {plan.span_text(found.idle_timeout)}, {sources.idle_timeout}",
        "",
    ]
    lines.extend(_suggestion_row(candidate, result) for candidate, result in found.sleeping)
    if found.sleepless:
        steps = ", ".join(candidate.label.removeprefix("every ") for candidate in found.sleepless)
        lines.append(f"never suspends: every {steps}")
    if not found.sleeping:
        lines.append(
            f"no schedule with a worst wait of at most {wait} lets the compute sleep: "
            f"runs would have to be more than {span} apart"
        )
        if found.nearest is not None:
            candidate, result = found.nearest
            lines.append("the shortest wait that lets it sleep:")
            lines.append(_suggestion_row(candidate, result))
    return lines


def _show_suggestions(found: plan.Suggestions, sources: Sources, json_output: bool) -> None:
    if json_output:
        common.print_json(_suggest_dict(found, sources))
        return
    typer.echo("\n".join(_suggest_text(found, sources)))
