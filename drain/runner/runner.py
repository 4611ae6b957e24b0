"""The one-shot run, wired from its parts: reap, claim, hand out, record, stop, clean up.

The parts, and the thread that drives each:

* :mod:`~drain.runner.board`: the jobs the run holds, by state, behind one lock (all threads);
* :mod:`~drain.runner.policy`: which queue and how many jobs the next claim
  takes (main thread; pure);
* :mod:`~drain.runner.exchange`: outcomes and the next claim in one pipeline
  on the run's one connection, and the one rule for when outcomes go out (main
  thread; the workers ask the rule whether to wake it);
* :mod:`~drain.runner.cycle`: each turn's claim and outcomes, between the board
  and the exchange, a fast claim decoded while the next is claimed (main thread);
* :mod:`~drain.runner.intake`: a claim's jobs onto the board, suspects held to
  run alone, stale jobs given back (main thread);
* :mod:`~drain.runner.executor`: worker threads running handlers, never the database (workers);
* :mod:`drain.runner.leases`: the lease keeper, renewing what the board holds (its own
  thread, on the same connection: the session serialises use of it);
* :mod:`~drain.runner.pacing`: claims by priority and by rate; the loop's sleep (main thread);
* :mod:`~drain.runner.stopping`: signals, then release, grace, lease cut (main thread);
* :mod:`~drain.runner.aftermath`: archive, vacuum, record (main thread);
* :mod:`~drain.runner.reporting`: what the observers hear, the backlog left.

This module alone decides why the run ended. No transaction is ever open while
a handler runs: the connection is in autocommit, each statement commits on its
own, and between statements the session is ``idle``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping

from drain.core.config import RunConfig
from drain.core.errors import DrainError
from drain.core.redact import Redactor
from drain.core.summary import Summary
from drain.observe.observers import Observers, for_run
from drain.runner import opening, reporting
from drain.runner.aftermath import Aftermath
from drain.runner.board import Board
from drain.runner.cycle import Cycle
from drain.runner.exchange import ClaimSettings, Exchange
from drain.runner.executor import Executor
from drain.runner.handlers import HandlerFunc
from drain.runner.intake import Intake
from drain.runner.leases import LeaseKeeper, keeper_for
from drain.runner.pacing import Pacing
from drain.runner.policy import ClaimPolicy
from drain.runner.progress import Progress
from drain.runner.stopping import Signals, StopSequence
from drain.store import schema
from drain.store.db import Session


class Runner:
    """One run over one queue table. Use :meth:`run` once."""

    def __init__(
        self,
        config: RunConfig,
        handlers: Mapping[str, HandlerFunc],
        *,
        clock: Callable[[], float] = time.monotonic,
        started: float | None = None,
        observers: Observers | None = None,
        backlog: bool = False,
    ) -> None:
        """``started`` is when the budget began on ``clock`` (default: now); the CLI
        passes its process start, so interpreter start-up counts against the budget.
        ``observers`` hear the run (default: those its options turn on); ``backlog``
        reads the ready jobs left per queue into the summary at the end."""
        config.validate()
        self.config, self.table, self.clock = config, config.table, clock
        self.redactor = Redactor(config.connect.dsn)
        self.summary = Summary(table=config.table.qualified)
        self.queues = opening.choose_queues(config.queues, handlers)
        self.started = clock() if started is None else started
        self.started_wall = time.time() - (clock() - self.started)
        self.observers = observers if observers is not None else for_run(config)
        self.report = reporting.RunReport(
            config, self.queues, self.started_wall, self.observers, read_backlog=backlog
        )
        self.deadline = self.started + config.max_seconds
        self._wire(config, handlers)
        self.keeper: LeaseKeeper | None = None
        self.slot_lost = False

    def _wire(self, config: RunConfig, handlers: Mapping[str, HandlerFunc]) -> None:
        """Build the run's parts, each given only what it works with."""
        clock, board = self.clock, Board()
        recheck = opening.recheck(self.table, config.max_runners, self._slot_lost)
        self.board, self.signals = board, Signals(board.wake)
        self.session = Session(
            config.connect, deadline=lambda: self.deadline, clock=clock, on_reconnect=recheck
        )
        self.policy = ClaimPolicy.for_run(
            self.queues,
            config.batch_size,
            config.concurrency,
            strict=config.queue_order == "strict",
            caps=dict(config.queue_caps),
            rates=dict(config.queue_rates),
        )
        exchange = Exchange(self.session, self.table, ClaimSettings.of(config), clock)
        self.intake = Intake(self.session, board, self.policy, self.summary, config, clock)
        self.executor = Executor(
            board,
            dict(handlers),
            config,
            redactor=self.redactor,
            clock=clock,
            observers=self.observers,
            queues=self.queues,
        )
        self.progress = Progress(self.summary, config.progress, self.started, self.deadline, clock)
        parts = (board, self.policy, self.intake, exchange, self.summary)
        self.cycle = Cycle(*parts, config.batch_size, clock, self.deadline)
        self.pacing = Pacing(self.session, config, self.policy, clock, self.deadline)

    def _slot_lost(self) -> None:
        self.slot_lost = True
        self.board.wake.set()

    def run(self) -> Summary:
        """Do the whole run and return its summary; raise only before anything was claimed."""
        try:
            max_runners = self.config.max_runners
            inspection = self.session.call(
                lambda conn: schema.inspect(conn, self.table, max_runners=max_runners)
            )
            if opening.first_check(inspection, self.config, self.queues, self.summary):
                self.pacing.prepare(self.cycle.exchange, inspection)
                self.report.tell_start()
                with self.signals.installed():
                    self._work_and_stop(inspection)
            self.summary.lost = self.board.lost_count
            self.summary.seconds = self.clock() - self.started
            self.progress.show(final=True)
            self.report.tell_end(self.session, self.summary)
            return self.summary
        except BaseException as exc:
            self.report.tell_error(
                self.summary, self.redactor(str(exc)), self.clock() - self.started
            )
            raise
        finally:
            self.executor.close()
            self.session.close()

    def _work_and_stop(self, inspection: schema.Inspection) -> None:
        stopped_by = "error"
        try:
            schedules = self.config.schedules and inspection.schedules_exists
            reaped, due = self.session.call(
                lambda conn: opening.reap_and_read_due(conn, self.table, schedules=schedules)
            )
            self.summary.reaped = reaped.requeued + reaped.failed
            if due:
                opening.fire_schedules(self.session, inspection, due, self.queues, self.summary)
            self._start_threads()
            stopped_by = self._loop()
            self.pacing.loop_stopped()
        except DrainError as exc:
            self.summary.error = str(exc)
        except BaseException:
            # SystemExit, KeyboardInterrupt, a bug: release and cut leases, then re-raise.
            self.summary.exit_reason = "error"
            self.summary.error = self.redactor(
                traceback.format_exc(limit=1).strip().splitlines()[-1]
            )
            self._stop(urgent=True, stopped_by="error")
            raise
        self._stop(urgent=self.signals.count > 1 or stopped_by == "error", stopped_by=stopped_by)
        self.summary.exit_reason = self._exit_reason(stopped_by)
        aftermath = Aftermath(
            self.session,
            self.config,
            self.summary,
            redactor=self.redactor,
            budget_left=lambda: self.clock() < self.deadline,
        )
        if self.summary.exit_reason not in ("error", "usage") and self.signals.count < 2:
            aftermath.maintain(inspection)
        aftermath.record(inspection, self.clock() - self.started, self.board.lost_count)

    def _stop(self, *, urgent: bool, stopped_by: str) -> None:
        """The stop sequence; a statement failing on it makes the run an error."""
        self.cycle.take_held_quietly()  # its jobs, on the board, are given back with the rest
        grace_from = self.deadline if stopped_by == "budget" else self.clock()
        stop = StopSequence(
            session=self.session,
            table=self.table,
            board=self.board,
            intake=self.intake,
            executor=self.executor,
            signals=self.signals,
            summary=self.summary,
            flush=self.cycle.flush,
            clock=self.clock,
        )
        try:
            failed = stop.stop(
                urgent=urgent, grace_from=grace_from, grace=self.config.grace_seconds
            )
        finally:
            if self.keeper is not None:
                self.keeper.stop()
        if failed is not None:
            self.summary.error = self.summary.error or failed

    def _exit_reason(self, stopped_by: str) -> str:
        """Why the run ended, decided here alone, once, after the stop sequence.

        An error anywhere (the loop or the stop sequence) is ``error``. A run
        that lost a job (its outcome not recorded: the lease ran out under it,
        or another run took it) is ``lost``, exit 1, whatever else it did: that
        is something to look at, never a success. A run that gave jobs back or
        left some working never says ``drained`` (exit 0): a scheduler
        re-triggers on exit 3, and a job that always outlives the budget would
        otherwise burn its attempts unseen. A run whose budget ran out with
        nothing left is ``drained``. A run that left a capped queue to the runs
        holding every place, with jobs of it still ready, is ``capped`` (exit 3):
        work is left, but not for a run started at once, so a self-reinvoking
        function (drain.serverless, which continues only on ``budget``) never
        loops on a full cap. A run whose rated queue's bucket held it back when it
        stopped (its budget ran out while it paced itself, or the next token came
        after the deadline), with jobs of that queue still ready, is ``rate`` (exit
        3): the rate, not the queue, ended it.
        """
        summary = self.summary
        if summary.error is not None:
            return "error"
        if self.executor.cannot_run is not None:
            summary.error = self.executor.cannot_run
            return "usage"
        if self.board.lost_count:
            summary.note("jobs_lost", count=self.board.lost_count)
            return "lost"
        if stopped_by == "signal":
            return stopped_by
        if summary.released or summary.abandoned:
            if summary.released:
                summary.note("jobs_released", count=summary.released)
            if stopped_by == "budget" and self.pacing.ended_the_run(summary):
                return "rate"
            return "budget" if stopped_by == "budget" else "work-left"
        if stopped_by in ("budget", "drained") and self.pacing.ended_the_run(summary):
            return "rate"
        if stopped_by == "budget" and not reporting.work_left(
            self.session, self.table, self.queues
        ):
            return "drained"
        if stopped_by == "drained" and reporting.work_left(
            self.session, self.table, sorted(self.policy.capped)
        ):
            return "capped"
        return stopped_by

    def _start_threads(self) -> None:
        self.keeper = keeper_for(self.session, self.config, self.board, self.executor, self.clock)
        self.keeper.start()
        self.executor.start()

    def _loop(self) -> str:
        """Claim, hand out and record until the queues are empty or the run must stop."""
        board = self.board
        while True:
            board.wake.clear()
            stop = self._stop_reason()
            if stop is not None:
                return stop
            self.intake.release_stale()
            self.intake.release_given_back()
            claim = self.cycle.next_claim()
            if claim or self.intake.poisoned or self.cycle.flush_due():
                self.cycle.send(board.take_results(), claim)
                if self.cycle.holding:
                    continue  # the next claim goes out now, its jobs decoded meanwhile
            board.dispatch_suspect()
            if board.load().idle and not self.intake.poisoned:
                if self.policy.drained:
                    return "drained"
                if self.policy.out_of_budget:
                    return "budget"
                if claim is not None or self.policy.resume():
                    continue
            self.progress.show()
            board.wake.wait(timeout=self.pacing.sleep())

    def _stop_reason(self) -> str | None:
        if self.signals.count:
            return "signal"
        if self.slot_lost:
            return "runners-busy"
        if self.executor.cannot_run is not None:
            return "usage"
        if self.keeper is not None and self.keeper.failure is not None:
            raise self.keeper.failure
        return "budget" if self.clock() >= self.deadline else None
