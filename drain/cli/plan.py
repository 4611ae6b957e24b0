"""``drain plan``: will the database get to sleep under this schedule?

The arithmetic lives in :mod:`drain.planning.plan` (and, for the recurring jobs of
``--schedules-from-db``, in :mod:`drain.planning.fire_delays`); the file formats, and which source
wins (arguments, files, ``--dsn``, defaults), in :mod:`drain.planning.sources`. This
module turns options into their inputs, reads the clock for a default window
start (the one thing the model may not do), and renders the answer as a report or
JSON with an exit code a deploy can test. Only ``--dsn`` loads the database
driver; planning alone never does.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, NamedTuple
from zoneinfo import ZoneInfo

import typer

from drain.cli import common
from drain.core.durations import format_duration
from drain.core.errors import EXIT_FAILURE, EXIT_OK, DrainError, UsageError
from drain.core.rates import Rate, plan_line, run_capacity
from drain.core.settings import BY_KEY, DEFAULT_IDLE_TIMEOUT, RATES
from drain.planning import cron, fire_delays, plan
from drain.planning import sources as schedules

EXAMPLES = """\
Examples:

  drain plan "*/20 * * * *" --run-seconds 2m --provider neon

  drain plan --from deploy/kubernetes/cronjob.yaml --tz Europe/Berlin --json

  drain plan --from deploy            # each schedule file below it, on its own

  drain plan --suggest --max-wait 1h --max-seconds 300

  drain plan "*/15 * * * *" --dsn "$DATABASE_URL" --schedules-from-db

Exit codes: 0 the compute can suspend, 1 it never does, 2 usage error (a bad
expression or duration, a schedule that never fires in the window, or --dsn's
recorded runs or recurring schedules cannot be read).
"""

# drain run's own settings, read here as a plan's inputs (each defaults to the file's).
_MAX_SECONDS = BY_KEY["max_seconds"]
_GRACE_SECONDS = BY_KEY["grace_seconds"]
_LEASE = BY_KEY["lease"]


class Sources(NamedTuple):
    """Where ``d`` and ``T`` came from, said in the report and in the JSON."""

    run_seconds: schedules.RunSecondsSource
    idle_timeout: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_seconds_from": self.run_seconds.text,
            "history_runs": self.run_seconds.runs,
            "history_days": self.run_seconds.history_days,
            "idle_timeout_from": self.idle_timeout,
        }


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
            help="Read the schedules of a crontab, a Kubernetes CronJob manifest, a systemd "
            "timer or a KEDA ScaledJob (its polling, which wakes the compute) (repeatable; a "
            "directory reads its files).",
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
            _MAX_SECONDS.option,
            envvar=_MAX_SECONDS.envvar,
            help="The run's budget. Default: what the --from file says, else "
            f"{_MAX_SECONDS.shown_default}.",
        ),
    ] = None,
    grace_seconds: Annotated[
        str | None,
        typer.Option(
            _GRACE_SECONDS.option,
            envvar=_GRACE_SECONDS.envvar,
            help="The run's grace after its budget. Default: the file's, else "
            f"{_GRACE_SECONDS.shown_default}.",
        ),
    ] = None,
    lease: Annotated[
        str | None,
        typer.Option(
            _LEASE.option,
            envvar=_LEASE.envvar,
            help=f"The run's lease. Default: the file's, else {_LEASE.shown_default}.",
        ),
    ] = None,
    idle_timeout: Annotated[
        str | None,
        typer.Option(
            "--idle-timeout",
            envvar="DRAIN_IDLE_TIMEOUT",
            help="How long the compute stays awake after a run (T). Default: the provider's, "
            f"else {format_duration(DEFAULT_IDLE_TIMEOUT)}.",
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
    schedules_from_db: Annotated[
        bool,
        typer.Option(
            "--schedules-from-db",
            envvar="DRAIN_SCHEDULES_FROM_DB",
            help="With --dsn: read the table's recurring jobs (drain_schedules) and say, per "
            "job, the worst and median delay from a fire to the start of the drain run that "
            "picks it up under these schedules. --dsn alone does not read them.",
        ),
    ] = False,
    svg: Annotated[
        str | None,
        typer.Option(
            "--svg",
            envvar="DRAIN_SVG",
            help="Also draw the window's awake periods (each run plus T, merged) as an SVG "
            "file, one row per plan, the way drain report draws the runs that happened.",
            show_default=False,
        ),
    ] = None,
    queue_rates: Annotated[
        list[str] | None,
        typer.Option(
            "--queue-rate",
            metavar="QUEUE=N/s|m|h",
            envvar="DRAIN_QUEUE_RATE",
            help="A rate the runs are given (repeatable): say how many jobs of that queue "
            "a run and a day can start, and how long a backlog takes.",
            show_default=False,
        ),
    ] = None,
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
        frame, idle_source = _frame(tz, window, start, idle_timeout, provider, compute_units)
        settings = schedules.RunSettings(
            run_seconds=_optional_duration(run_seconds, "--run-seconds"),
            max_seconds=_optional_duration(max_seconds, _MAX_SECONDS.option),
            grace_seconds=_optional_duration(grace_seconds, _GRACE_SECONDS.option),
            lease_seconds=_optional_duration(lease, _LEASE.option),
            trigger=trigger,
        )
        wait = _optional_duration(max_wait, "--max-wait")
        paced = RATES.join(queue_rates or [])
        svg_path = None if svg is None else _svg_path(svg, suggest_mode)
        # Every schedule is read and checked before anything connects to a database.
        groups: list[schedules.Group] = []
        skipped: list[tuple[str, str]] = []
        if suggest_mode:
            schedules.requested(suggest_mode, wait, expressions or [], files or [])
        else:
            groups, skipped = schedules.requested_groups(expressions or [], files or [])
        recurring = None
        if schedules_from_db:
            recurring = _recurring(dsn, suggest_mode, schema_name, table, connect_timeout)
        history = None
        if dsn is not None and schedules.wants_history(settings, dsn, history_days):
            history = _history(dsn, schema_name, table, history_days, connect_timeout)
        settings, d_source = schedules.settle_run_seconds(settings, history)
        sources = Sources(d_source, idle_source)
        if suggest_mode and wait is not None:
            suggestions = plan.suggest_in(frame, schedules.template(settings), max_wait=wait)
            data = suggestions.as_dict(sources.as_dict())
            _show(json_output, data, _suggest_text(suggestions, sources))
            raise typer.Exit(EXIT_OK if suggestions.sleeping else EXIT_FAILURE)
        results = [
            (
                group.source,
                plan.plan_in(
                    frame,
                    [schedules.resolve(entry, settings) for entry in group.schedules],
                    max_wait=wait,
                ),
            )
            for group in groups
        ]
        delays = [_delays(frame, result, recurring) for _, result in results]
        if svg_path is not None:
            _write_svg(svg_path, results)
        if len(results) == 1 and results[0][0] is None:
            result = results[0][1]
            data = _plan_dict(result, sources, delays[0])
            lines = _plan_text(result, sources, delays[0])
            if paced:
                data["rates"], more = _rates(result, paced)
                lines += ["", "queue rates:", *more]
            _show(json_output, data, lines)
            raise typer.Exit(EXIT_OK if result.suspends else EXIT_FAILURE)
        data = {
            "plans": [
                {"from": source, **_plan_dict(result, sources, found)}
                for (source, result), found in zip(results, delays, strict=True)
            ],
            "skipped": [{"file": name, "reason": reason} for name, reason in skipped],
            "suspends": all(result.suspends for _, result in results),
        }
        _show(json_output, data, _plans_text(results, skipped, sources, delays))
        raise typer.Exit(EXIT_OK if data["suspends"] else EXIT_FAILURE)


# -- inputs -----------------------------------------------------------------------------


def _frame(
    tz: str,
    window: str,
    start: str | None,
    idle_timeout: str | None,
    provider: plan.ProviderName | None,
    compute_units: float,
) -> tuple[plan.Frame, str]:
    """The window and platform of the plan, and where its ``T`` came from."""
    chosen = plan.PROVIDERS[provider] if provider is not None else None
    given = _optional_duration(idle_timeout, "--idle-timeout")
    idle, idle_source = schedules.idle_timeout(given, chosen)
    frame = plan.Frame(
        start=_start(start, cron.zone(tz)),
        window=common.duration(window, "--window"),
        timezone=tz,
        idle_timeout=idle,
        compute_units=compute_units,
        provider=chosen,
    )
    return frame, idle_source


def _svg_path(value: str, suggesting: bool) -> Path:
    from drain.planning import drawing

    if suggesting:
        raise UsageError("--svg draws the schedules you give; --suggest proposes its own")
    return drawing.output_path(value, "--svg", ".svg")


def _write_svg(path: Path, results: list[tuple[str | None, plan.Plan]]) -> None:
    """The drawing of the plans; a file that cannot be written is a usage error (1 is a verdict)."""
    from drain.planning import drawing

    try:
        drawing.write_file(path, drawing.plan_svg(results))
    except OSError as exc:
        raise UsageError(f"--svg: cannot write {path}: {exc.strerror or exc}") from None


def _optional_duration(text: str | None, option: str) -> float | None:
    return None if text is None else common.duration(text, option)


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


def _history(
    dsn: str, schema_name: str, table: str, days: float, connect_timeout: str
) -> schedules.History:
    """The queue's recorded runs: the one path of ``drain plan`` that loads the driver."""
    from drain.core.config import ConnectOptions
    from drain.store import history
    from drain.store.db import resolve_dsn

    target = common.table_of(schema_name, table)
    options = ConnectOptions(
        dsn=resolve_dsn(dsn),
        connect_timeout=common.duration(connect_timeout, "--connect-timeout"),
        retry_notice=sys.stderr.isatty(),
    )
    try:
        measured = history.run_durations(options, target, days)
    except DrainError as exc:
        # Exit 1 is the verdict "never suspends"; a deploy guard must tell them apart.
        raise UsageError(f"--dsn: cannot read the recorded runs: {exc}") from None
    # The measured percentile as it is (to the millisecond): rounded up to a whole
    # second, a 2.2 s run would be planned as 3 s, a third longer than measured.
    p95 = measured.p95_seconds
    run_seconds = None if p95 is None else round(p95, 3)
    return schedules.History(target.qualified, days, measured.runs, run_seconds)


class Recurring(NamedTuple):
    """The recurring jobs of the queue table, as ``--schedules-from-db`` read them."""

    table: str  # the schedules table, schema-qualified, for the report
    jobs_table: str
    jobs: list[fire_delays.Recurring]


class Delays(NamedTuple):
    """The recurring jobs' delays under one plan's drain runs."""

    source: Recurring
    found: tuple[fire_delays.FireDelays, ...]


def _recurring(
    dsn: str | None, suggesting: bool, schema_name: str, table: str, connect_timeout: str
) -> Recurring:
    """The table's recurring schedules: read only when asked, since --dsn alone means history."""
    if dsn is None:
        raise UsageError("--schedules-from-db reads the recurring jobs of a database: give --dsn")
    if suggesting:
        raise UsageError(
            "--schedules-from-db reports on the schedules you give; --suggest proposes its own"
        )
    from drain.store import recurring

    target = common.table_of(schema_name, table)
    session = common.open_session(dsn, connect_timeout, application_name="drain plan")
    try:
        rows = session.call(lambda conn: recurring.schedules(conn, table=target))
    except DrainError as exc:
        # Exit 1 is the verdict "never suspends"; a deploy guard must tell them apart.
        raise UsageError(f"--schedules-from-db: cannot read the recurring jobs: {exc}") from None
    finally:
        session.close()
    jobs = [
        fire_delays.Recurring(row.name, row.cron, row.time_zone, row.queue, row.catch_up)
        for row in rows
    ]
    return Recurring(f"{target.schema}.{target.schedules_name}", target.qualified, jobs)


def _delays(frame: plan.Frame, result: plan.Plan, recurring: Recurring | None) -> Delays | None:
    if recurring is None:
        return None
    return Delays(recurring, fire_delays.fire_delays(frame, result.schedules, recurring.jobs))


def _plan_dict(result: plan.Plan, sources: Sources, delays: Delays | None) -> dict[str, Any]:
    """The plan for ``--json``, with the recurring jobs' delays when they were read."""
    data = result.as_dict(sources.as_dict())
    if delays is not None:
        data["recurring"] = {
            "table": delays.source.table,
            "jobs_table": delays.source.jobs_table,
            "jobs": [found.as_dict() for found in delays.found],
            "warnings": [found.warning for found in delays.found if found.warning],
        }
    return data


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


def _rates(
    result: plan.Plan, paced: tuple[tuple[str, Rate], ...]
) -> tuple[list[dict[str, Any]], list[str]]:
    """What each rate means under the plan's first schedule: starts per run and per day."""
    run_seconds = result.schedules[0].run_seconds
    runs_per_day = result.window.per_day(result.window.runs)
    data = [
        {
            "queue": queue,
            "rate": rate.text,
            "starts_per_run": run_capacity(rate, run_seconds),
            "starts_per_day": math.floor(run_capacity(rate, run_seconds) * runs_per_day),
            "seconds_per_1000": rate.seconds_for(1000),
        }
        for queue, rate in paced
    ]
    lines = [f"  {plan_line(queue, rate, run_seconds, runs_per_day)}" for queue, rate in paced]
    return data, lines


def _plan_text(result: plan.Plan, sources: Sources, delays: Delays | None = None) -> list[str]:
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
    if delays is not None:
        lines += ["", *_delays_text(delays)]
    return lines


def _delays_text(delays: Delays) -> list[str]:
    """One line per recurring job: how long its fires wait for a run, then the pile-ups."""
    where = f"{delays.source.table} (for {delays.source.jobs_table})"
    if not delays.found:
        return [f"recurring jobs: none in {where}"]
    rows = [(f.schedule.name, f.schedule.cron, f.schedule.time_zone) for f in delays.found]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [f"recurring jobs in {where}, from a fire to the start of the run that picks it up:"]
    for row, found in zip(rows, delays.found, strict=True):
        cells = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append(f"  {cells}  {found.text()}")
    lines += [f"warning: {found.warning}" for found in delays.found if found.warning]
    return lines


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


def _plans_text(
    results: list[tuple[str | None, plan.Plan]],
    skipped: list[tuple[str, str]],
    sources: Sources,
    delays: list[Delays | None],
) -> list[str]:
    """One report per timeline, then what was skipped, then one line for them all."""
    lines: list[str] = []
    for (source, result), found in zip(results, delays, strict=True):
        lines += [
            f"== {source or 'the schedules given together'} ==",
            *_plan_text(result, sources, found),
        ]
        lines.append("")
    lines += [f"skipped {name}: {reason}" for name, reason in skipped]
    never = [source or "the schedules given together" for source, r in results if not r.suspends]
    if never:
        lines.append(f"{len(never)} of {len(results)} plans never suspend: {', '.join(never)}")
    else:
        lines.append(f"each of the {len(results)} plans suspends between runs")
    return lines


def _show(json_output: bool, data: dict[str, Any], lines: list[str]) -> None:
    """The answer as JSON on stdout, or as the report."""
    if json_output:
        common.print_json(data)
    else:
        typer.echo("\n".join(lines))
