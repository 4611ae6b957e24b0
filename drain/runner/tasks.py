"""The run's one event loop: ``async def`` handlers run on it as tasks, no thread per job.

A job whose handler is a coroutine function never holds a thread while it
waits: the loop takes such jobs off the board (``pending_async``) in batches,
up to ``--concurrency`` tasks at once, and puts their outcomes back in batches
(every task that finished in one pass of the loop, under one lock). Parking a
worker thread on each coroutine's future cost a thread, its stack and two
thread hops per job: 20,000 jobs of 50 ms at 500 at once drained at 0.53x the
ceiling that way.

The loop runs in a thread of its own, started with the run's first async job
(or the first awaitable a sync handler returns: that one is run here too, its
worker thread waiting, so the run still has one loop). Everything else talks to
it through :meth:`Tasks.poke`, :meth:`Tasks.cancel`, :meth:`Tasks.stop` and
:meth:`Tasks.run`, all safe from any thread.

What ends a task early: its attempt lost (the lease keeper found it no longer
ours: its outcome would not be recorded, so it stops now, with
``asyncio.CancelledError`` inside the handler), and the run's stop, once the
grace is over and the jobs still working are abandoned. ``drain cancel`` is
only told to a Python handler (``job.cancel_requested``), as for a sync one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

from drain.core.jobs import Job, Owned
from drain.runner.board import Board
from drain.runner.outcomes import Outcome

log = logging.getLogger("drain")

# How long the stop waits for cancelled tasks to unwind before it leaves them (a
# handler that swallows CancelledError, or one that blocks the loop).
STOP_WAIT = 1.0


class Tasks:
    """Up to ``limit`` async jobs at once as tasks on one event loop.

    ``execute(job)`` is the coroutine that runs one attempt and never raises
    (:meth:`drain.runner.executor.Executor.execute_task`); ``flush_due(results,
    idle)`` is the exchange's rule, asked after each batch of outcomes.
    """

    def __init__(
        self,
        board: Board,
        execute: Callable[[Job], Coroutine[Any, Any, Outcome]],
        *,
        limit: int,
        start_limit: float,
        clock: Callable[[], float],
        flush_due: Callable[[int, bool], bool],
    ) -> None:
        self.board = board
        self.execute = execute
        self.limit = limit
        self.start_limit = start_limit
        self.clock = clock
        self.flush_due = flush_due
        self.loop: asyncio.AbstractEventLoop | None = None  # made by start()
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()  # starting the thread, and nothing else
        self._poked = False
        self._delivering = False
        self._closed = False
        self.tasks: dict[tuple[int, int], asyncio.Task[Outcome]] = {}
        self.finished: list[Outcome] = []

    # -- any thread --------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop's thread (once; later calls do nothing)."""
        with self._lock:
            if self.thread is not None or self._closed:
                return
            self.loop = asyncio.new_event_loop()
            self.thread = threading.Thread(
                target=self.loop.run_forever, name="drain-async", daemon=True
            )
            self.thread.start()
        self.poke()  # whatever the board already holds

    def poke(self) -> None:
        """Jobs wait on the board (or it closed): the loop looks once, soon.

        The flag makes a burst of pokes one wake-up; it is cleared by the loop
        before it reads the board, so a job added after that read is seen by the
        next pass.
        """
        loop = self.loop
        if self._poked or self._closed or loop is None:
            return
        self._poked = True
        loop.call_soon_threadsafe(self._pump)

    def run(self, awaitable: Awaitable[Any]) -> Any:
        """Await what a sync handler returned, on the loop; its worker thread waits."""
        self.start()
        if self.loop is None:
            raise RuntimeError("the run is over: its event loop is closed")

        async def wrapper() -> tuple[bool, Any]:
            # What it raises is raised in the worker thread, never in the loop: a
            # SystemExit or KeyboardInterrupt escaping a task stops the loop itself.
            try:
                return True, await awaitable
            except BaseException as exc:
                return False, exc

        returned, value = asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result()
        if not returned:
            raise value
        return value

    def cancel(self, attempts: Iterable[Owned]) -> None:
        """Cancel the tasks of these attempts (lost: their outcomes would not count)."""
        keys = [(job.id, job.attempt) for job in attempts]
        if keys and self.loop is not None and not self._closed:
            self.loop.call_soon_threadsafe(self._cancel, keys)

    def stop(self) -> None:
        """Cancel every task still running and wait a moment for them to unwind.

        Called at the run's stop, once the jobs still working are abandoned (their
        outcomes are not recorded); their leases are cut next, as those of sync
        handlers still working in their threads are, and the process leaves. A
        task that swallows the cancellation, or a loop blocked by a handler that
        never yields, is left to die with the process, like such a thread.
        """
        if self.loop is None or self._closed:
            return

        async def cancel_all() -> None:
            tasks = list(self.tasks.values())
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=STOP_WAIT)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(STOP_WAIT * 2)
        except TimeoutError:
            log.warning("the event loop is blocked by a handler that does not yield")

    def close(self) -> None:
        """Stop the loop and close it once its thread has left (a daemon: a task that
        blocks the loop for good dies with the process instead)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self.loop, self.thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_WAIT)
        if not thread.is_alive():
            loop.close()

    # -- the loop's thread -------------------------------------------------------------

    def _pump(self) -> None:
        """Start as many waiting async jobs as there is room for."""
        self._poked = False
        room = self.limit - len(self.tasks)
        loop = self.loop
        if room <= 0 or loop is None:
            return
        for job in self.board.next_tasks(room, self.start_limit, self.clock):
            key = (job.id, job.attempt)
            task = loop.create_task(self.execute(job))
            self.tasks[key] = task
            task.add_done_callback(functools.partial(self._done, job, key))

    def _done(self, job: Job, key: tuple[int, int], task: asyncio.Task[Outcome]) -> None:
        """A task ended: its outcome joins this pass's batch.

        ``execute`` never raises; a task cancelled before its first step (lost, or
        the stop, as it was created) has no outcome of its own, and gets one that
        the board drops (its attempt is lost or abandoned by then).
        """
        self.tasks.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            outcome = Outcome(job, "retry", 0.0, "the task was cancelled before it started")
        else:
            outcome = task.result()
        self.finished.append(outcome)
        if not self._delivering and self.loop is not None:
            self._delivering = True
            self.loop.call_soon(self._deliver)

    def _deliver(self) -> None:
        """Every outcome of this pass to the board at once, then refill."""
        self._delivering = False
        finished, self.finished = self.finished, []
        self.board.finish_tasks(finished, self.flush_due)
        self._pump()

    def _cancel(self, keys: list[tuple[int, int]]) -> None:
        for key in keys:
            task = self.tasks.get(key)
            if task is not None:
                task.cancel()
