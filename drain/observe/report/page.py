"""The report's page: one HTML file, read top to bottom in the order a person asks.

First what to do (what needs attention, when the last run was and the last one
that drained), then the queues, then the week: runs and awake time on one time
axis with each run's throughput under it, so a slow run and its hour are read
off one vertical line; then the latest runs as a table and the failed jobs.
Runs are marked by how they ended: drained, work left behind (exit 3, such as
the time budget), or failed.

The page is HTML, never Markdown: where a sentence of :mod:`drain.ops.status`
quotes a command between backticks, the command becomes a ``<code>`` element.
Every text is escaped with :func:`html.escape`, and every error text passes
through the redactor first, so neither markup nor a password can reach the page.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from drain.core.durations import format_duration
from drain.core.redact import Redactor
from drain.observe.report.read import FAILED_SHOWN, MAX_RUNS, RECENT_RUNS, Report, RunSpan
from drain.ops import status
from drain.planning import drawing, plan

# The colours of drawing.STYLE, for the legend and the marks in the tables.
COLOURS = {"awake": "#f6c453", "": "#1f5fa8", "left": "#8e44ad", "failed": "#c0392b"}
KIND_WORDS = {
    "": "drained (exit 0)",
    "left": "work left, such as the time budget (exit 3)",
    "failed": "failed (exit 1 or 2)",
}

PAGE_STYLE = (
    "body{font:14px/1.4 sans-serif;color:#222;background:#fff;margin:24px;max-width:1000px}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}"
    ".asof{color:#555;margin:0}"
    ".headline{margin:12px 0;padding:8px 12px;background:#f4f6f8;border-left:4px solid #1f5fa8}"
    ".headline p{margin:2px 0}"
    ".attention{border-left:4px solid #c0392b;padding:2px 12px;margin:8px 0}"
    ".attention ul{margin:4px 0;padding-left:18px}.calm{border-left-color:#2e8b57}"
    "code{font-family:monospace;background:#eef1f4;padding:0 3px}"
    "table{border-collapse:collapse}th,td{padding:3px 10px;border-bottom:1px solid #ddd}"
    "th{text-align:left;background:#f4f6f8}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "td.error{font-family:monospace;font-size:12px;word-break:break-all}"
    ".mark{display:inline-block;width:12px;height:12px;vertical-align:middle;margin:0 6px 0 0}"
    ".legend .mark{margin-left:12px}"
    ".note{color:#555}" + drawing.STYLE
)


def render(report: Report, redactor: Callable[[str], str] | None = None) -> str:
    """The whole page as text: XHTML-shaped, so an XML parser reads it as well as a browser."""
    clean = redactor or Redactor()
    title = _e(f"drain report: {report.status.table.qualified}")
    parts = [
        "<!DOCTYPE html>\n",
        '<html lang="en"><head><meta charset="utf-8"/>',
        f"<title>{title}</title>",
        f"<style>{PAGE_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        _as_of(report),
        *_attention(report.status, clean),
        *_headline(report, clean),
        *_queues(report.status),
        *_timeline(report),
        *_recent(report),
        *_failures(report, clean),
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


def _attention(found: status.Status, clean: Callable[[str], str]) -> list[str]:
    """What to look at first; said in so many words when there is nothing."""
    if not found.attention:
        return [
            '<h2>Needs attention</h2><div class="attention calm">'
            '<p class="note">nothing (as drain status would exit 0)</p></div>'
        ]
    items = "".join(f"<li>{_prose(clean(item))}</li>" for item in found.attention)
    return [f'<h2>Needs attention</h2><div class="attention"><ul>{items}</ul></div>']


def _headline(report: Report, clean: Callable[[str], str]) -> list[str]:
    """The last run and the last one that drained, with how long ago each ended."""
    if report.status.runs is None:
        return []
    last, success = report.last_run, report.last_success
    same = last is not None and last is success
    found = _e("the last run") if same else _run_line(report, success, clean)
    lines = [
        f"<p><strong>Last run:</strong> {_run_line(report, last, clean)}</p>",
        f"<p><strong>Last success:</strong> {found}</p>",
    ]
    return [f'<div class="headline">{"".join(lines)}</div>']


def _run_line(report: Report, run: RunSpan | None, clean: Callable[[str], str]) -> str:
    if run is None:
        read = len(report.status.runs or [])
        return _e("none recorded" if read < MAX_RUNS else f"none in the latest {read:,} runs")
    r = run.record
    ago = plan.span_text(max(report.end - run.end, 0.0))
    text = (
        f"{_clock(run.start, _zone(report))}, {run.ended} after {r.seconds:.1f} s "
        f"(done {r.done:,}, retried {r.retried:,}, failed {r.failed:,}); ended {ago} ago"
    )
    error = f": {clean(r.error)}" if r.error else ""
    return f"{_mark(run.kind)}{_e(text + error)}"


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
    """Runs, awake time and throughput on one time axis: the day lines run through all three."""
    parts = ["<h2>Runs, awake time and throughput</h2>"]
    if report.status.runs is None:
        return [*parts, '<p class="note">no run table (drain init creates drain_runs)</p>']
    where = _zone(report)
    bars = [
        drawing.Bar(run.start, run.end, _run_title(run, where), run.kind) for run in report.runs
    ]
    lane = drawing.Lane(report.status.table.qualified, report.awake, bars)
    throughput = [(bar, run.jobs_per_second) for bar, run in zip(bars, report.runs, strict=True)]
    # no runs, no chart: an empty frame would read as runs of no throughput
    chart = drawing.Chart(throughput, "jobs/s") if throughput else None
    share = report.awake_seconds / (report.end - report.begin)
    legend = "".join(f"{_mark(kind)}{_e(KIND_WORDS[kind])}" for kind in drawing.KINDS)
    parts += [
        f'<p class="legend">{_mark("awake")}awake (each run plus the idle timeout, merged '
        f"where they touch){legend}</p>",
        drawing.timeline_svg([lane], report.begin, report.end, where, chart=chart),
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


def _recent(report: Report) -> list[str]:
    """The latest runs, newest first, each marked by how it ended."""
    if not report.runs:
        return [] if report.status.runs is None else ['<p class="note">no runs in the window</p>']
    where = _zone(report)
    shown = list(reversed(report.runs))[:RECENT_RUNS]
    header = ["started", "ended", "seconds", "claimed", "done", "retried", "failed", "jobs/s"]
    rows = []
    for run in shown:
        r = run.record
        counts = (r.claimed, r.done, r.retried, r.failed)
        rows.append(
            [_clock(run.start, where), f"{run.ended} (exit {r.exit_code})", f"{r.seconds:.1f}"]
            + [f"{n:,}" for n in counts]
            + [f"{run.jobs_per_second:,.1f}"]
        )
    marks = [_mark(run.kind) for run in shown]
    table = _table(header, rows, numeric=range(2, 8), marks=marks, kinds=[r.kind for r in shown])
    return [f"<h2>Recent runs (the latest {len(shown):,}, newest first)</h2>", table]


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
        where = _zone(report)
        parts.append("<h2>Runs that ended with an error</h2>")
        shown = erred[:FAILED_SHOWN]
        rows = [
            [
                _clock(run.start, where),
                f"{run.ended} (exit {run.record.exit_code})",
                clean(run.record.error or ""),
            ]
            for run in shown
        ]
        marks = [_mark(run.kind) for run in shown]
        parts.append(_table(["started", "ended", "error"], rows, numeric=(), marks=marks))
    return parts


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: Any,
    *,
    marks: Sequence[str] = (),
    kinds: Sequence[str] = (),
) -> str:
    """A table of escaped cells; ``marks`` (markup) lead each row's second cell when given."""
    numbers = set(numeric)
    head = "".join(f"<th>{_e(cell)}</th>" for cell in header)
    body = []
    for n, row in enumerate(rows):
        cells = []
        for k, cell in enumerate(row):
            kind = ' class="n"' if k in numbers else ""
            if header[k] in ("last error", "error"):
                kind = ' class="error"'
            mark = marks[n] if marks and k == 1 else ""
            cells.append(f"<td{kind}>{mark}{_e(cell)}</td>")
        row_class = "" if not kinds else f' class="{drawing.class_names("run", kinds[n])}"'
        body.append(f"<tr{row_class}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _mark(kind: str) -> str:
    """A small square in the colour a run of this kind (or the awake shading) has in the drawing."""
    return f'<span class="mark" style="background:{COLOURS[kind]}"></span>'


def _prose(text: str) -> str:
    """Escaped text where each `quoted command` (a Markdown habit of status's sentences) is code."""
    pieces = text.split("`")
    if len(pieces) % 2 == 0:  # an unpaired backtick is text, not markup
        return _e(text)
    return "".join(
        f"<code>{_e(piece)}</code>" if k % 2 else _e(piece) for k, piece in enumerate(pieces)
    )


def _run_title(run: RunSpan, where: tzinfo) -> str:
    r = run.record
    return (
        f"{_clock(run.start, where)}: {run.ended} (exit {r.exit_code}) in {r.seconds:.1f} s, "
        f"claimed {r.claimed:,}, done {r.done:,}, retried {r.retried:,}, failed {r.failed:,}, "
        f"{run.jobs_per_second:,.1f} jobs/s"
    )


def _zone(report: Report) -> tzinfo:
    return report.status.database_time.tzinfo or UTC


def _clock(moment: float, where: tzinfo) -> str:
    return datetime.fromtimestamp(moment, where).strftime("%Y-%m-%d %H:%M:%S")


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _days(days: float) -> str:
    return "1 day" if days == 1 else f"{days:g} days"


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(round(max(seconds, 0.0)))


def _e(text: str) -> str:
    return html.escape(text, quote=True)
