"""The executor: worker threads and event-loop tasks that take jobs off the board
and run their handlers.

No worker ever touches the database. A worker takes a pending job, calls its
handler, and puts the outcome back on the board; whatever the handler raises,
prints or returns, the outcome concerns that job alone, and the worker lives on.
A queue whose handler is ``async def`` has no threads: its jobs run as tasks on
the run's one event loop (:mod:`~drain.runner.tasks`), ``--concurrency`` of them
at once. ``--concurrency`` bounds each kind: that many threads for sync
handlers (at most :data:`~drain.core.config.MAX_THREADS`, a thread each), that
many tasks for async ones (at most :data:`~drain.core.config.MAX_CONCURRENCY`).
``--exec`` programs run in process groups of their own (:mod:`drain.runner.programs`)
under the run's supervisor (:mod:`~drain.runner.supervision`), which stops a
program whose lease may be running out even while drain is frozen or dead; the
executor stops a program at once when its attempt is lost or cancelled, and
all of them, as groups, when the run leaves jobs behind.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from drain.core.config import MAX_THREADS, RunConfig
from drain.core.errors import UsageError
from drain.core.jobs import Job, Owned, PermanentError, RetryLater
from drain.core.redact import Redactor, describe, storable_error
from drain.observe.observers import JobResult, Observers
from drain.runner.board import Board
from drain.runner.exchange import flush_due
from drain.runner.exec_handler import ExecCannotRun, ExecFailed, ExecHandler
from drain.runner.handlers import HandlerFunc
from drain.runner.outcomes import Outcome
from drain.runner.supervision import Supervision
from drain.runner.tasks import Tasks

log = logging.getLogger("drain")

# A job whose lease was last renewed this share of a lease ago is never started
# (the lease keeper renews at a third, so only a run that was frozen, or starved
# of its connection, gets there). An --exec program gets SIGTERM from the
# supervisor no sooner than this share either (drain.runner.supervision).
START_LIMIT_SHARE = 2 / 3


def is_async(func: HandlerFunc) -> bool:
    """Whether a handler is a coroutine function (or an object whose ``__call__`` is)."""
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 (the method itself is asked about)
    )


def _wake_for(batch_size: int) -> Callable[[int, bool], bool]:
    def wake_for(results: int, idle: bool) -> bool:
        return flush_due(results, batch_size, idle=idle, waited=0.0)

    return wake_for


class Executor:
    """``concurrency`` worker threads, and as many tasks, over one board.

    ``queues`` are the queues the run serves (default: every one with a
    handler): threads start only when one of them has a sync handler, and only
    then does ``--concurrency`` keep to the thread cap.
    """

    def __init__(
        self,
        board: Board,
        handlers: Mapping[str, HandlerFunc],
        config: RunConfig,
        *,
        redactor: Redactor,
        clock: Callable[[], float],
        observers: Observers | None = None,
        queues: Collection[str] | None = None,
    ) -> None:
        self.board = board
        self.observers = observers or Observers()
        self.handlers = handlers
        self.concurrency = config.concurrency
        self.start_limit = config.lease * START_LIMIT_SHARE
        self.batch_size = config.batch_size
        self.redactor = redactor
        self.clock = clock
        served = list(handlers) if queues is None else [q for q in queues if q in handlers]
        self.async_queues = frozenset(q for q in served if is_async(handlers[q]))
        self.sync_queues = frozenset(served) - self.async_queues
        if self.sync_queues and self.concurrency > MAX_THREADS:
            raise UsageError(
                f"--concurrency must be at most {MAX_THREADS:,} for sync handlers "
                f"(one thread per job; queue {sorted(self.sync_queues)[0]!r} has one); "
                "async def handlers run as tasks and allow more"
            )
        self.tasks = Tasks(
            board,
            self.execute_task,
            limit=self.concurrency,
            start_limit=self.start_limit,
            clock=clock,
            flush_due=_wake_for(self.batch_size),
        )
        if self.async_queues:
            board.serve_async(self.async_queues, self.tasks.poke)
        self.threads: list[threading.Thread] = []
        # why the run must stop: an --exec command that cannot run (exit 2)
        self.cannot_run: str | None = None
        self.programs = self._exec_handlers()
        self.supervision: Supervision | None = None
        if self.programs:
            self.supervision = Supervision(config.lease, board.lease_written, clock)
            for func in self.programs:
                func.watch = self.supervision

    def _exec_handlers(self) -> list[ExecHandler]:
        found = {id(f): f for f in self.handlers.values() if isinstance(f, ExecHandler)}
        return list(found.values())

    def start(self) -> None:
        if self.async_queues:
            self.tasks.start()
        if not self.sync_queues:
            return
        for number in range(self.concurrency):
            thread = threading.Thread(
                target=self._work, name=f"drain-worker-{number + 1}", daemon=True
            )
            thread.start()
            self.threads.append(thread)

    def close(self) -> None:
        self.tasks.close()
        if self.supervision is not None:
            self.supervision.close()

    def stop_programs(self) -> set[int]:
        """Stop every ``--exec`` program still running, as whole process groups, and
        wait until they are gone; cancel every async task still running; return the
        ids of jobs whose programs survived.

        Called once the jobs still working are abandoned: nothing stopped here has
        its outcome recorded.
        """
        self.tasks.stop()
        survivors: set[int] = set()
        for func in self.programs:
            survivors |= func.terminate_all()
        return survivors

    # -- the lease keeper ----------------------------------------------------------

    def renewed(self, jobs: Sequence[Owned], sent_at: float) -> None:
        """Leases written from ``sent_at`` on: their programs may run that much longer."""
        if self.supervision is not None:
            self.supervision.renewed(jobs, sent_at)

    def lost(self, jobs: Sequence[Owned]) -> None:
        """Attempts no longer ours: their programs stop at once (SIGTERM, then SIGKILL),
        their tasks are cancelled."""
        self.tasks.cancel(jobs)
        if self.supervision is not None:
            self.supervision.stop(jobs, "lost")

    def cancelled(self, jobs: Sequence[Owned]) -> None:
        """Attempts ``drain cancel`` asked for: their programs stop, their jobs are failed
        as cancelled (a Python handler can only be told: ``job.cancel_requested``)."""
        if self.supervision is not None:
            self.supervision.stop(jobs, "cancel")

    def _work(self) -> None:
        wake_for = _wake_for(self.batch_size)
        observers = self.observers
        while (job := self.board.next_job(self.start_limit, self.clock)) is not None:
            if not observers:
                self.board.finish(job, self.execute(job), wake_for)
                continue
            token = observers.job_started(job)
            outcome = self.execute(job)
            observers.job_finished(
                job, token, JobResult(outcome.kind, outcome.seconds, outcome.error)
            )
            self.board.finish(job, outcome, wake_for)

    def execute(self, job: Job) -> Outcome:
        """Run one attempt; whatever the handler raises, the outcome concerns this job alone.

        Nothing may escape to the worker thread: a worker that died took its job
        with it and left the run idling until its budget. A snooze whose request
        cannot be honoured (a delay that is not a finite number) fails the
        attempt: it is a bug in the handler.
        """
        started = time.perf_counter()
        try:
            result = self.handlers[job.queue](job)
            if inspect.isawaitable(result):  # a sync function that returned a coroutine
                self.tasks.run(result)
        except BaseException as exc:
            return self._raised(job, exc, started)
        return Outcome(job, "done", time.perf_counter() - started)

    async def execute_task(self, job: Job) -> Outcome:
        """Run one attempt of an async handler as a task; the rules of :meth:`execute`.

        Observers hear it from the loop's thread.
        """
        observers = self.observers
        token = observers.job_started(job) if observers else None
        started = time.perf_counter()
        try:
            result: Any = self.handlers[job.queue](job)
            if inspect.isawaitable(result):
                await result
        except BaseException as exc:  # CancelledError too: an attempt drain gave up on
            outcome = self._raised(job, exc, started)
        else:
            outcome = Outcome(job, "done", time.perf_counter() - started)
        if observers:
            result = JobResult(outcome.kind, outcome.seconds, outcome.error)
            observers.job_finished(job, token, result)
        return outcome

    def _raised(self, job: Job, raised: BaseException, started: float) -> Outcome:
        """The outcome of an attempt whose handler raised ``raised`` (a handler's
        SystemExit or KeyboardInterrupt too: they concern its job alone)."""
        try:
            seconds = time.perf_counter() - started
            if isinstance(raised, RetryLater):
                try:
                    at, delay = raised.when()
                except ValueError as invalid:
                    return Outcome(job, "retry", seconds, self._error_text(str(invalid)))
                return Outcome(job, "snooze", seconds, at=at, delay=delay)
            if isinstance(raised, PermanentError):
                text = self._error_text(raised)
                log.info("job %d (%s) failed for good: %s", job.id, job.queue, text)
                return Outcome(job, "fail", seconds, text)
            if isinstance(raised, ExecFailed):
                return self._program_failed(job, raised, seconds)
            text = self._error_text(raised)
            # --verbose shows why a job is retried; the summary only counts it.
            log.info("job %d (%s) attempt %d: %s", job.id, job.queue, job.attempt, text)
            return Outcome(job, "retry", seconds, text)
        except BaseException as exc:  # reading what the handler raised failed (a property, say)
            text = self._error_text(f"the handler's outcome could not be read: {describe(exc)}")
            return Outcome(job, "retry", time.perf_counter() - started, text)

    def _program_failed(self, job: Job, failed: ExecFailed, seconds: float) -> Outcome:
        """A program that did not exit 0: a failed attempt, unless drain stopped it for a
        cancel (the job is then failed as cancelled) or its command cannot run (the
        run stops with a usage error and gives the job back, its attempt unspent)."""
        if isinstance(failed, ExecCannotRun):
            if self.cannot_run is None:
                self.cannot_run = self.redactor(
                    f"{failed.reason}; fix the command: its jobs were given back, "
                    "their attempts unspent"
                )
            return Outcome(job, "given-back", seconds, self._error_text(failed))
        if failed.stopped == "cancel":
            return Outcome(job, "cancelled", seconds)
        text = self._error_text(failed)
        log.info("job %d (%s) attempt %d: %s", job.id, job.queue, job.attempt, text)
        return Outcome(job, "retry", seconds, text)

    def _error_text(self, error: BaseException | str) -> str:
        """The text ``last_error`` gets: storable, redacted and short (drain.core.redact)."""
        text = describe(error) if isinstance(error, BaseException) else error
        return storable_error(text, self.redactor)
