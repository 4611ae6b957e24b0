"""The board: every job a run holds, by state, behind one lock.

A claimed job is in one state at a time:

* ``pending``: claimed, waiting for a worker thread (first in, first out), or,
  for a queue whose handler is ``async def``, in ``pending_async``, waiting for
  the run's event loop (:mod:`~drain.runner.tasks`) to start it as a task
  (that side of the board is :mod:`~drain.runner.board_tasks`);
* ``held``: a suspect (it came back from a run that died) set aside to run
  alone, once nothing else of the run is waiting or working;
* ``running``: a worker thread or a task is executing it;
* ``stale``: its lease ran too low before a worker took it; the main thread
  gives it back unstarted;
* ``given_back``: started, then stopped by drain without an outcome of its own
  (an ``--exec`` program stopped for ``drain cancel``, or one whose command
  cannot run); the main thread gives it back as if never started (release.sql:
  a cancelled job fails, any other is queued with its attempt given back);
* off the board: its outcome waits in ``results`` to be sent, or it was sent,
  released or lost.

``lost`` and ``abandoned`` hold attempts, as (id, attempt): a lost attempt is
never started or recorded; an abandoned one (still working when the run left)
is never recorded. A job lost once may come back in a later claim under a new
attempt, which is ours again.

Who touches what: the main thread adds claims, dispatches suspects, takes
results and stale jobs, and closes the board; workers take pending jobs and put
outcomes; the event loop takes async jobs and puts outcomes in batches (one
lock per batch, never one per job); the lease keeper reads what is owned and marks what is lost. This
class alone takes the lock, and each critical section is a few container
operations, never a handler call or a statement.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from itertools import chain
from typing import NamedTuple

from drain.core.jobs import Attempt, Job, Owned, note_lease_lost
from drain.runner.board_tasks import TaskSide, no_poke
from drain.runner.outcomes import GIVEN_BACK, Outcome

log = logging.getLogger("drain")


class Load(NamedTuple):
    """How many jobs wait and work, and whether anything is left on the board."""

    waiting: int
    busy: int
    results: int
    held: int

    @property
    def idle(self) -> bool:
        return not (self.waiting or self.busy or self.results or self.held)


class Board(TaskSide):
    """The jobs of one run and their states; see the module's docstring.

    The event loop's methods (``serve_async``, ``next_tasks``, ``finish_tasks``)
    are :class:`~drain.runner.board_tasks.TaskSide`'s, on this state and lock.
    """

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.wake = threading.Event()  # the main thread sleeps on this
        self.pending: deque[Job] = deque()
        self.pending_async: deque[Job] = deque()
        # queues whose jobs go to the event loop, and how it is told some wait
        self.async_queues: frozenset[str] = frozenset()
        self.poke: Callable[[], None] = no_poke
        self.held: list[Job] = []
        self.suspects: set[int] = set()
        self.alone: int | None = None  # a suspect running alone: no claims meanwhile
        self.running: dict[int, Job] = {}
        self.results: list[Outcome] = []
        self.stale: list[Job] = []
        self.given_back: list[Job] = []
        self.leased_at: dict[int, float] = {}
        self.lost: set[tuple[int, int]] = set()
        self.abandoned: set[tuple[int, int]] = set()
        self.lost_count = 0
        self.closing = False
        self.low_water = 1  # the next claim is due once this few jobs wait

    # -- the main thread -----------------------------------------------------------

    def add(self, jobs: Sequence[Job], leased_at: float, low_water: int) -> None:
        with self.cv:
            for job in jobs:
                self.leased_at[job.id] = leased_at
            poke = self._queue_up(jobs)
            self.low_water = low_water
            self.cv.notify_all()
        if poke:
            self.poke()

    def hold(self, suspect: Job, leased_at: float) -> None:
        with self.cv:
            self.held.append(suspect)
            self.suspects.add(suspect.id)
            self.leased_at[suspect.id] = leased_at

    def dispatch_suspect(self) -> None:
        """Start a held suspect once nothing else of this run is waiting or working."""
        with self.cv:
            if not self.held or self.waiting or self.running:
                return
            job = self.held.pop(0)
            poke = self._queue_up([job])
            self.alone = job.id
            self.cv.notify_all()
        if poke:
            self.poke()

    def claims_blocked(self) -> bool:
        """True while a suspect is held or running alone (its run must not claim)."""
        with self.cv:
            alone = self.alone
            done = alone is not None and alone not in self.running
            waiting = chain(self.pending, self.pending_async)
            if done and all(job.id != alone for job in waiting):
                self.alone = None  # the suspect is done: claims resume
            return bool(self.held) or self.alone is not None

    def load(self) -> Load:
        with self.cv:
            return Load(self.waiting, len(self.running), len(self.results), len(self.held))

    def take_results(self) -> list[Outcome]:
        with self.cv:
            results, self.results = self.results, []
            return results

    def take_stale(self) -> list[Job]:
        with self.cv:
            stale, self.stale = self.stale, []
            return stale

    def take_given_back(self) -> list[Job]:
        with self.cv:
            given_back, self.given_back = self.given_back, []
            return given_back

    def forget(self, job_ids: Sequence[int]) -> None:
        with self.cv:
            for job_id in job_ids:
                self.leased_at.pop(job_id, None)

    def close(self) -> list[Job]:
        """Stop handing out jobs; return the ones never started."""
        with self.cv:
            self.closing = True
            unstarted = list(self.pending) + list(self.pending_async) + self.held + self.stale
            self.pending.clear()
            self.pending_async.clear()
            self.held = []
            self.stale = []
            self.cv.notify_all()
        self.poke()
        return unstarted

    def abandon_running(self) -> list[Job]:
        """Mark the jobs still working as abandoned (never recorded) and return them."""
        with self.cv:
            leftover = [
                job for job in self.running.values() if (job.id, job.attempt) not in self.lost
            ]
            self.abandoned.update((job.id, job.attempt) for job in leftover)
        note_lease_lost(leftover)
        return leftover

    # -- the workers ---------------------------------------------------------------

    def next_job(self, start_limit: float, clock: Callable[[], float]) -> Job | None:
        """The next job to run, or None once the board closes.

        A job whose lease was last written ``start_limit`` seconds ago or more
        is never started: its lease may be gone (the run was frozen, or starved
        of its connection). Nor is one cancelled while it waited. Each goes to
        ``stale``, for the main thread to give back (a cancelled one then fails).
        """
        with self.cv:
            while True:
                while not self.pending and not self.closing:
                    self.cv.wait()
                if self.closing:
                    return None
                job = self.pending.popleft()
                fresh = clock() - self.leased_at.get(job.id, 0.0) < start_limit
                if fresh and not job.cancel_requested:
                    break
                self.stale.append(job)
                self.wake.set()
            self.running[job.id] = job
            # Woken once, as the jobs waiting fall to the low-water mark: waking
            # the loop for every job below it cost a pass of the loop per job.
            claim_due = self.waiting == self.low_water
        if claim_due:
            self.wake.set()
        return job

    def finish(self, job: Job, outcome: Outcome, flush_due: Callable[[int, bool], bool]) -> None:
        """Put a job's outcome on the board, unless the attempt is no longer ours.

        ``flush_due(results, idle)`` is the exchange's rule for sending outcomes;
        the main thread is woken when it may say yes. An attempt to give back
        (:data:`~drain.runner.outcomes.GIVEN_BACK`) goes to ``given_back`` and
        wakes it at once.
        """
        with self.cv:
            del self.running[job.id]
            key = (job.id, job.attempt)
            if key in self.lost or key in self.abandoned:
                return
            if outcome.kind in GIVEN_BACK:
                self.given_back.append(job)
                wake = True
            else:
                self.results.append(outcome)
                wake = flush_due(len(self.results), not self.running and not self.waiting)
        if wake:
            self.wake.set()

    # -- the lease keeper ----------------------------------------------------------

    def lease_written(self, job_id: int) -> float | None:
        """When the job's lease was last written (None once it is no longer ours)."""
        with self.cv:
            return self.leased_at.get(job_id)

    def owned(self) -> list[tuple[Job, float]]:
        with self.cv:
            jobs = chain(self.pending, self.pending_async, self.running.values(), self.held)
            return [(job, self.leased_at.get(job.id, 0.0)) for job in jobs]

    def renewed(self, jobs: Sequence[Job], when: float) -> None:
        with self.cv:
            for job in jobs:
                if job.id in self.leased_at:
                    self.leased_at[job.id] = when

    def mark_lost(self, jobs: Sequence[Owned], *, held_only: bool = False) -> None:
        """Attempts the database says are no longer ours: never start or record them.

        ``held_only`` is for the lease keeper, whose list of jobs to extend may be
        a moment old: a job that finished since then has its outcome sent by the
        fenced statement that carries it, which alone decides whether it was
        lost; only jobs still waiting or working are lost here.
        """
        with self.cv:
            gone = {(job.id, job.attempt) for job in jobs} - self.lost
            if held_only:
                live = chain(self.pending, self.pending_async, self.held, self.running.values())
                gone &= {(job.id, job.attempt) for job in live}
            if not gone:
                return
            self.lost |= gone
            self.lost_count += len(gone)
            self.pending = deque(job for job in self.pending if (job.id, job.attempt) not in gone)
            self.pending_async = deque(
                job for job in self.pending_async if (job.id, job.attempt) not in gone
            )
            self.held = [job for job in self.held if (job.id, job.attempt) not in gone]
            for job_id, _ in gone:
                self.leased_at.pop(job_id, None)
        note_lease_lost(Attempt(*key) for key in gone)
        if held_only:
            log.warning("lease extension found %d job(s) no longer ours", len(gone))
        else:
            log.warning("%d job(s) were no longer ours; their results were not recorded", len(gone))
        self.wake.set()
