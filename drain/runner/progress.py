"""The progress line a run shows on a terminal (only when stderr is one)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from drain.summary import Summary

EVERY_SECONDS = 0.5


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

    def show(self, final: bool = False) -> None:
        if not self.on:
            return
        now = self.clock()
        if not final and now - self._last < EVERY_SECONDS:
            return
        self._last = now
        s = self.summary
        elapsed = now - self.started
        rate = s.processed / elapsed if elapsed > 0 else 0.0
        line = (
            f"\rdrain: {s.processed:,} jobs ({s.done:,} done, {s.retried:,} retried, "
            f"{s.failed:,} failed) {rate:,.0f}/s, {max(0.0, self.deadline - now):.0f}s left "
        )
        sys.stderr.write(line + ("\n" if final else ""))
        sys.stderr.flush()
