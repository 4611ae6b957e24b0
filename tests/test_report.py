"""The report to look at: real runs recorded by `drain run`, drawn by `drain report`.

Each page is parsed twice: by the standard library's HTML parser (what a
browser-like reader sees: tags, attributes) and as XML (the page is written
XHTML-shaped, so a stray unescaped ``<`` or ``&`` fails the parse). What is
counted is what a reader would look at: one bar per run, the shaded awake
periods, the redacted error, the database's time.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from drain.planning import drawing, plan, timeline
from tests.support import add_jobs, drain_cli, programs, summary_of

PASSWORD = "Tr0ub4dor&3:report-pw"
LEAKY_DSN = f"postgresql://app:{PASSWORD}@db.example.com:5432/app"
REDACTED_DSN = "postgresql://app:********@db.example.com:5432/app"
SVG = "{http://www.w3.org/2000/svg}"
ODD_QUEUE = '<script>alert("q")</script> & https://example.com/'


class _Page(HTMLParser):
    """Every start tag with its attributes, and all text, as a browser's parser reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def classed(self, tag: str, name: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and name in a.get("class", "").split()]


def _read_page(path: Path) -> tuple[_Page, ET.Element, str]:
    raw = path.read_text(encoding="utf-8")
    assert raw.startswith("<!DOCTYPE html>\n")
    root = ET.fromstring(raw.removeprefix("<!DOCTYPE html>\n"))  # well-formed, or it raises
    page = _Page()
    page.feed(raw)
    page.close()
    return page, root, raw


def _self_contained(page: _Page, raw: str) -> None:
    """No script, and nothing that fetches: no URL in any attribute or any style."""
    assert "<script" not in raw.lower()
    assert {tag for tag, _ in page.tags}.isdisjoint({"script", "link", "img", "iframe", "object"})
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert "://" not in value, (tag, name, value)
    styles = "".join(el.text or "" for el in ET.fromstring(raw.split("\n", 1)[1]).iter("style"))
    assert "url(" not in styles and "@import" not in styles
    # a URL may appear only as (escaped) text, such as a redacted error, never as markup
    text = "".join(page.text)
    for scheme in ("http://", "https://"):
        assert raw.count(scheme) == text.count(scheme)


def _run_rows(conn: psycopg.Connection[Any], days: float = 7) -> list[tuple[float, float]]:
    rows = conn.execute(
        "SELECT extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8 "
        "FROM drain_runs WHERE started_at >= now() - make_interval(days => %s) "
        "ORDER BY started_at",
        (days,),
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def _as_of(root: ET.Element) -> datetime:
    (moment,) = root.iter("time")
    return datetime.fromisoformat(moment.attrib["datetime"])


def _prepare_runs(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Three real runs, two failed jobs whose error quotes a DSN with its password."""
    add_jobs(conn, 3)
    add_jobs(conn, 2, payload={"fail": f"could not reach {LEAKY_DSN}"})
    for _ in range(3):
        result = drain_cli("run", "--handler", "trace_handlers:work", dsn=dsn)
        assert result.returncode == 0, result.stderr
        add_jobs(conn, 1)


def test_the_report_draws_every_run_the_awake_periods_and_the_redacted_failures(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    _prepare_runs(dsn, conn)
    # one run two days back (its own awake period), one a week and more back (outside)
    conn.execute(
        "UPDATE drain_runs SET started_at = started_at - interval '2 days', "
        "finished_at = finished_at - interval '2 days' "
        "WHERE id = (SELECT min(id) FROM drain_runs)"
    )
    conn.execute(
        "UPDATE drain_runs SET started_at = started_at - interval '8 days', "
        "finished_at = finished_at - interval '8 days' "
        "WHERE id = (SELECT max(id) FROM drain_runs)"
    )
    in_window = _run_rows(conn)
    assert len(in_window) == 2
    add_jobs(conn, 1, queue=ODD_QUEUE)  # a queue whose name is markup stays text
    (before,) = conn.execute("SELECT now()").fetchone() or ()
    out = tmp_path / "report.html"

    result = drain_cli("report", "--html", str(out), "--idle-timeout", "10m", dsn=dsn)

    assert result.returncode == 0, result.stderr
    (after,) = conn.execute("SELECT now()").fetchone() or ()
    assert result.stdout.startswith(f"wrote {out}: public.jobs, 2 run(s) and 2 awake period(s)")
    page, root, raw = _read_page(out)
    _self_contained(page, raw)
    assert len(page.classed("rect", "run")) == 2  # one bar per run in the window
    # each run plus 10 min, merged where they touch: the old run apart, the recent alone
    expected = drawing.clip(
        zip(*timeline.merge_spans((a, b + 600) for a, b in in_window), strict=True),
        0,
        after.timestamp(),
    )
    assert len(page.classed("rect", "awake")) == len(expected) == 2
    text = "".join(page.text)
    assert REDACTED_DSN in text
    for form in (PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD), "Tr0ub4dor"):
        assert form not in raw
    assert before <= _as_of(root) <= after  # "as of" the database's own clock
    assert "as of" in text and "the database's clock" in text
    queues = [row for row in root.iter("tr") if [td.text for td in row][:1] == ["default"]]
    (row,) = queues
    cells = [td.text for td in row]
    assert cells[6] == "2"  # failed
    assert cells[1] == "1"  # ready: the job added after the last run
    (odd,) = [row for row in root.iter("tr") if [td.text for td in row][:1] == [ODD_QUEUE]]
    assert [td.text for td in odd][1] == "1"
    # the throughput chart has a bar per run, the failed-jobs table a row per failed job
    assert len(page.classed("rect", "bar")) == 2
    errors = [td for td in root.iter("td") if td.attrib.get("class") == "error"]
    assert len(errors) == 2 and all(REDACTED_DSN in (td.text or "") for td in errors)


def test_no_idle_timeout_draws_one_awake_period_per_run(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    _prepare_runs(dsn, conn)
    out = tmp_path / "report.html"
    result = drain_cli("report", "--html", str(out), "--idle-timeout", "0s", dsn=dsn)
    assert result.returncode == 0, result.stderr
    page, _, _ = _read_page(out)
    runs = _run_rows(conn)
    assert len(runs) == 3
    assert len(page.classed("rect", "run")) == 3
    # the runs were one after another: with no idle timeout, nothing joins them
    assert len(page.classed("rect", "awake")) == len(timeline.merge_spans(runs)[0]) == 3


def _record_run(conn: psycopg.Connection[Any], ago: str, reason: str, code: int) -> None:
    """A run as drain run records it (a budget stop or a failure needs no slow handler)."""
    conn.execute(
        "INSERT INTO drain_runs (jobs_table, started_at, finished_at, seconds, claimed, done, "
        "retried, failed, lost, reaped, released, archived, exit_reason, exit_code, error) "
        "VALUES ('public.jobs', now() - %s::interval - interval '30 s', now() - %s::interval, "
        "30, 40, 40, 0, 0, 0, 0, 0, 0, %s, %s, %s)",
        (ago, ago, reason, code, "server closed the connection" if code == 1 else None),
    )


def _section_order(page: _Page) -> list[str]:
    """The page's blocks in reading order: each h2's text, and the headline's place among them."""
    order: list[str] = []
    for tag, attrs in page.tags:
        if tag == "h2":
            order.append("h2")
        elif tag == "div" and "headline" in attrs.get("class", ""):
            order.append("headline")
    return order


def test_the_page_opens_with_attention_and_the_last_run_and_marks_how_each_run_ended(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    _prepare_runs(dsn, conn)  # three drained runs, two failed jobs, three hours back
    conn.execute(
        "UPDATE drain_runs SET started_at = started_at - interval '3 hours', "
        "finished_at = finished_at - interval '3 hours'"
    )
    _record_run(conn, "2 hours", "error", 1)
    _record_run(conn, "1 second", "budget", 3)  # the newest run stopped at its budget
    out = tmp_path / "report.html"

    result = drain_cli("report", "--html", str(out), dsn=dsn)

    assert result.returncode == 0, result.stderr
    page, root, raw = _read_page(out)
    _self_contained(page, raw)
    headings = ["".join(h.itertext()) for h in root.iter("h2")]
    assert headings[0] == "Needs attention"
    assert headings.index("Needs attention") < headings.index("Queues")
    assert _section_order(page)[:2] == ["h2", "headline"]  # attention, then the last run
    # no Markdown: the command quoted by status's sentence is a code element
    assert "`" not in raw
    assert "drain retry" in [el.text for el in root.iter("code")]
    (headline,) = [el for el in root.iter("div") if el.attrib.get("class") == "headline"]
    last, success = ("".join(p.itertext()) for p in headline.iter("p"))
    assert last.startswith("Last run: ") and "stopped at its time budget after 30.0 s" in last
    assert success.startswith("Last success: ") and ", drained after " in success
    # drained, work left and failed runs are drawn and listed apart
    kinds = sorted(attrs["class"] for attrs in page.classed("rect", "run"))
    assert kinds == ["run", "run", "run", "run failed", "run left"]
    rows = [tr for tr in root.iter("tr") if "run" in tr.attrib.get("class", "").split()]
    assert [tr.attrib["class"] for tr in rows][:2] == ["run left", "run failed"]
    assert len(rows) == 5  # the table of recent runs, newest first
    assert "".join(rows[0].itertext()).count("stopped at its time budget (exit 3)") == 1
    # each throughput bar stands on the time axis where its run stands on the timeline
    runs = sorted(float(a["x"]) for a in page.classed("rect", "run"))
    bars = sorted(float(a["x"]) for a in page.classed("rect", "bar"))
    assert bars == runs


def test_a_report_with_no_success_says_so(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    _record_run(conn, "1 minute", "error", 1)
    out = tmp_path / "report.html"
    result = drain_cli("report", "--html", str(out), dsn=dsn)
    assert result.returncode == 0, result.stderr
    _, root, _ = _read_page(out)
    (headline,) = [el for el in root.iter("div") if el.attrib.get("class") == "headline"]
    last, success = ("".join(p.itertext()) for p in headline.iter("p"))
    assert "stopped by an error after 30.0 s" in last and "server closed the connection" in last
    assert success == "Last success: none recorded"
    (calm,) = [el for el in root.iter("div") if "attention" in el.attrib.get("class", "")]
    assert "calm" in calm.attrib["class"]  # nothing in the table needs attention


def test_a_run_writes_the_report_at_its_end_and_its_exit_code_stays(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    add_jobs(conn, 2)
    add_jobs(conn, 1, payload={"fail": f"could not reach {LEAKY_DSN}"})
    out = tmp_path / "run-report.html"
    first = drain_cli(
        "run", "--handler", "trace_handlers:work", "--json", "--report", str(out), dsn=dsn
    )
    assert first.returncode == 0, first.stderr
    assert summary_of(first)["done"] == 2
    assert "could not write" not in first.stderr
    page, _, raw = _read_page(out)
    _self_contained(page, raw)
    assert len(page.classed("rect", "run")) == 1  # the run itself, recorded before the page
    assert REDACTED_DSN in "".join(page.text) and PASSWORD not in raw

    second = drain_cli("run", "--handler", "trace_handlers:work", "--report", str(out), dsn=dsn)
    assert second.returncode == 0, second.stderr
    page, _, _ = _read_page(out)
    assert len(page.classed("rect", "run")) == 2
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left


def test_a_report_that_cannot_be_written_costs_one_warning(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    add_jobs(conn, 1)
    # the job removes the folder the report goes to: writing fails at the end of the run
    result = drain_cli(
        "run", "--exec", f"rmdir {folder}", "--report", str(folder / "r.html"), "--json", dsn=dsn
    )
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["done"] == 1
    (warning,) = [line for line in result.stderr.splitlines() if "report" in line]
    assert warning.startswith(f"drain: could not write the report to {folder / 'r.html'}: ")
    assert not folder.exists()


def _awake_rects(path: Path) -> list[ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    return [el for el in root.iter(f"{SVG}rect") if el.attrib.get("class") == "awake"]


def test_plan_svg_draws_the_awake_spans_of_the_plan(tmp_path: Path) -> None:
    out = tmp_path / "week.svg"
    args = ("*/15 * * * *", "--run-seconds", "1m", "--idle-timeout", "5m")
    start = "2026-12-07T00:00+00:00"
    result = drain_cli("plan", *args, "--window", "1d", "--start", start, "--svg", str(out))
    assert result.returncode == 0, result.stderr
    frame = plan.Frame(start=datetime.fromisoformat(start), window=plan.DAY, idle_timeout=300.0)
    expected = plan.plan_in(frame, [plan.RunSchedule("*/15 * * * *", 60.0)])
    # every run of the day wakes the compute; none from the day before reaches into it
    assert expected.window.resumes == 96
    assert len(_awake_rects(out)) == expected.window.resumes
    raw = out.read_text()
    assert "<script" not in raw and "https://" not in raw

    # a schedule that never lets it sleep: one awake span across the whole day
    never = tmp_path / "never.svg"
    result = drain_cli("plan", "*/15 * * * *", "--window", "1d", "--svg", str(never))
    assert result.returncode == 1, result.stderr
    (span,) = _awake_rects(never)
    assert float(span.attrib["x"]) == 0 and float(span.attrib["width"]) == drawing.WIDTH


def _ticks(root: ET.Element) -> tuple[list[tuple[float, str]], list[float]]:
    """The day labels (x, text) and the x of every day line of a drawing."""
    labels = [
        (float(el.attrib["x"]), el.text or "")
        for el in root.iter(f"{SVG}text")
        if el.attrib.get("class") == "tick"
    ]
    lines = sorted({float(el.attrib["x1"]) for el in root.iter(f"{SVG}line")})
    return labels, lines


def test_plan_svg_labels_every_day_clear_of_the_next_line_on_a_background(
    tmp_path: Path,
) -> None:
    out = tmp_path / "week.svg"
    start = "2026-12-07T00:00+00:00"  # a Monday at midnight: the first day starts the window
    result = drain_cli(
        "plan", "0 */3 * * *", "--run-seconds", "2m", "--start", start, "--svg", str(out)
    )
    assert result.returncode == 0, result.stderr
    root = ET.parse(out).getroot()
    labels, lines = _ticks(root)
    assert [text for _, text in labels] == [
        "Mon 07 Dec", "Tue 08 Dec", "Wed 09 Dec", "Thu 10 Dec", "Fri 11 Dec", "Sat 12 Dec",
        "Sun 13 Dec",
    ]  # fmt: skip
    assert len(lines) == 6
    for (x, text), line in zip(labels, [*lines, drawing.WIDTH], strict=True):
        assert x + len(text) * drawing.CHARACTER_WIDTH < line  # clear of the next tick
    # the day lines cross the axis and the track, never the lane's label above the track
    label_row = (drawing.AXIS_HEIGHT, drawing.AXIS_HEIGHT + drawing.LABEL_HEIGHT)
    for el in root.iter(f"{SVG}line"):
        top, bottom = float(el.attrib["y1"]), float(el.attrib["y2"])
        assert bottom <= label_row[0] or top >= label_row[1], (top, bottom)
    background = next(el for el in root.iter(f"{SVG}rect"))
    assert background.attrib["class"] == "background"
    assert background.attrib["width"] == root.attrib["width"]
    assert background.attrib["height"] == root.attrib["height"]
    assert "fill:#fff" in "".join(el.text or "" for el in root.iter(f"{SVG}style"))


def test_plan_svg_of_a_month_labels_each_day_shorter_so_none_overlap(tmp_path: Path) -> None:
    out = tmp_path / "month.svg"
    start = "2026-12-01T00:00+00:00"
    result = drain_cli(
        "plan", "0 */3 * * *", "--run-seconds", "2m", "--window", "31d", "--start", start,
        "--svg", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    labels, _ = _ticks(ET.parse(out).getroot())
    assert [text for _, text in labels] == [f"{day:02d}" for day in range(1, 32)]
    for (x, text), (after, _) in itertools.pairwise(labels):
        assert x + len(text) * drawing.CHARACTER_WIDTH < after


def test_plan_svg_with_suggest_is_a_usage_error(tmp_path: Path) -> None:
    result = drain_cli("plan", "--suggest", "--max-wait", "1h", "--svg", str(tmp_path / "x.svg"))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "drain: error: --svg draws the schedules you give; --suggest proposes its own"
    )
    assert not (tmp_path / "x.svg").exists()


# -- the drawing alone ------------------------------------------------------------------


def test_touching_spans_merge_and_a_gap_sleeps() -> None:
    # 0-10 + 5 idle reaches 15, where the next run starts: one span; 100 is apart
    assert drawing.awake_spans([(15, 20), (0, 10), (100, 101)], 5) == [(0, 25), (100, 106)]
    assert drawing.clip([(0, 25), (100, 106)], 20, 103) == [(20, 25), (100, 103)]
    assert drawing.clip([(0, 5)], 10, 20) == []


def test_every_text_in_a_drawing_is_escaped() -> None:
    bar = drawing.Bar(11.0, 12.0, "<b>run</b> & 'more'", "failed")
    lane = drawing.Lane('<script>alert("x")</script> & co', [(10.0, 20.0)], [bar])
    chart = drawing.Chart([(bar, 3.0), (drawing.Bar(50.0, 51.0, "<i>"), 0.0)], "<u>jobs/s</u>")
    svg = drawing.timeline_svg([lane], 0.0, 100.0, plan.zone("UTC"), standalone=True, chart=chart)
    root = ET.fromstring(svg.split("\n", 1)[1])
    assert "<script" not in svg and "<b>" not in svg and "<i>" not in svg and "<u>" not in svg
    labels = [el.text for el in root.iter(f"{SVG}text")]
    assert '<script>alert("x")</script> & co' in labels
    assert "<u>jobs/s</u>, per run at its start: max 3.0" in labels
    titles = [el.text for el in root.iter(f"{SVG}title")]
    assert "<b>run</b> & 'more'" in titles and "<i>" in titles
    bars = [el for el in root.iter(f"{SVG}rect") if "bar" in el.attrib["class"].split()]
    assert [el.attrib["class"] for el in bars] == ["bar failed", "bar"]
    assert float(bars[1].attrib["height"]) == 0.0


def _chromium() -> str:
    return programs.need("chromium", "chromium-browser", "google-chrome", package="chromium")


def _distinct_pixels(png: bytes) -> int:
    """How many different bytes the image's rows hold: 1 or 2 for a blank page."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    data, offset = b"", 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind = png[offset + 4 : offset + 8]
        if kind == b"IDAT":
            data += png[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return len(set(zlib.decompress(data)))


def _white_share(png: bytes) -> float:
    """The share of the image's pixels that are white: the PNG's rows decoded, filters undone."""
    import struct
    import zlib

    width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    step = 3 if colour == 2 else 4
    data, offset = b"", 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        if png[offset + 4 : offset + 8] == b"IDAT":
            data += png[offset + 8 : offset + 8 + length]
        offset += 12 + length
    raw, stride = zlib.decompress(data), width * step
    previous, white = bytearray(stride), 0
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up, corner = previous[i], previous[i - step] if i >= step else 0
            guess = left + up - corner
            paeth = min(
                (abs(guess - left), 0, left),
                (abs(guess - up), 1, up),
                (abs(guess - corner), 2, corner),
            )[2]
            add = (0, left, up, (left + up) // 2, paeth)[kind]
            line[i] = (line[i] + add) & 0xFF
        white += sum(1 for i in range(0, stride, step) if min(line[i : i + 3]) >= 0xF0)
        previous = line
    return white / (width * height)


def test_a_headless_chromium_renders_the_report_as_a_page_that_is_not_blank(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    import subprocess

    _prepare_runs(dsn, conn)
    page = tmp_path / "report.html"
    result = drain_cli("report", "--html", str(page), dsn=dsn)
    assert result.returncode == 0, result.stderr
    picture = tmp_path / "report.png"
    rendered = subprocess.run(
        [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--window-size=1200,1400", f"--screenshot={picture}", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert picture.exists(), rendered.stderr
    assert _distinct_pixels(picture.read_bytes()) > 16, "the rendered page is blank"


def test_a_headless_chromium_renders_the_plan_drawing_on_its_background(tmp_path: Path) -> None:
    import subprocess

    drawing_file = tmp_path / "week.svg"
    result = drain_cli("plan", "0 */3 * * *", "--run-seconds", "2m", "--svg", str(drawing_file))
    assert result.returncode == 0, result.stderr
    # shown on a black page: without a background of its own the drawing would be black too
    page = tmp_path / "dark.html"
    page.write_text(
        '<!DOCTYPE html><html><body style="background:#000;margin:0">'
        f'<img src="{drawing_file.name}"/></body></html>'
    )
    picture = tmp_path / "plan.png"
    height = ET.parse(drawing_file).getroot().attrib["height"]  # the window shows it alone
    rendered = subprocess.run(
        [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--window-size=960,{height}", f"--screenshot={picture}", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert picture.exists(), rendered.stderr
    assert _distinct_pixels(picture.read_bytes()) > 16, "the rendered drawing is blank"
    assert _white_share(picture.read_bytes()) > 0.3, "the drawing has no background"


def test_a_table_with_no_runs_says_so_and_draws_no_throughput(dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = drain_cli("report", "--html", str(out), dsn=dsn)
    assert result.returncode == 0, result.stderr
    page, root, raw = _read_page(out)
    _self_contained(page, raw)
    (headline,) = [el for el in root.iter("div") if el.attrib.get("class") == "headline"]
    assert [("".join(p.itertext())) for p in headline.iter("p")] == [
        "Last run: none recorded",
        "Last success: none recorded",
    ]
    assert page.classed("rect", "run") == [] and page.classed("rect", "bar") == []
    assert page.classed("line", "baseline") == []  # no empty chart frame
    assert "no runs in the window" in "".join(page.text)


def test_a_window_of_months_labels_every_few_days_with_the_month_none_overlapping() -> None:
    begin = datetime.fromisoformat("2026-12-07T00:00+00:00").timestamp()
    svg = drawing.timeline_svg([], begin, begin + 120 * plan.DAY, plan.zone("UTC"))
    labels, _ = _ticks(ET.fromstring(svg.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1)))
    assert labels[0] == (2.0, "07 Dec") and len(labels) >= 15
    for (x, text), (after, _) in itertools.pairwise(labels):
        assert x + len(text) * drawing.CHARACTER_WIDTH < after
