"""The executor: worker threads that take jobs off the board and run their handlers.

No worker ever touches the database. A worker takes a pending job, calls its
handler, and puts the outcome back on the board; whatever the handler raises,
prints or returns, the outcome concerns that job alone, and the worker lives on.
``--exec`` programs run in process groups of their own (:mod:`drain.runner.programs`)
under the run's supervisor (:mod:`~drain.runner.supervision`), which stops a
program whose lease may be running out even while drain is frozen or dead; the
executor stops a program at once when its attempt is lost or cancelled, and
all of them, as groups, when the run leaves jobs behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from drain.core.config import RunConfig
from drain.core.jobs import Job, Owned, PermanentError, RetryLater
from drain.core.redact import Redactor, describe, storable_error
from drain.observe.observers import JobResult, Observers
from drain.runner import handlers as handler_module
from drain.runner.board import Board
from drain.runner.exchange import flush_due
from drain.runner.handlers import AsyncBridge, HandlerFunc
from drain.runner.outcomes import Outcome
from drain.runner.programs import ExecCannotRun, ExecFailed, ExecHandler
from drain.runner.supervision import Supervision

log = logging.getLogger("drain")

# A job whose lease was last renewed this share of a lease ago is never started
# (the lease keeper renews at a third, so only a run that was frozen, or starved
# of its connection, gets there). An --exec program gets SIGTERM from the
# supervisor no sooner than this share either (drain.runner.supervision).
START_LIMIT_SHARE = 2 / 3


class Executor:
    """``concurrency`` worker threads over one board."""

    def __init__(
        self,
        board: Board,
        handlers: Mapping[str, HandlerFunc],
        config: RunConfig,
        *,
        redactor: Redactor,
        clock: Callable[[], float],
        observers: Observers | None = None,
    ) -> None:
        self.board = board
        self.observers = observers or Observers()
        self.handlers = handlers
        self.concurrency = config.concurrency
        self.start_limit = config.lease * START_LIMIT_SHARE
        self.batch_size = config.batch_size
        self.redactor = redactor
        self.clock = clock
        self.bridge = AsyncBridge()
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
        for number in range(self.concurrency):
            thread = threading.Thread(
                target=self._work, name=f"drain-worker-{number + 1}", daemon=True
            )
            thread.start()
            self.threads.append(thread)

    def close(self) -> None:
        self.bridge.close()
        if self.supervision is not None:
            self.supervision.close()

    def stop_programs(self) -> set[int]:
        """Stop every ``--exec`` program still running, as whole process groups, and
        wait until they are gone; return the ids of jobs whose programs survived."""
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
        """Attempts no longer ours: their programs stop at once (SIGTERM, then SIGKILL)."""
        if self.supervision is not None:
            self.supervision.stop(jobs, "lost")

    def cancelled(self, jobs: Sequence[Owned]) -> None:
        """Attempts ``drain cancel`` asked for: their programs stop, their jobs are failed
        as cancelled (a Python handler can only be told: ``job.cancel_requested``)."""
        if self.supervision is not None:
            self.supervision.stop(jobs, "cancel")

    def _work(self) -> None:
        def wake_for(results: int, idle: bool) -> bool:
            return flush_due(results, self.batch_size, idle=idle, waited=0.0)

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
            try:
                handler_module.call(self.handlers[job.queue], job, self.bridge)
            except RetryLater as retry:
                try:
                    at, delay = retry.when()
                except ValueError as invalid:
                    text = self._error_text(str(invalid))
                    return Outcome(job, "retry", time.perf_counter() - started, text)
                return Outcome(job, "snooze", time.perf_counter() - started, at=at, delay=delay)
            except PermanentError as exc:
                text = self._error_text(exc)
                log.info("job %d (%s) failed for good: %s", job.id, job.queue, text)
                return Outcome(job, "fail", time.perf_counter() - started, text)
            except ExecFailed as exc:
                return self._program_failed(job, exc, time.perf_counter() - started)
            except BaseException as exc:  # a handler's SystemExit or KeyboardInterrupt too
                text = self._error_text(exc)
                # --verbose shows why a job is retried; the summary only counts it.
                log.info("job %d (%s) attempt %d: %s", job.id, job.queue, job.attempt, text)
                return Outcome(job, "retry", time.perf_counter() - started, text)
            return Outcome(job, "done", time.perf_counter() - started)
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
