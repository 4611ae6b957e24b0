"""What a person reads at the end of a run and while it works: the summary and progress lines."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from drain.core.summary import EXIT_REASONS, Summary
from drain.observe.words import summary_line
from drain.runner.progress import Progress


def test_the_summary_line_reads_as_a_sentence_with_one_number_format() -> None:
    summary = Summary(table="public.jobs", claimed=50_000, done=49_000, failed=1_000)
    summary.seconds = 15.5

    line = summary_line(summary)

    assert line.startswith("drain: public.jobs drained: claimed 50,000, done 49,000, ")
    assert "failed 1,000" in line
    assert line.endswith("in 15.50s (3,226 jobs/s)")
    # No count of four digits or more without its separator.
    assert not re.search(r"\d{4}", line.replace("15.50", ""))


@pytest.mark.parametrize("reason", sorted(EXIT_REASONS))
def test_every_exit_reason_reads_after_the_table(reason: str) -> None:
    line = summary_line(Summary(table="public.jobs", exit_reason=reason))

    prefix = line.split(": claimed")[0]
    assert prefix.startswith("drain: public.jobs ")
    words = prefix.removeprefix("drain: public.jobs ")
    assert words and "-" not in words.split(" (")[0], words


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Written:
    """All a test wrote to stderr so far (pytest's capture, read and kept)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.text = ""

    def getvalue(self) -> str:
        self.text += self.capsys.readouterr().err
        return self.text


@pytest.fixture
def stderr(capsys: pytest.CaptureFixture[str]) -> Iterator[Written]:
    yield Written(capsys)


def _progress(clock: Clock, summary: Summary) -> Progress:
    return Progress(summary, on=True, started=0.0, deadline=300.0, clock=clock)


def test_the_progress_line_fits_a_narrow_terminal(
    stderr: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = Summary(table="public.jobs", done=123_456, retried=7, failed=3)
    clock = Clock()
    progress = _progress(clock, summary)
    for columns in (200, 60, 30, 12):
        monkeypatch.setenv("COLUMNS", str(columns))
        clock.now += 1.0
        progress.show()
        frame = stderr.getvalue().rsplit("\x1b[K", 1)[-1]
        assert 0 < len(frame) <= columns - 1, (columns, frame)
        assert "\n" not in stderr.getvalue()
    monkeypatch.setenv("COLUMNS", "200")
    assert "123,456 done" in progress.frame(1.0, 200)


def test_a_log_line_clears_the_progress_line_first(stderr: Written) -> None:
    logger = logging.getLogger("drain")
    saved = logger.handlers[:], logger.propagate
    handler = logging.StreamHandler()  # sys.stderr, read when each line is written
    logger.handlers[:] = [handler]
    logger.propagate = False
    try:
        clock = Clock()
        progress = _progress(clock, Summary(table="public.jobs", done=5))
        clock.now = 1.0
        progress.show()
        logger.warning("stopping: SIGINT")
        written = stderr.getvalue()
        # The frame, then an erase back to the line's start, then the log line.
        assert re.search(r"5 jobs.*\r\x1b\[Kstopping: SIGINT\n$", written), repr(written)

        progress.show(final=True)
        assert stderr.getvalue() == written  # nothing shown, nothing to clear
        assert handler.filters == []
    finally:
        logger.handlers[:], logger.propagate = saved


def test_the_last_frame_is_cleared_for_the_summary(stderr: Written) -> None:
    clock = Clock()
    progress = _progress(clock, Summary(table="public.jobs", done=5))
    clock.now = 1.0
    progress.show()
    progress.show(final=True)

    written = stderr.getvalue()
    assert written.endswith("\r\x1b[K"), repr(written)
    assert "\n" not in written


def _note_calls() -> dict[str, set[str]]:
    """Every ``summary.note(code, **figures)`` in the package: code to figure names."""
    import ast
    from pathlib import Path

    found: dict[str, set[str]] = {}
    for path in (Path(__file__).resolve().parents[1] / "drain").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "note"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found[str(node.args[0].value)] = {kw.arg for kw in node.keywords if kw.arg}
    return found


def test_every_note_the_run_makes_has_its_words_and_no_words_are_left_over() -> None:
    from drain.core.summary import Note
    from drain.observe.words import NOTE_WORDS, note_text

    calls = _note_calls()
    assert sorted(calls) == sorted(NOTE_WORDS)
    for code, names in calls.items():
        figures: dict[str, object] = {
            name: 3 if name in ("count", "runs", "cap", "enqueued", "skipped") else "x"
            for name in names
        }
        if code == "archive_rows_refused":
            figures["job_ids"] = [1, 2, 3]
        if code == "fires_skipped":
            figures["more"] = False
        text = note_text(Note(code, figures))
        assert text and "{" not in text, (code, text)


def test_a_note_in_json_is_its_code_and_figures() -> None:
    summary = Summary(table="public.jobs")
    summary.note("jobs_released", count=3)

    assert summary.as_dict()["notes"] == [{"code": "jobs_released", "figures": {"count": 3}}]
