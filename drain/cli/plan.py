"""``drain plan``: will the database get to sleep under this schedule?

The request and its answer live in :mod:`drain.planning.request`, the arithmetic
in :mod:`drain.planning.plan` (and, for the recurring jobs of
``--schedules-from-db``, in :mod:`drain.planning.fire_delays`), the file formats
and which source wins in :mod:`drain.planning.sources`. This module turns the
options into a request, reads the clock for a default window start (the one
thing the model may not do), hands in the readers of the database, and renders
the answer as a report or JSON with an exit code a deploy can test. Only
``--dsn`` loads the database driver; planning alone never does.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from drain.cli import common
from drain.core.errors import DrainError, UsageError
from drain.core.rates import Rate, plan_line, run_capacity
from drain.core.settings import commands
from drain.planning import cron, fire_delays, plan, request
from drain.planning import sources as schedules
from drain.planning.suggestions import Candidate, Suggestions

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


@common.command_of(commands.PLAN)
def plan_command(
    expressions: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SCHEDULE",
            help='Cron expressions, each quoted: "*/20 * * * *", or @hourly, @daily, ...',
            show_default=False,
        ),
    ] = None,
    *,
    files: tuple[str, ...],
    run_seconds: float | None,
    max_seconds: float | None,
    grace_seconds: float | None,
    lease: float | None,
    idle_timeout: float | None,
    provider: str | None,
    tz: str,
    window: float,
    start: str | None,
    compute_units: float,
    trigger: str | None,
    suggest: bool,
    max_wait: float | None,
    svg: str | None,
    dsn: str | None,
    history_days: float,
    schedules_from_db: bool,
    schema: str,
    table: str,
    connect_timeout: float,
    queue_rates: tuple[tuple[str, Rate], ...],
    json: bool,
    verbose: bool,
) -> None:
    """Check a schedule before you deploy it: does the compute ever suspend?

    A run starts at each fire time, works d seconds, and the compute stays awake
    T more seconds; the compute sleeps only in gaps longer than d + T. Prints, per
    day and over the window, the runs, resumes, awake hours, compute-hours, the
    longest sleep and the worst wait for a job, then the verdict and warnings.
    """
    common.configure_logging(verbose)
    connection = {"dsn": dsn, "schema": schema, "table": table, "timeout": connect_timeout}
    with common.errors_as_exit_codes(verbose):
        asked = request.PlanRequest(
            expressions=tuple(expressions or ()),
            files=tuple(Path(name) for name in files),
            settings=schedules.RunSettings(
                run_seconds=run_seconds,
                max_seconds=max_seconds,
                grace_seconds=grace_seconds,
                lease_seconds=lease,
                trigger=None if trigger is None else plan.Trigger(trigger),
            ),
            idle_timeout=idle_timeout,
            provider=None if provider is None else plan.ProviderName(provider),
            tz=tz,
            window=window,
            start=start,
            compute_units=compute_units,
            suggest=suggest,
            max_wait=max_wait,
            dsn=dsn is not None,
            history_days=history_days,
            schedules_from_db=schedules_from_db,
            today=datetime.now(cron.zone(tz)).date(),
        )
        frame, idle_source = request.frame_of(asked)
        svg_path = None if svg is None else _svg_path(svg, suggest)
        found = request.answer(
            asked,
            frame,
            idle_source,
            read_history=lambda days: _history(connection, days),
            read_recurring=lambda: _recurring(connection),
        )
        if svg_path is not None:
            _write_svg(svg_path, [(source, result) for source, result, _ in found.plans])
    show(found, json, queue_rates)
    raise typer.Exit(found.exit_code)


def show(
    found: request.PlanAnswer, json_output: bool, paced: tuple[tuple[str, Rate], ...] = ()
) -> None:
    """The answer as JSON on stdout, or as the report: suggestions, one plan, or several."""
    sources = found.sources
    if found.suggestions is not None:
        suggestions = found.suggestions
        _show(
            json_output, suggestions.as_dict(sources.as_dict()), _suggest_text(suggestions, sources)
        )
    elif found.single:
        _, result, delays = found.plans[0]
        data = _plan_dict(result, sources, delays)
        lines = _plan_text(result, sources, delays)
        if paced:
            data["rates"], more = _rates(result, paced)
            lines += ["", "queue rates:", *more]
        _show(json_output, data, lines)
    else:
        data = {
            "plans": [
                {"from": source, **_plan_dict(result, sources, delays)}
                for source, result, delays in found.plans
            ],
            "skipped": [{"file": name, "reason": reason} for name, reason in found.skipped],
            "suspends": found.suspends,
        }
        _show(json_output, data, _plans_text(found, sources))


# -- inputs -----------------------------------------------------------------------------


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


def _history(connection: dict[str, Any], days: float) -> schedules.History:
    """The queue's recorded runs: the one path of ``drain plan`` that loads the driver."""
    from drain.core.config import ConnectOptions
    from drain.store import history
    from drain.store.db import resolve_dsn

    target = common.table_of(connection["schema"], connection["table"])
    options = ConnectOptions(
        dsn=resolve_dsn(connection["dsn"]),
        connect_timeout=connection["timeout"],
        retry_notice=sys.stderr.isatty(),
    )
    try:
        measured = history.run_durations(options, target, days)
    except DrainError as exc:
        # Exit 1 is the verdict "never suspends"; a deploy guard must tell them apart.
        raise UsageError(f"--dsn: cannot read the recorded runs: {exc}") from None
    # The measured percentile itself, unrounded: rounded up to a whole second, runs of
    # 2.3 to 2.9 s (d = 2.875 s) would be planned as 3 s. Printed to a tenth (_d_text).
    return schedules.History(target.qualified, days, measured.runs, measured.p95_seconds)


def _recurring(connection: dict[str, Any]) -> request.Recurring:
    """The table's recurring schedules: read only when asked, since --dsn alone means history."""
    from drain.store import recurring

    target = common.table_of(connection["schema"], connection["table"])
    session = common.open_session(
        connection["dsn"], connection["timeout"], application_name="drain plan"
    )
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
    return request.Recurring(f"{target.schema}.{target.schedules_name}", target.qualified, jobs)


def _plan_dict(
    result: plan.Plan, sources: request.Sources, delays: request.Delays | None
) -> dict[str, Any]:
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


def _d_text(seconds: float) -> str:
    """``d`` to a tenth of a second, as measured runs give it: ``2.9 s``, ``3 min 10.5 s``.

    :func:`plan.span_text` rounds to whole seconds from 10 s on, which hides the
    tenth a measured d has; hours and days keep its coarser form.
    """
    tenths = round(seconds * 10)
    if tenths >= 7200 * 10:
        return plan.span_text(seconds)
    minutes, rest = divmod(tenths, 600)
    secs = f"{rest // 10} s" if rest % 10 == 0 else f"{rest / 10:.1f} s"
    if not minutes:
        return secs
    return f"{minutes} min {secs}" if rest else f"{minutes} min"


def _window_label(figures: plan.Figures) -> str:
    days = figures.seconds / plan.DAY
    return "1 day" if days == 1 else f"{days:.3g} days"


def _schedule_line(schedule: plan.RunSchedule, default_zone: str, with_d: bool) -> str:
    d_text = f", d = {_d_text(schedule.run_seconds)}" if with_d else ""
    origin = "" if schedule.source == "argument" else f", from {schedule.source}"
    return f"  {schedule.expression}  ({schedule.timezone or default_zone}{d_text}{origin})"


def _settings_line(result: plan.Plan, sources: request.Sources, one_d: bool) -> str:
    d_text = f"d = {_d_text(result.schedules[0].run_seconds)}, " if one_d else "d: "
    return (
        f"{d_text}{sources.run_seconds.text}; "
        f"T = {plan.span_text(result.idle_timeout)}, {sources.idle_timeout}"
    )


def _plan_text(
    result: plan.Plan, sources: request.Sources, delays: request.Delays | None = None
) -> list[str]:
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


def _delays_text(delays: request.Delays) -> list[str]:
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


def _suggestion_row(candidate: Candidate, result: plan.Plan) -> str:
    window = result.window
    return (
        f"  {candidate.expression:<13} {candidate.label:<13}"
        f"{_hours(window.per_day(window.awake_seconds)):>7} awake a day ({_share(window.awake_share)}), "
        f"{_count(window.per_day(window.resumes))} resumes, "
        f"{window.compute_hours_per_month:.1f} CU-h/month, "
        f"worst wait {plan.span_text(window.worst_wait_seconds)}"
    )


def _suggest_text(found: Suggestions, sources: request.Sources) -> list[str]:
    wait = plan.span_text(found.max_wait)
    span = plan.span_text(found.awake_span)
    d_text = _d_text(found.awake_span - found.idle_timeout)
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


def _plans_text(found: request.PlanAnswer, sources: request.Sources) -> list[str]:
    """One report per timeline, then what was skipped, then one line for them all."""
    lines: list[str] = []
    for source, result, delays in found.plans:
        lines += [
            f"== {source or 'the schedules given together'} ==",
            *_plan_text(result, sources, delays),
        ]
        lines.append("")
    lines += [f"skipped {name}: {reason}" for name, reason in found.skipped]
    never = [
        source or "the schedules given together" for source, r, _ in found.plans if not r.suspends
    ]
    if never:
        lines.append(f"{len(never)} of {len(found.plans)} plans never suspend: {', '.join(never)}")
    else:
        lines.append(f"each of the {len(found.plans)} plans suspends between runs")
    return lines


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


def _show(json_output: bool, data: dict[str, Any], lines: list[str]) -> None:
    """The answer as JSON on stdout, or as the report."""
    if json_output:
        common.print_json(data)
    else:
        typer.echo("\n".join(lines))
