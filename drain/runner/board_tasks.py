"""The board's side for the event loop: async jobs wait apart and leave in batches.

A queue whose handler is ``async def`` has its claimed jobs wait in
``pending_async`` rather than ``pending``, for the run's event loop
(:mod:`~drain.runner.tasks`) to start as tasks, many at once and never
blocking; their outcomes come back in batches, one lock per batch, never one
per job. That bookkeeping is this mixin's. It holds no state and no lock of its
own: :class:`~drain.runner.board.Board` inherits it, sets every attribute named
below in its ``__init__`` and stays the one owner of the lock, so the rules in
the board's docstring hold for both kinds of job.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

from drain.core.jobs import Job
from drain.runner.outcomes import GIVEN_BACK, Outcome


class TaskSide:
    """What the event loop asks of the board; mixed into :class:`~drain.runner.board.Board`."""

    # The board's state, set by Board.__init__ and touched only under ``cv``.
    cv: threading.Condition
    wake: threading.Event
    pending: deque[Job]
    pending_async: deque[Job]
    async_queues: frozenset[str]  # queues whose jobs go to the event loop
    poke: Callable[[], None]  # tells the event loop some wait (thread-safe, cheap)
    running: dict[int, Job]
    results: list[Outcome]
    stale: list[Job]
    given_back: list[Job]
    leased_at: dict[int, float]
    lost: set[tuple[int, int]]
    abandoned: set[tuple[int, int]]
    closing: bool
    low_water: int

    def serve_async(self, queues: frozenset[str], poke: Callable[[], None]) -> None:
        """Jobs of ``queues`` wait for the event loop; ``poke`` (thread-safe, cheap)
        tells it some do. Set once, before the first claim."""
        self.async_queues, self.poke = queues, poke

    @property
    def waiting(self) -> int:
        """Jobs claimed and not started, of both kinds (under the lock)."""
        return len(self.pending) + len(self.pending_async)

    def _queue_up(self, jobs: Sequence[Job]) -> bool:
        """Put jobs in the queue their kind waits in; True when any is async."""
        if not self.async_queues:
            self.pending.extend(jobs)
            return False
        tasks = [job for job in jobs if job.queue in self.async_queues]
        if len(tasks) == len(jobs):
            self.pending_async.extend(jobs)
        else:
            self.pending.extend(job for job in jobs if job.queue not in self.async_queues)
            self.pending_async.extend(tasks)
        return bool(tasks)

    def next_tasks(self, room: int, start_limit: float, clock: Callable[[], float]) -> list[Job]:
        """Up to ``room`` async jobs to start as tasks, by the rules of ``Board.next_job``;
        none once the board closes. The event loop calls this, never blocking."""
        started: list[Job] = []
        with self.cv:
            if self.closing:
                return started
            before = self.waiting
            now = clock()
            pending, leased_at, stale = self.pending_async, self.leased_at, False
            while pending and len(started) < room:
                job = pending.popleft()
                if now - leased_at.get(job.id, 0.0) < start_limit and not job.cancel_requested:
                    self.running[job.id] = job
                    started.append(job)
                else:
                    self.stale.append(job)
                    stale = True
            claim_due = before > self.low_water >= self.waiting
        if stale or claim_due:
            self.wake.set()
        return started

    def finish_tasks(
        self, outcomes: Sequence[Outcome], flush_due: Callable[[int, bool], bool]
    ) -> None:
        """``Board.finish`` for a batch of tasks' outcomes, under one lock."""
        wake = False
        with self.cv:
            for outcome in outcomes:
                job = outcome.job
                del self.running[job.id]
                key = (job.id, job.attempt)
                if key in self.lost or key in self.abandoned:
                    continue
                if outcome.kind in GIVEN_BACK:
                    self.given_back.append(job)
                    wake = True
                else:
                    self.results.append(outcome)
            idle = not self.running and not self.waiting
            wake = wake or flush_due(len(self.results), idle)
        if wake:
            self.wake.set()


def no_poke() -> None:
    """The event loop's poke on a board that serves no async queue."""
