"""Pictures of awake time: the SVG timeline ``drain report`` and ``drain plan --svg`` share.

A scale-to-zero compute is billed while it is awake, so the one picture that
matters is when it was (or will be) awake: each run from its start to its end,
plus the idle timeout after it, with spans that touch merged, exactly the model
``drain plan`` computes with (:func:`drain.planning.timeline.merge_spans`). The recorded week of
``drain report`` and the predicted week of ``drain plan --svg`` are drawn by the
same function, so a plan and what happened can be held side by side.

Everything here but the two file helpers at the end is a pure function of its
inputs, returning text: no clock, no database, no file. Every text that reaches the drawing (a queue's name, a
schedule, a file name) goes through :func:`html.escape`, so a name can never
become markup. The drawings use no script, no font file and no link: the only
URL in them is the SVG namespace a standalone file must declare.
"""

from __future__ import annotations

import html
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path

from drain.core.errors import UsageError
from drain.planning import plan, timeline
from drain.planning.cron import zone as cron_zone

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
WIDTH = 960
LABEL_HEIGHT = 16
TRACK_HEIGHT = 22
LANE_GAP = 10
AXIS_HEIGHT = 18
# A run of a second in a week is far below a pixel: drawn this wide so it shows at all.
MIN_BAR_WIDTH = 1.0
CHART_HEIGHT = 120
# The room a day label needs: 11px sans-serif is about 6.5px a character, plus a margin.
CHARACTER_WIDTH = 6.5
LABEL_MARGIN = 4.0
# Day labels from the longest to the shortest: the longest that fits a day is used.
DAY_FORMATS = ("%a %d %b", "%a %d", "%d")
# Too many days for any of them: a label every few days, with the month.
SPARSE_FORMAT = "%d %b"

STYLE = (
    ".background{fill:#fff}"
    ".awake{fill:#f6c453;fill-opacity:.55}"
    ".run{fill:#1f5fa8}.run.left{fill:#8e44ad}.run.failed{fill:#c0392b}"
    ".track{fill:#eef1f4}.day{stroke:#9aa5b1;stroke-width:.5}"
    ".label,.tick{font:11px sans-serif;fill:#333}.tick{fill:#667}"
    ".bar{fill:#1f5fa8}.bar.left{fill:#8e44ad}.bar.failed{fill:#c0392b}"
    ".baseline{stroke:#9aa5b1;stroke-width:1}"
)

# How a run ended, as the class its bar carries: drained (no class), work left at exit 3
# (the budget, a signal, a cap), or failed (exit 1 or 2).
KINDS = ("", "left", "failed")


@dataclass(frozen=True)
class Bar:
    """One run on a lane: its span in POSIX seconds, its tooltip, and how it ended (:data:`KINDS`)."""

    start: float
    end: float
    title: str
    kind: str = ""


@dataclass(frozen=True)
class Lane:
    """One row of the timeline: a label, the awake spans shaded, the runs drawn over them."""

    label: str
    awake: Sequence[tuple[float, float]]
    bars: Sequence[Bar] = field(default_factory=tuple)


@dataclass(frozen=True)
class Chart:
    """Bars of a value per run, drawn under the lanes on the same time axis.

    Each bar stands where its run stands on the timeline, so a slow run and its
    place in the day are read off one vertical line.
    """

    bars: Sequence[tuple[Bar, float]]
    unit: str


def awake_spans(
    runs: Iterable[tuple[float, float]], idle_timeout: float
) -> list[tuple[float, float]]:
    """When the compute was awake: each run ``(start, end)`` plus ``idle_timeout``, merged.

    The same rule as ``drain plan``'s: spans that touch or overlap are one awake
    period, since the compute never got to sleep between them.
    """
    starts, ends = timeline.merge_spans((start, end + idle_timeout) for start, end in runs)
    return list(zip(starts, ends, strict=True))


def clip(
    spans: Iterable[tuple[float, float]], begin: float, end: float
) -> list[tuple[float, float]]:
    """The parts of ``spans`` inside ``[begin, end)``; a span wholly outside is dropped."""
    return [(max(a, begin), min(b, end)) for a, b in spans if b > begin and a < end]


def plan_lane(result: plan.Plan, label: str) -> Lane:
    """The awake periods of a plan's timeline over its window, as :func:`plan.plan_in` saw them."""
    where = cron_zone(result.timezone)
    begin, end = result.window.start.timestamp(), result.window.end.timestamp()
    line = timeline.timeline(result.schedules, where, begin, end, result.idle_timeout)
    return Lane(label, clip(zip(line.span_starts, line.span_ends, strict=True), begin, end))


def plan_svg(results: Sequence[tuple[str | None, plan.Plan]]) -> str:
    """``drain plan --svg``: one lane per plan over the (shared) window, a standalone file."""
    first = results[0][1]
    lanes = [plan_lane(result, _plan_label(source, result)) for source, result in results]
    title = f"drain plan: awake periods, {first.window.start:%a %Y-%m-%d} ({first.timezone})"
    return timeline_svg(
        lanes,
        first.window.start.timestamp(),
        first.window.end.timestamp(),
        cron_zone(first.timezone),
        title=title,
        standalone=True,
    )


def _plan_label(source: str | None, result: plan.Plan) -> str:
    expressions = ", ".join(schedule.expression for schedule in result.schedules)
    awake = plan.span_text(result.window.awake_seconds)
    where = f"{source}: " if source else ""
    return f"{where}{expressions} (awake {awake}, {result.window.resumes} resumes)"


class _Axis:
    """The time axis every part of one drawing shares: seconds to pixels, and the days."""

    def __init__(self, begin: float, end: float, where: tzinfo) -> None:
        self.begin, self.end, self.where = begin, end, where
        self.scale = WIDTH / (end - begin) if end > begin else 0.0

    def x(self, moment: float) -> float:
        return (moment - self.begin) * self.scale

    def width(self, a: float, b: float) -> float:
        return max(self.x(b) - self.x(a), MIN_BAR_WIDTH)

    def lines(self, top: float, bottom: float) -> list[str]:
        """A line at each midnight inside the window, from ``top`` to ``bottom``."""
        return [
            f'<line class="day" x1="{self.x(m):.2f}" y1="{top}" x2="{self.x(m):.2f}" y2="{bottom}"/>'
            for m in _midnights(self.begin, self.end, self.where)
        ]

    def labels(self) -> list[str]:
        """A label on every day that has room for one, starting at its midnight or the window's start.

        The format is the longest of :data:`DAY_FORMATS` a whole day has room
        for; a part-day at either end of the window is labelled only when its
        label fits before the next line, so no label runs over a tick. Where
        not even a day's number fits (a window of months), every few days get
        a label with the month (:data:`SPARSE_FORMAT`).
        """
        days = _day_starts(self.begin, self.end, self.where)
        day_width = plan.DAY * self.scale
        shape = next((f for f in DAY_FORMATS if _label_width(f) <= day_width), SPARSE_FORMAT)
        every = max(1, math.ceil(_label_width(shape) / day_width)) if day_width > 0 else 1
        found = []
        for k, (a, b) in enumerate(zip(days, [*days[1:], self.end], strict=True)):
            text = datetime.fromtimestamp(a, self.where).strftime(shape)
            room = self.x(b) - self.x(a) if every == 1 else day_width * every
            if k % every or room < _label_width(shape) or self.x(a) + _label_width(shape) > WIDTH:
                continue
            found.append(f'<text class="tick" x="{self.x(a) + 2:.2f}" y="12">{_text(text)}</text>')
        return found


def timeline_svg(
    lanes: Sequence[Lane],
    begin: float,
    end: float,
    where: tzinfo,
    *,
    title: str = "",
    standalone: bool = False,
    chart: Chart | None = None,
) -> str:
    """The lanes between ``begin`` and ``end``, a line at each midnight in ``where``, each day labelled.

    The day lines cross the tracks and the chart but not the lanes' labels, so
    a long label stays legible. ``standalone`` makes a file of its own (the XML
    declaration and namespace a viewer needs); without it, the element is for
    inlining in an HTML page. Both have a background of their own, so a dark
    viewer or page shows the drawing as it is meant.
    """
    axis = _Axis(begin, end, where)
    lane_height = LABEL_HEIGHT + TRACK_HEIGHT + LANE_GAP
    height = AXIS_HEIGHT + len(lanes) * lane_height + (CHART_HEIGHT + LANE_GAP if chart else 0)
    parts = [_open_svg(WIDTH, height, standalone, title)]
    parts += axis.lines(0, AXIS_HEIGHT)
    top = AXIS_HEIGHT
    for lane in lanes:
        parts += _lane(lane, axis, top)
        top += lane_height
    if chart is not None:
        parts += _chart(chart, axis, top)
    parts += axis.labels()
    parts.append("</svg>")
    return "".join(parts)


def _lane(lane: Lane, axis: _Axis, top: float) -> list[str]:
    track = top + LABEL_HEIGHT
    parts = [
        f'<text class="label" x="0" y="{top + 12}">{_text(lane.label)}</text>',
        f'<rect class="track" x="0" y="{track}" width="{WIDTH}" height="{TRACK_HEIGHT}"/>',
    ]
    for a, b in clip(lane.awake, axis.begin, axis.end):
        parts.append(
            f'<rect class="awake" x="{axis.x(a):.2f}" y="{track}" '
            f'width="{axis.width(a, b):.2f}" height="{TRACK_HEIGHT}">'
            f"<title>awake {_text(_clock(a, axis.where))} to {_text(_clock(b, axis.where))}</title>"
            "</rect>"
        )
    for bar in lane.bars:
        a, b = max(bar.start, axis.begin), min(bar.end, axis.end)
        parts.append(
            f'<rect class="{class_names("run", bar.kind)}" x="{axis.x(a):.2f}" y="{track + 4}" '
            f'width="{axis.width(a, b):.2f}" height="{TRACK_HEIGHT - 8}">'
            f"<title>{_text(bar.title)}</title></rect>"
        )
    return [*parts, *axis.lines(track, track + TRACK_HEIGHT)]


def _chart(chart: Chart, axis: _Axis, top: float) -> list[str]:
    """The chart's bars at their runs' places, scaled to the largest value, with its maximum."""
    bottom = top + CHART_HEIGHT
    largest = max((value for _, value in chart.bars), default=0.0)
    parts = [
        *axis.lines(top, bottom),
        f'<line class="baseline" x1="0" y1="{bottom}" x2="{WIDTH}" y2="{bottom}"/>',
    ]
    for bar, value in chart.bars:
        a, b = max(bar.start, axis.begin), min(bar.end, axis.end)
        tall = (CHART_HEIGHT - LABEL_HEIGHT) * value / largest if largest > 0 else 0.0
        parts.append(
            f'<rect class="{class_names("bar", bar.kind)}" x="{axis.x(a):.2f}" '
            f'y="{bottom - tall:.2f}" width="{max(axis.width(a, b), 2.0):.2f}" '
            f'height="{tall:.2f}"><title>{_text(bar.title)}</title></rect>'
        )
    scale = f"{chart.unit}, per run at its start: max {largest:,.1f}"
    parts.append(f'<text class="label" x="0" y="{top + 12}">{_text(scale)}</text>')
    return parts


def class_names(base: str, kind: str) -> str:
    """The class attribute of a run's mark: ``run``, ``run left``, ``run failed``."""
    return f"{base} {kind}" if kind else base


def _label_width(shape: str) -> float:
    sample = datetime(2026, 12, 30, 0, 0).strftime(shape)
    return len(sample) * CHARACTER_WIDTH + LABEL_MARGIN


def _open_svg(width: int, height: int, standalone: bool, title: str, kind: str = "timeline") -> str:
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else ""
    namespace = f' xmlns="{SVG_NAMESPACE}"' if standalone else ""
    style = f"<style>{STYLE}</style>" if standalone else ""
    caption = f"<title>{_text(title)}</title>" if title else ""
    return (
        f'{head}<svg{namespace} class="{kind}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{caption}{style}'
        f'<rect class="background" x="0" y="0" width="{width}" height="{height}"/>'
    )


def _midnights(begin: float, end: float, where: tzinfo) -> list[float]:
    """Each midnight in ``where`` strictly after ``begin`` and before ``end``."""
    day = datetime.fromtimestamp(begin, where).date()
    found: list[float] = []
    while True:
        day += timedelta(days=1)
        moment = datetime(day.year, day.month, day.day, tzinfo=where).timestamp()
        if moment >= end:
            return found
        found.append(moment)


def _day_starts(begin: float, end: float, where: tzinfo) -> list[float]:
    """Where each day of the window starts: ``begin`` (a midnight or not), then each midnight."""
    return [begin, *_midnights(begin, end, where)]


def _clock(moment: float, where: tzinfo) -> str:
    return datetime.fromtimestamp(moment, where).strftime("%a %Y-%m-%d %H:%M:%S")


def _text(text: str) -> str:
    return html.escape(text, quote=True)


# -- the files they go to ---------------------------------------------------------------


def output_path(value: str, option: str, suffix: str) -> Path:
    """The file ``option`` names, refused up front if it can never be written there.

    Checked before anything is read or computed, so a typo costs a usage error,
    not a report thrown away at the end.
    """
    if not value.strip():
        raise UsageError(f"{option} is empty: give the {suffix} file to write")
    path = Path(value)
    directory = path.parent
    if not directory.is_dir():
        raise UsageError(f"{option}: the directory {str(directory)!r} does not exist")
    if path.is_dir():
        raise UsageError(f"{option} {value!r} is a directory, not a file")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{option}: cannot write in {str(directory)!r}")
    return path


def write_file(path: Path, text: str) -> None:
    """Write ``text`` atomically (a temporary file, then a rename): never half a file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
