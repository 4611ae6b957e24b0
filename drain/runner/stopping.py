"""The stop sequence: signals, then release, grace, and the leases of what is left.

Whatever ends the loop (the budget, a signal, an error, even a ``BaseException``),
a run leaves in the same order: jobs claimed but never started go back at once
(their attempt given back); jobs in flight get the grace period, their leases
still kept; programs still running are stopped as whole process groups and
waited for; only then are the leases of the jobs still working cut to now, so
the next run reaps them at once, and never while something still works on them.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from drain.core.errors import DrainError
from drain.core.summary import Summary
from drain.core.table import JobTable
from drain.runner.board import Board
from drain.runner.executor import Executor
from drain.runner.intake import Intake, lost_of
from drain.store import fencing
from drain.store.db import Session

log = logging.getLogger("drain")


class Signals:
    """SIGTERM and SIGINT: the first starts the orderly stop, the second stops at once."""

    def __init__(self, wake: threading.Event) -> None:
        self.wake = wake
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        log.warning(
            "received %s: %s",
            signal.Signals(signum).name,
            "stopping after in-flight jobs" if self.count == 1 else "stopping now",
        )
        self.wake.set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._handle)
        try:
            yield
        finally:
            for number, previous in self._previous.items():
                signal.signal(number, previous)


class StopSequence:
    """Leaves a run in order; ``flush`` sends the outcomes still on the board."""

    def __init__(
        self,
        *,
        session: Session,
        table: JobTable,
        board: Board,
        intake: Intake,
        executor: Executor,
        signals: Signals,
        summary: Summary,
        flush: Callable[[], None],
        clock: Callable[[], float],
    ) -> None:
        self.session = session
        self.table = table
        self.board = board
        self.intake = intake
        self.executor = executor
        self.signals = signals
        self.summary = summary
        self.flush = flush
        self.clock = clock

    def stop(self, *, urgent: bool, grace_from: float, grace: float) -> str | None:
        """Release, wait out the grace (unless urgent), cut leases; the error if one failed."""
        unstarted = self.board.close()
        try:
            self._release(unstarted)
            if not urgent:
                self._wait_for_in_flight(grace_from + grace)
            self._abandon_in_flight()
        except DrainError as exc:
            return str(exc)
        finally:
            # Programs go first, before the caller stops the lease keeper: a stop
            # that failed above leaves leases to run out, never a program
            # running for a job nobody holds.
            self.executor.stop_programs()
        return None

    def _release(self, unstarted: list[Any]) -> None:
        if unstarted:
            released = self.intake.release(unstarted)
            self.summary.released += len(released.owned)
            self.board.mark_lost(lost_of(unstarted, released))
            self.board.forget([job.id for job in unstarted])
        self.flush()

    def _wait_for_in_flight(self, grace_end: float) -> None:
        while True:
            busy = self.board.load().busy
            self.flush()
            if not busy or self.signals.count > 1 or self.clock() >= grace_end:
                return
            self.board.wake.clear()
            self.board.wake.wait(timeout=max(0.0, min(0.2, grace_end - self.clock())))

    def _abandon_in_flight(self) -> None:
        """Stop the programs of jobs still working, then cut those jobs' leases.

        A lease is cut only once everything started for its job is gone (an
        ``--exec`` program's whole process group, which stop_programs waits for),
        since the next run may start the job at once. A job whose program survived
        SIGKILL keeps its lease and is left to it.
        """
        leftover = self.board.abandon_running()
        survivors = self.executor.stop_programs()
        self.flush()
        if survivors:
            self.summary.note("programs_survived", count=len(survivors))
        leftover = [job for job in leftover if job.id not in survivors]
        if not leftover:
            return
        cut = self.session.call(lambda conn: fencing.extend(conn, self.table, leftover, 0))
        self.summary.abandoned += len(cut.owned)
        self.summary.note("leases_cut", count=len(cut.owned))
