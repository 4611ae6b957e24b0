"""Keeping the leases of claimed jobs alive while they wait or work.

The keeper is a thread of its own, so a handler that keeps its thread busy cannot
stop it (pure-Python code yields the interpreter every few milliseconds; a C
extension that holds the GIL for minutes can, and is the one case to avoid). It
extends every job whose lease is a third used up, including while the run is
stopping and waiting for in-flight jobs, and reports the jobs the database says
are no longer ours.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from drain.core.errors import DrainError
from drain.core.jobs import Job, note_cancel_requested
from drain.core.table import JobTable
from drain.store import fencing
from drain.store.db import Session

if TYPE_CHECKING:
    from drain.core.config import RunConfig
    from drain.runner.board import Board
    from drain.runner.executor import Executor

log = logging.getLogger("drain")


class LeaseKeeper:
    """Extends leases of the jobs ``owned()`` returns, from a daemon thread."""

    def __init__(
        self,
        session: Session,
        table: JobTable,
        lease: float,
        owned: Callable[[], Sequence[tuple[Job, float]]],
        renewed: Callable[[Sequence[Job], float], None],
        lost: Callable[[Sequence[Job]], None],
        clock: Callable[[], float] = time.monotonic,
        cancelled: Callable[[Sequence[Job]], None] | None = None,
    ) -> None:
        """``renewed(jobs, sent_at)`` gets the jobs still ours with the time the
        renewal was sent (their leases count from then); ``lost`` the jobs no longer
        ours; ``cancelled`` the jobs ``drain cancel`` asked for while they ran."""
        self._session = session
        self._table = table
        self._lease = lease
        self._owned = owned
        self._renewed = renewed
        self._lost = lost
        self._cancelled = cancelled
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="drain-leases", daemon=True)
        self.failure: DrainError | None = None

    @property
    def renew_after(self) -> float:
        """A lease is renewed once a third of it has gone by, at the latest."""
        return self._lease / 3

    @property
    def tick(self) -> float:
        """How often the keeper looks: a twelfth of a lease, between 0.05 and 5 s."""
        return max(0.05, min(self.renew_after / 4, 5.0))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        # Ticks of a twelfth of a lease: a due renewal waits at most that long, so a
        # lease is renewed by about half its length even behind a time-limited claim.
        while not self._stop.wait(self.tick):
            try:
                self.renew_due()
            except DrainError as exc:
                log.warning("could not extend leases: %s", exc)
                self.failure = exc
                return

    def renew_due(self) -> None:
        """Extend every owned job whose lease was last written a third of a lease ago."""
        now = self._clock()
        # a tick early: the keeper looks once a tick, so a renewal due in the next
        # tick goes now, and no lease (and no cancel it carries back) waits longer
        # than a third of itself
        due_after = self.renew_after - self.tick
        due = [job for job, leased_at in self._owned() if now - leased_at >= due_after]
        if not due:
            return
        outcome = self._session.call(
            lambda conn: fencing.extend(conn, self._table, due, self._lease)
        )
        self._renewed([job for job in due if job.id in outcome.owned], now)
        if outcome.cancelled:
            cancelled = [job for job in due if job.id in outcome.cancelled]
            note_cancel_requested(cancelled)
            if self._cancelled is not None:
                self._cancelled(cancelled)
        if outcome.lost:
            gone = set(outcome.lost)
            self._lost([job for job in due if job.id in gone])


def keeper_for(
    session: Session,
    config: RunConfig,
    board: Board,
    executor: Executor,
    clock: Callable[[], float],
) -> LeaseKeeper:
    """The run's lease keeper: renews what the board holds, and tells the executor.

    The executor hears of each renewal (a handler's lease counts from it), of
    jobs lost, and of cancels ``drain cancel`` asked for while a job ran.
    """

    def renewed(jobs: Sequence[Job], sent_at: float) -> None:
        board.renewed(jobs, sent_at)
        executor.renewed(jobs, sent_at)

    def lost(jobs: Sequence[Job]) -> None:
        board.mark_lost(jobs, held_only=True)
        executor.lost(jobs)

    return LeaseKeeper(
        session,
        config.table,
        config.lease,
        owned=board.owned,
        renewed=renewed,
        lost=lost,
        clock=clock,
        cancelled=executor.cancelled,
    )
