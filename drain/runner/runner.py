"""The one-shot run, wired from its parts: reap, claim, hand out, record, stop, clean up.

The parts, and the thread that drives each:

* :mod:`~drain.runner.board`: the jobs the run holds, by state, behind the one
  lock (every thread);
* :mod:`~drain.runner.policy`: which queue and how many jobs the next claim
  takes (main thread; pure);
* :mod:`~drain.runner.exchange`: outcomes and the next claim in one pipeline
  on the run's one connection, and the one rule for when outcomes go out (main
  thread; the workers ask the rule whether to wake it);
* :mod:`~drain.runner.intake`: a claim's jobs onto the board, suspects held to
  run alone, stale jobs given back (main thread);
* :mod:`~drain.runner.executor`: worker threads running handlers, never
  touching the database (workers);
* :mod:`drain.runner.leases`: the lease keeper, renewing what the board holds (its own
  thread, on the same connection: the session serialises use of it);
* :mod:`~drain.runner.stopping`: signals, then release, grace and lease cut
  (main thread);
* :mod:`~drain.runner.aftermath`: archive, vacuum, record (main thread).

This module alone decides why the run ended. No transaction is ever open while
a handler runs: the connection is in autocommit, each statement commits on its
own, and between statements the session is ``idle``.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Mapping, Sequence

from drain.core.config import RunConfig
from drain.core.errors import DrainError
from drain.core.jobs import Job
from drain.core.redact import Redactor
from drain.core.summary import Backlog, Summary
from drain.observe.observers import Observers, RunEnd, RunStart, for_run
from drain.runner import opening
from drain.runner.aftermath import Aftermath
from drain.runner.board import Board
from drain.runner.exchange import ClaimSettings, Exchange, flush_due
from drain.runner.executor import Executor
from drain.runner.handlers import HandlerFunc
from drain.runner.intake import Intake
from drain.runner.leases import LeaseKeeper
from drain.runner.outcomes import Outcome, Outcomes
from drain.runner.policy import ClaimPolicy, ClaimRequest
from drain.runner.progress import Progress
from drain.runner.stopping import Signals, StopSequence
from drain.store import queue, rates, schema
from drain.store.db import Session

log = logging.getLogger("drain")


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
        self.read_backlog = backlog
        self.deadline = self.started + config.max_seconds
        self.board = Board()
        recheck = opening.recheck(self.table, config.max_runners, self._slot_lost)
        self.session = Session(
            config.connect, deadline=lambda: self.deadline, clock=clock, on_reconnect=recheck
        )
        self.signals = Signals(self.board.wake)
        self.policy = ClaimPolicy.for_run(
            self.queues,
            config.batch_size,
            config.concurrency,
            strict=config.queue_order == "strict",
            caps=dict(config.queue_caps),
            rates=dict(config.queue_rates),
        )
        self.exchange = Exchange(self.session, self.table, ClaimSettings.of(config), clock)
        self.intake = Intake(self.session, self.board, self.policy, self.summary, config, clock)
        self.executor = Executor(
            self.board,
            dict(handlers),
            config,
            redactor=self.redactor,
            clock=clock,
            observers=self.observers,
        )
        self.progress = Progress(self.summary, config.progress, self.started, self.deadline, clock)
        self.keeper: LeaseKeeper | None = None
        self.slot_lost = False
        self._results_seen_at: float | None = None
        # The rated queues their bucket held back when the loop stopped (read then,
        # before the stop sequence's grace lets the pauses run out).
        self.held_by_rate: list[str] = []

    def _slot_lost(self) -> None:
        self.slot_lost = True
        self.board.wake.set()

    # -- the run ----------------------------------------------------------------------

    def run(self) -> Summary:
        """Do the whole run and return its summary; raise only before anything was claimed."""
        try:
            max_runners = self.config.max_runners
            inspection = self.session.call(
                lambda conn: schema.inspect(conn, self.table, max_runners=max_runners)
            )
            if opening.first_check(inspection, self.config, self.queues, self.summary):
                if self.config.queue_rates:
                    self.session.call(lambda conn: rates.ensure_table(conn, self.table))
                self.observers.run_started(self._start_info())
                with self.signals.installed():
                    self._work_and_stop(inspection)
            self.summary.lost = self.board.lost_count
            self.summary.seconds = self.clock() - self.started
            self.progress.show(final=True)
            self._report(self._backlog())
            return self.summary
        except BaseException as exc:
            if self.observers:
                self.summary.exit_reason = "error"
                self.summary.error = self.summary.error or self.redactor(str(exc))
                self.summary.seconds = self.clock() - self.started
                self._report({})
            raise
        finally:
            self.executor.close()
            self.session.close()

    # -- what the run reports before it exits ------------------------------------------

    def _start_info(self) -> RunStart:
        config = self.config
        return RunStart(
            self.table.qualified,
            tuple(self.queues),
            self.started_wall,
            config.max_seconds,
            config.grace_seconds,
        )

    def _backlog(self) -> dict[str, Backlog]:
        """The ready jobs left per queue, when the summary or an observer wants them."""
        wanted = self.read_backlog or self.observers.wants_backlog
        if not wanted or not self.queues or self.summary.exit_reason in ("error", "runners-busy"):
            return {}
        left: dict[str, Backlog] = {}
        if self.summary.exit_reason != "drained":
            # a drained run's last claims came back empty: nothing was ready, no need to ask
            try:
                left = self.session.call(lambda conn: queue.backlog(conn, self.table, self.queues))
            except DrainError as exc:
                log.warning("could not read the ready jobs left: %s", exc)
                return {}
        left = {name: left.get(name, Backlog(0, None)) for name in self.queues}
        if self.read_backlog:
            self.summary.ready = {
                name: {"ready": entry.ready, "oldest_ready_seconds": entry.oldest_seconds}
                for name, entry in sorted(left.items())
            }
        return left

    def _report(self, backlog: dict[str, Backlog]) -> None:
        end = RunEnd(self.started_wall, time.time(), backlog)
        self.observers.run_finished(self.summary, end)

    def _work_and_stop(self, inspection: schema.Inspection) -> None:
        stopped_by = "error"
        self.exchange.by_priority = inspection.has_priority
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
            self.held_by_rate = self.policy.held_by_rate(self.clock())
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
        grace_from = self.deadline if stopped_by == "budget" else self.clock()
        stop = StopSequence(
            session=self.session,
            table=self.table,
            board=self.board,
            intake=self.intake,
            executor=self.executor,
            signals=self.signals,
            summary=self.summary,
            flush=self._flush,
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
            summary.notes.append(
                f"{self.board.lost_count} job(s) were lost: their outcome was not recorded "
                "(the lease ran out under this run, or another run took the job)"
            )
            return "lost"
        if stopped_by == "signal":
            return stopped_by
        if summary.released or summary.abandoned:
            if summary.released:
                summary.notes.append(
                    f"{summary.released} job(s) claimed but not started were given back"
                )
            if stopped_by == "budget" and self._rate_ended():
                return "rate"
            return "budget" if stopped_by == "budget" else "work-left"
        if stopped_by in ("budget", "drained") and self._rate_ended():
            return "rate"
        if stopped_by == "budget" and not self._work_left(self.queues):
            return "drained"
        if stopped_by == "drained" and self._work_left(sorted(self.policy.capped)):
            return "capped"
        return stopped_by

    def _rate_ended(self) -> bool:
        """Whether a queue's rate, not the queue, ended the run: a rated queue that its
        bucket held back when the run stopped still has ready jobs."""
        held = self.held_by_rate
        if not held or not self._work_left(held):
            return False
        rates = dict(self.config.queue_rates)
        paced = ", ".join(f"{name!r} at {rates[name].text}" for name in held)
        self.summary.notes.append(
            f"paced by --queue-rate ({paced}): ready jobs are left for a later run"
        )
        return True

    def _work_left(self, queues: Sequence[str]) -> bool:
        """Whether any of ``queues`` still has a job ready (asked only when a run ends)."""
        if not queues:
            return False
        try:
            return self.session.call(lambda conn: queue.ready_left(conn, self.table, queues))
        except DrainError:
            return True

    def _start_threads(self) -> None:
        self.keeper = LeaseKeeper(
            self.session,
            self.table,
            self.config.lease,
            owned=self.board.owned,
            renewed=self._renewed,
            lost=self._leases_lost,
            clock=self.clock,
            cancelled=self.executor.cancelled,
        )
        self.keeper.start()
        self.executor.start()

    def _renewed(self, jobs: Sequence[Job], sent_at: float) -> None:
        self.board.renewed(jobs, sent_at)
        self.executor.renewed(jobs, sent_at)

    def _leases_lost(self, jobs: Sequence[Job]) -> None:
        self.board.mark_lost(jobs, held_only=True)
        self.executor.lost(jobs)

    # -- the loop ---------------------------------------------------------------------

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
            claim = self._next_claim()
            if claim or self.intake.poisoned or self._flush_due():
                self._send(board.take_results(), claim)
            board.dispatch_suspect()
            if board.load().idle and not self.intake.poisoned:
                if self.policy.drained:
                    return "drained"
                if self.policy.out_of_budget:
                    return "budget"
                if claim is not None or self.policy.resume():
                    continue
            self.progress.show()
            board.wake.wait(timeout=self._sleep())

    def _sleep(self) -> float:
        """How long the loop may wait for a worker: at most half a second, never past
        the deadline, nor past the moment a rated queue's bucket refills."""
        now = self.clock()
        longest = min(0.5, self.deadline - now)
        refill = self.policy.rate_wake(now)
        return max(0.0, longest if refill is None else min(longest, refill))

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

    def _next_claim(self) -> ClaimRequest | None:
        if self.policy.drained or self.board.claims_blocked():
            return None
        load = self.board.load()
        if load.waiting > self.board.low_water:
            return None
        return self.policy.next_claim(
            self.clock(), self.deadline, waiting=load.waiting, busy=load.busy
        )

    def _flush_due(self) -> bool:
        load = self.board.load()
        if not load.results:
            self._results_seen_at = None
            return False
        now = self.clock()
        if self._results_seen_at is None:
            self._results_seen_at = now
        idle = not load.waiting and not load.busy
        waited = now - self._results_seen_at
        return flush_due(load.results, self.config.batch_size, idle=idle, waited=waited)

    def _flush(self) -> None:
        """Send the outcomes on the board (and rows too broken to run), with no claim."""
        results = self.board.take_results()
        if results or self.intake.poisoned:
            self._send(results, None)
        self.intake.release_given_back()

    def _send(self, results: list[Outcome], claim: ClaimRequest | None) -> None:
        """Outcomes and the next claim to the database; what came back onto the board."""
        self._results_seen_at = None
        self.policy.learn(outcome.seconds for outcome in results)
        outcomes = Outcomes.of(results, self.intake.poisoned)
        self.intake.poisoned = []
        if claim is not None:
            load = self.board.load()
            claim = claim._replace(time_limited=bool(load.waiting or load.busy or load.held))
        replies = self.exchange.send(outcomes, claim)
        for reply in replies:
            self.board.mark_lost(reply.tally(self.summary))
            self.board.forget([job.id for job in reply.sent.jobs()])
        last = replies[-1]
        if claim is None:
            return
        if last.claim_error is not None:
            log.warning(
                "%s; claiming %d at a time", last.claim_error, self.policy.gave_up(claim.size)
            )
            return
        assert last.claimed is not None
        self.intake.take(claim.queue, last.claimed, last.sent_at, last.returned_at)
