"""The progress line a run shows on a terminal (only when stderr is one).

The line is rewritten in place, so three things keep it readable: it is cut to
the terminal's width (a longer line wraps, and every refresh then leaves a line
behind), it is cleared before any log line is written (else the log line is
glued to it), and its last frame is cleared for the summary line to take its
place (else it stays with a stale "104s left").
"""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Callable

from drain.core.summary import Summary

EVERY_SECONDS = 0.5
# Erase from the cursor to the end of the line (ANSI EL): understood by every
# terminal a progress line is shown on, since it is shown only on a terminal.
_ERASE = "\r\x1b[K"
# The loggers whose lines reach stderr during a run: drain's, the driver's, and
# the root logger a handler's own logging goes to.
_LOGGERS = ("drain", "psycopg", "")


class _ClearFirst(logging.Filter):
    """Clears the progress line before a log line is written; filters nothing out."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def filter(self, record: logging.LogRecord) -> bool:
        self.progress.clear()
        return True


class Progress:
    """Rewrites one line of stderr at most twice a second; prints nothing when off."""

    def __init__(
        self,
        summary: Summary,
        on: bool,
        started: float,
        deadline: float,
        clock: Callable[[], float],
    ) -> None:
        self.summary = summary
        self.on = on
        self.started = started
        self.deadline = deadline
        self.clock = clock
        self._last = 0.0
        self._shown = False
        self._filter = _ClearFirst(self)
        self._handlers: list[logging.Handler] = []

    def show(self, final: bool = False) -> None:
        """Draw the line; the final call clears it for the summary line to replace."""
        if not self.on:
            return
        if final:
            self.clear()
            self._detach()
            return
        now = self.clock()
        if now - self._last < EVERY_SECONDS:
            return
        self._last = now
        if not self._handlers:
            self._attach()
        sys.stderr.write(_ERASE + self.frame(now, shutil.get_terminal_size().columns))
        sys.stderr.flush()
        self._shown = True

    def frame(self, now: float, columns: int) -> str:
        """The longest form of the line that fits in ``columns`` (the last one left free)."""
        s = self.summary
        elapsed = now - self.started
        rate = s.processed / elapsed if elapsed > 0 else 0.0
        left = f"{max(0.0, self.deadline - now):,.0f}s left"
        forms = [
            f"drain: {s.processed:,} jobs ({s.done:,} done, {s.retried:,} retried, "
            f"{s.failed:,} failed) {rate:,.0f}/s, {left}",
            f"drain: {s.processed:,} jobs, {rate:,.0f}/s, {left}",
            f"drain: {s.processed:,} jobs",
        ]
        room = max(columns - 1, 0)
        return next((form for form in forms if len(form) <= room), forms[-1][:room])

    def clear(self) -> None:
        """Erase the line if it is showing, so whatever is written next starts clean."""
        if self._shown:
            self._shown = False
            sys.stderr.write(_ERASE)
            sys.stderr.flush()

    def _attach(self) -> None:
        for name in _LOGGERS:
            for handler in logging.getLogger(name).handlers:
                if handler not in self._handlers:
                    handler.addFilter(self._filter)
                    self._handlers.append(handler)

    def _detach(self) -> None:
        for handler in self._handlers:
            handler.removeFilter(self._filter)
        self._handlers.clear()
