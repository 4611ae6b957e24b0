"""``drain report --html``: a week of runs and awake time in one self-contained HTML file.

A dashboard that polls the database keeps a scale-to-zero compute awake all
day, which is the very cost drain exists to avoid. A file does not: it is
written once, while the database is awake anyway (by ``drain report``, or by
``drain run --report`` at the end of a run), and looked at as often as anyone
likes. It has no script, no font file and no link, so it opens the same from a
mail attachment, a CI artifact or a bucket.

Everything in it is read in one read-only REPEATABLE READ transaction, so the
queues, the failures and the runs are one snapshot and every age comes from one
``now()`` on the database clock, which the page shows as its "as of". The
reading is :func:`drain.ops.status.read`'s, inside that snapshot, so the report
and ``drain status`` can never count differently. The awake periods are each
run's span plus the idle timeout, merged where they touch: ``drain plan``'s
model (:mod:`drain.planning.drawing`), so a plan and a week that happened compare.

Every text is escaped with :func:`html.escape`, and every error text passes
through the redactor first, so neither markup nor a password can reach the page.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drain.core.durations import format_duration
from drain.core.errors import UsageError
from drain.core.redact import Redactor, describe
from drain.core.settings import DEFAULT_IDLE_TIMEOUT, Setting
from drain.core.settings.commands import REPORT_DAYS, REPORT_IDLE_TIMEOUT
from drain.core.settings.defaults import DEFAULT_REPORT_DAYS as DEFAULT_DAYS
from drain.core.table import JobTable
from drain.observe.observers import Observer, RunEnd
from drain.ops import status
from drain.planning import drawing, plan

if TYPE_CHECKING:
    import psycopg

    from drain.core.config import RunConfig
    from drain.core.summary import Summary

log = logging.getLogger("drain")

MAX_DAYS = 366.0
# Runs read from drain_runs, newest first: a week of runs every minute is 10,080.
MAX_RUNS = 50_000
FAILED_SHOWN = 20
# Throughput bars: the latest runs of the window, so each bar stays wide enough to see.
THROUGHPUT_RUNS = 200
APPLICATION_NAME = "drain report"

PAGE_STYLE = (
    "body{font:14px/1.4 sans-serif;color:#222;margin:24px;max-width:1000px}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}"
    ".asof{color:#555;margin:0}"
    "table{border-collapse:collapse}th,td{padding:3px 10px;border-bottom:1px solid #ddd}"
    "th{text-align:left;background:#f4f6f8}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "td.error{font-family:monospace;font-size:12px;word-break:break-all}"
    ".legend span{display:inline-block;width:12px;height:12px;vertical-align:middle;margin:0 4px 0 12px}"
    ".note{color:#555}" + drawing.STYLE
)


@dataclass(frozen=True)
class RunSpan:
    """One recorded run in the window, on the database clock (POSIX seconds)."""

    record: status.RunRecord
    start: float
    end: float

    @property
    def processed(self) -> int:
        return self.record.done + self.record.retried + self.record.failed

    @property
    def jobs_per_second(self) -> float:
        seconds = self.record.seconds
        return self.processed / seconds if seconds > 0 else 0.0

    @property
    def failed(self) -> bool:
        return self.record.exit_code not in (0, 3)


@dataclass(frozen=True)
class Report:
    """What the page shows: the status snapshot, and the runs of the window oldest first.

    ``awake`` holds the merged awake periods, clipped to the window; ``runs`` the
    runs that started in it, as ``drain plan --dsn`` counts a window's runs.
    """

    status: status.Status
    days: float
    idle_timeout: float
    runs: tuple[RunSpan, ...]
    awake: tuple[tuple[float, float], ...]
    # drain_runs held more runs than were read: the oldest of the window may be missing
    truncated: bool = False

    @property
    def end(self) -> float:
        return self.status.database_time.timestamp()

    @property
    def begin(self) -> float:
        return self.end - self.days * plan.DAY

    @property
    def awake_seconds(self) -> float:
        return sum(b - a for a, b in self.awake)


def read(
    conn: psycopg.Connection[Any],
    table: JobTable,
    *,
    days: float = DEFAULT_DAYS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
) -> Report:
    """Read the report of ``table`` over the last ``days``, in one read-only snapshot.

    Raises :class:`~drain.core.errors.SchemaError` when the queue table does not
    exist, as ``drain status`` does.
    """
    check_days(days)
    with conn.transaction():
        # The isolation level must come before any statement of the transaction;
        # status.read's own transaction is then a savepoint inside this snapshot.
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        found = status.read(
            conn, table, idle_timeout=idle_timeout, errors=FAILED_SHOWN, runs=MAX_RUNS
        )
    return assemble(found, days, idle_timeout)


def assemble(found: status.Status, days: float, idle_timeout: float) -> Report:
    """The report of a status snapshot: its runs placed on the database clock and merged."""
    now = found.database_time.timestamp()
    begin = now - days * plan.DAY
    spans = [
        RunSpan(record, record.started_at.timestamp(), now - record.finished_seconds_ago)
        for record in reversed(found.runs or [])
    ]
    awake = drawing.awake_spans(((run.start, run.end) for run in spans), idle_timeout)
    return Report(
        status=found,
        days=days,
        idle_timeout=idle_timeout,
        runs=tuple(run for run in spans if run.start >= begin),
        awake=tuple(drawing.clip(awake, begin, now)),
        truncated=len(spans) >= MAX_RUNS and spans[0].start >= begin,
    )


def check_days(days: float, option: str = "--days") -> None:
    """A window of a positive number of days, at most a year (as drain plan's)."""
    if not 0 < days <= MAX_DAYS:
        raise UsageError(f"{option} must be above 0 and at most {MAX_DAYS:g}")


def report_path(value: str, option: str = "--html") -> Path:
    """The HTML file to write, refused up front if it can never be written there."""
    return drawing.output_path(value, option, ".html")


def write(path: Path, text: str) -> None:
    """Write the page atomically: a reader sees the old page or the new, never half."""
    drawing.write_file(path, text)


# -- the page ---------------------------------------------------------------------------


def render(report: Report, redactor: Callable[[str], str] | None = None) -> str:
    """The whole page as text: XHTML-shaped, so an XML parser reads it as well as a browser."""
    clean = redactor or Redactor()
    found = report.status
    table = found.table.qualified
    parts = [
        "<!DOCTYPE html>\n",
        '<html lang="en"><head><meta charset="utf-8"/>',
        f"<title>{_e(f'drain report: {table}')}</title>",
        f"<style>{PAGE_STYLE}</style></head><body>",
        f"<h1>{_e(f'drain report: {table}')}</h1>",
        _as_of(report),
        *_queues(found),
        *_timeline(report),
        *_throughput(report),
        *_failures(report, clean),
        *_attention(found, clean),
        "</body></html>\n",
    ]
    return "".join(parts)


def summary_line(path: Path | str, report: Report) -> str:
    """What ``drain report`` prints once the file is written."""
    found = report.status
    failed = found.totals["failed"]
    return (
        f"wrote {path}: {found.table.qualified}, {len(report.runs):,} run(s) and "
        f"{len(report.awake):,} awake period(s) in the last {_days(report.days)}, "
        f"{failed:,} failed job(s), as of {_when(found.database_time)}"
    )


def _as_of(report: Report) -> str:
    found = report.status
    moment = found.database_time
    return (
        f'<p class="asof">as of <time datetime="{_e(moment.isoformat())}">'
        f"{_e(_when(moment))}</time> (the database's clock), PostgreSQL "
        f"{_e(found.server_version)}; runs of the last {_e(_days(report.days))}, "
        f"idle timeout {_e(format_duration(report.idle_timeout))}</p>"
    )


def _queues(found: status.Status) -> list[str]:
    parts = ["<h2>Queues</h2>"]
    if not found.queues:
        return [*parts, '<p class="note">none: the table is empty</p>']
    header = ["queue", "ready", "scheduled", "running", "expired", "done", "failed"]
    header += ["oldest ready", "next due"]
    rows = []
    for q in found.queues:
        counts = [q.ready, q.scheduled, q.running, q.expired, q.done, q.failed]
        ages = [_age(q.oldest_ready_seconds), _age(q.next_scheduled_seconds)]
        rows.append([q.queue, *(f"{n:,}" for n in counts), *ages])
    if len(found.queues) > 1:
        totals = found.totals
        keys = ("ready", "scheduled", "running", "expired", "done", "failed")
        rows.append(
            ["(all)", *(f"{totals[k]:,}" for k in keys), _age(found.oldest_ready_seconds), ""]
        )
    return [*parts, _table(header, rows, numeric=range(1, 9))]


def _timeline(report: Report) -> list[str]:
    parts = ["<h2>Runs and awake time</h2>"]
    if report.status.runs is None:
        return [*parts, '<p class="note">no run table (drain init creates drain_runs)</p>']
    where = report.status.database_time.tzinfo or UTC
    bars = [
        drawing.Bar(run.start, run.end, _run_title(run, where), run.failed) for run in report.runs
    ]
    lane = drawing.Lane(report.status.table.qualified, report.awake, bars)
    share = report.awake_seconds / (report.end - report.begin)
    parts += [
        '<p class="legend"><span style="background:#f6c453"></span>awake '
        "(each run plus the idle timeout, merged where they touch)"
        '<span style="background:#1f5fa8"></span>a run'
        '<span style="background:#c0392b"></span>a run that failed</p>',
        drawing.timeline_svg([lane], report.begin, report.end, where),
        f'<p class="note">{len(report.runs):,} run(s); awake '
        f"{_e(plan.span_text(report.awake_seconds))} in {len(report.awake):,} "
        f"period(s), {share:.1%} of the window</p>",
    ]
    if report.truncated:
        parts.append(
            f'<p class="note">only the latest {MAX_RUNS:,} runs are drawn: the window '
            "holds more; a shorter --days shows them all</p>"
        )
    return parts


def _throughput(report: Report) -> list[str]:
    parts = ["<h2>Throughput per run</h2>"]
    if not report.runs:
        return [*parts, '<p class="note">no runs in the window</p>']
    where = report.status.database_time.tzinfo or UTC
    shown = report.runs[-THROUGHPUT_RUNS:]
    values = [(_run_title(run, where), run.jobs_per_second, run.failed) for run in shown]
    note = f"the latest {len(shown):,} runs, oldest first" if len(shown) < len(report.runs) else ""
    parts.append(drawing.bar_chart_svg(values, unit="jobs/s"))
    if note:
        parts.append(f'<p class="note">{_e(note)}</p>')
    return parts


def _failures(report: Report, clean: Callable[[str], str]) -> list[str]:
    found = report.status
    parts = [f"<h2>Failed jobs ({found.totals['failed']:,}, newest first)</h2>"]
    if not found.failed:
        parts.append('<p class="note">none</p>')
    else:
        rows = [
            [str(job.id), job.queue, str(job.attempts), clean(job.error or "(no error recorded)")]
            for job in found.failed
        ]
        parts.append(_table(["job", "queue", "attempts", "last error"], rows, numeric=(0, 2)))
    erred = [run for run in reversed(report.runs) if run.record.error]
    if erred:
        where = found.database_time.tzinfo or UTC
        parts.append("<h2>Runs that ended with an error</h2>")
        rows = [
            [
                _clock(run.start, where),
                f"{run.record.exit_reason} (exit {run.record.exit_code})",
                clean(run.record.error or ""),
            ]
            for run in erred[:FAILED_SHOWN]
        ]
        parts.append(_table(["started", "ended", "error"], rows, numeric=()))
    return parts


def _attention(found: status.Status, clean: Callable[[str], str]) -> list[str]:
    if not found.attention:
        return []
    items = "".join(f"<li>{_e(clean(item))}</li>" for item in found.attention)
    return ["<h2>Needs attention</h2>", f"<ul>{items}</ul>"]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Any) -> str:
    numbers = set(numeric)
    head = "".join(f"<th>{_e(cell)}</th>" for cell in header)
    body = []
    for row in rows:
        cells = []
        for k, cell in enumerate(row):
            kind = ' class="n"' if k in numbers else ""
            if header[k] in ("last error", "error"):
                kind = ' class="error"'
            cells.append(f"<td{kind}>{_e(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _run_title(run: RunSpan, where: Any) -> str:
    r = run.record
    return (
        f"{_clock(run.start, where)}: {r.exit_reason} (exit {r.exit_code}) in {r.seconds:.1f} s, "
        f"claimed {r.claimed:,}, done {r.done:,}, retried {r.retried:,}, failed {r.failed:,}, "
        f"{run.jobs_per_second:,.1f} jobs/s"
    )


def _clock(moment: float, where: Any) -> str:
    return datetime.fromtimestamp(moment, where).strftime("%Y-%m-%d %H:%M:%S")


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _days(days: float) -> str:
    return "1 day" if days == 1 else f"{days:g} days"


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(round(max(seconds, 0.0)))


def _e(text: str) -> str:
    return html.escape(text, quote=True)


# -- drain run --report -----------------------------------------------------------------


def run_observer(value: object, config: RunConfig, environ: Mapping[str, str]) -> Observer:
    """``drain run --report FILE``: write the report once the run is over.

    The window and idle timeout are ``drain report``'s own variables
    (``DRAIN_REPORT_DAYS``, ``DRAIN_IDLE_TIMEOUT``) when set, else a week and
    the default timeout; a bad value is refused before the run starts.
    """
    path = report_path(str(value), "--report")
    days = _from_environment(REPORT_DAYS, environ)
    check_days(days, REPORT_DAYS.envvar)
    return ReportObserver(path, config, days, _from_environment(REPORT_IDLE_TIMEOUT, environ))


def _from_environment(setting: Setting, environ: Mapping[str, str]) -> Any:
    """``drain report``'s own setting, from its variable when set (errors name it)."""
    text = environ.get(setting.envvar, "").strip()
    return setting.parse(text, setting.envvar) if text else setting.default


class ReportObserver(Observer):
    """Writes the HTML report at the end of the run, on a short connection of its own.

    The run's own session is still open but belongs to the run; this one is
    opened, used for the one snapshot and closed. A failure costs one warning
    line and never changes how the run exits.
    """

    def __init__(self, path: Path, config: RunConfig, days: float, idle_timeout: float) -> None:
        self.path = path
        self.config = config
        self.days = days
        self.idle_timeout = idle_timeout
        self.redactor = Redactor(config.connect.dsn)

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        try:
            report = self._read()
            write(self.path, render(report, self.redactor))
        except Exception as exc:  # a report is a courtesy: nothing it does may fail the run
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else describe(exc)
            log.warning(
                "could not write the report to %s: %s",
                self.redactor(str(self.path)),
                self.redactor(str(reason)),
            )

    def _read(self) -> Report:
        from drain.store.db import Session

        connect = self.config.connect._replace(
            application_name=APPLICATION_NAME, retry_for=min(self.config.connect.retry_for, 5.0)
        )
        session = Session(connect)
        try:
            return session.call(
                lambda conn: read(
                    conn, self.config.table, days=self.days, idle_timeout=self.idle_timeout
                )
            )
        finally:
            session.close()


__all__ = [
    "DEFAULT_DAYS",
    "Report",
    "ReportObserver",
    "assemble",
    "read",
    "render",
    "report_path",
    "run_observer",
    "summary_line",
    "write",
]
