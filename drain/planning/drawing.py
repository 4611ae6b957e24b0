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
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
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

STYLE = (
    ".awake{fill:#f6c453;fill-opacity:.55}"
    ".run{fill:#1f5fa8}.run.failed{fill:#c0392b}"
    ".track{fill:#eef1f4}.day{stroke:#9aa5b1;stroke-width:.5}"
    ".label,.tick{font:11px sans-serif;fill:#333}.tick{fill:#667}"
    ".bar{fill:#1f5fa8}.bar.failed{fill:#c0392b}"
)


@dataclass(frozen=True)
class Bar:
    """One run on a lane: its span in POSIX seconds and the words its tooltip says."""

    start: float
    end: float
    title: str
    failed: bool = False


@dataclass(frozen=True)
class Lane:
    """One row of the timeline: a label, the awake spans shaded, the runs drawn over them."""

    label: str
    awake: Sequence[tuple[float, float]]
    bars: Sequence[Bar] = field(default_factory=tuple)


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


def timeline_svg(
    lanes: Sequence[Lane],
    begin: float,
    end: float,
    where: tzinfo,
    *,
    title: str = "",
    standalone: bool = False,
) -> str:
    """The lanes between ``begin`` and ``end``, with a line and a label at each midnight in ``where``.

    ``standalone`` makes a file of its own (the XML declaration and namespace a
    viewer needs); without it, the element is for inlining in an HTML page.
    """
    height = AXIS_HEIGHT + len(lanes) * (LABEL_HEIGHT + TRACK_HEIGHT + LANE_GAP)
    parts = [_open_svg(WIDTH, height, standalone, title)]
    scale = WIDTH / (end - begin) if end > begin else 0.0

    def x(moment: float) -> float:
        return (moment - begin) * scale

    top = AXIS_HEIGHT
    for lane in lanes:
        parts.append(f'<text class="label" x="0" y="{top + 12}">{_text(lane.label)}</text>')
        track = top + LABEL_HEIGHT
        parts.append(
            f'<rect class="track" x="0" y="{track}" width="{WIDTH}" height="{TRACK_HEIGHT}"/>'
        )
        for a, b in clip(lane.awake, begin, end):
            parts.append(
                f'<rect class="awake" x="{x(a):.2f}" y="{track}" '
                f'width="{max(x(b) - x(a), MIN_BAR_WIDTH):.2f}" height="{TRACK_HEIGHT}">'
                f"<title>awake {_text(_clock(a, where))} to {_text(_clock(b, where))}</title>"
                "</rect>"
            )
        for bar in lane.bars:
            a, b = max(bar.start, begin), min(bar.end, end)
            kind = "run failed" if bar.failed else "run"
            parts.append(
                f'<rect class="{kind}" x="{x(a):.2f}" y="{track + 4}" '
                f'width="{max(x(b) - x(a), MIN_BAR_WIDTH):.2f}" height="{TRACK_HEIGHT - 8}">'
                f"<title>{_text(bar.title)}</title></rect>"
            )
        top = track + TRACK_HEIGHT + LANE_GAP
    parts += _day_lines(begin, end, where, x, height)
    parts.append("</svg>")
    return "".join(parts)


def _day_lines(
    begin: float, end: float, where: tzinfo, x: Callable[[float], float], height: int
) -> list[str]:
    """A line and a label at each midnight in ``where`` between ``begin`` and ``end``."""
    parts = []
    for moment in _midnights(begin, end, where):
        at = x(moment)
        label = datetime.fromtimestamp(moment, where).strftime("%a %d")
        parts.append(f'<line class="day" x1="{at:.2f}" y1="0" x2="{at:.2f}" y2="{height}"/>')
        parts.append(f'<text class="tick" x="{at + 2:.2f}" y="12">{_text(label)}</text>')
    return parts


def bar_chart_svg(values: Sequence[tuple[str, float, bool]], *, unit: str, title: str = "") -> str:
    """A small bar chart, one bar per ``(tooltip, value, failed)``, scaled to the largest."""
    height = CHART_HEIGHT + AXIS_HEIGHT
    parts = [_open_svg(WIDTH, height, False, title, "chart")]
    largest = max((value for _, value, _ in values), default=0.0)
    parts.append(f'<text class="tick" x="0" y="12">{_text(f"max {largest:,.1f} {unit}")}</text>')
    if values:
        step = WIDTH / len(values)
        width = max(step * 0.8, MIN_BAR_WIDTH)
        for k, (tooltip, value, failed) in enumerate(values):
            tall = CHART_HEIGHT * value / largest if largest > 0 else 0.0
            kind = "bar failed" if failed else "bar"
            parts.append(
                f'<rect class="{kind}" x="{k * step:.2f}" y="{height - tall:.2f}" '
                f'width="{width:.2f}" height="{tall:.2f}"><title>{_text(tooltip)}</title></rect>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _open_svg(width: int, height: int, standalone: bool, title: str, kind: str = "timeline") -> str:
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else ""
    namespace = f' xmlns="{SVG_NAMESPACE}"' if standalone else ""
    style = f"<style>{STYLE}</style>" if standalone else ""
    caption = f"<title>{_text(title)}</title>" if title else ""
    return (
        f'{head}<svg{namespace} class="{kind}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{caption}{style}'
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
