"""The one-shot run: reap, claim, hand out, complete or fail, stop on empty or budget.

Threads and who owns what:

* the main thread owns the loop and every statement except lease extensions: it
  claims batches into ``pending``, and sends the finished jobs' outcomes together
  with the next claim in one pipeline round trip;
* ``concurrency`` worker threads take jobs from ``pending``, run the handler, and
  put outcomes into ``results``; no worker ever touches the database;
* the lease keeper (:mod:`drain.leases`) extends leases of jobs still waiting or
  working, on the same connection (the session serialises use of it).

No transaction is ever open while a handler runs: the connection is in
autocommit and each statement commits on its own, so between statements the
session is ``idle``. The stop path (budget, signal, error, even ``BaseException``)
releases unstarted jobs with their attempt given back, gives in-flight jobs the
grace period, and cuts the leases of the ones still working, so the next run
reaps them at once.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from itertools import chain
from types import FrameType
from typing import Any, Literal, NamedTuple

import psycopg

from drain import handlers as handler_module
from drain import queue, schema
from drain.config import VACUUM_DEAD_FRACTION, VACUUM_MIN_DEAD_ROWS, RunConfig
from drain.db import Session
from drain.errors import DrainError
from drain.exchange import ClaimRequest, ClaimSettings, Exchange, Outcomes, Reply
from drain.handlers import AsyncBridge, ExecHandler, HandlerFunc
from drain.jobs import Job, Owned, PermanentError, RetryLater
from drain.leases import LeaseKeeper
from drain.redact import Redactor, describe, storable_error
from drain.summary import Summary

log = logging.getLogger("drain")

OutcomeKind = Literal["done", "retry", "fail", "snooze"]
# Before any job has been timed, assume this much per job when sizing a claim
# against the remaining budget.
INITIAL_JOB_SECONDS_GUESS = 0.0
JOB_SECONDS_SMOOTHING = 0.2
# Finished outcomes wait at most this long for a claim to ride with.
FLUSH_AFTER = 0.5
# Claim sizes (see Runner._claim_size): the first claim of a run, and the size
# claims keep while jobs are slow; fast jobs are claimed for about this much
# work across the workers, and no claim grows past this much stored payload.
FIRST_CLAIM = 100
FIRST_CLAIM_PER_WORKER = 10
CLAIM_WORK_SECONDS = 0.25
CLAIM_PAYLOAD_BYTES = queue.DEFAULT_MAX_CLAIM_BYTES
# A claim that takes this share of a lease to come back has its leases renewed
# before its jobs are handed out; a job whose lease was last renewed this share
# of a lease ago is never started (the lease keeper renews at a third, so only a
# run that was frozen, or starved of the connection, gets there).
SLOW_CLAIM_SHARE = 0.1
START_LIMIT_SHARE = 2 / 3


class Outcome(NamedTuple):
    """What one attempt came to, waiting to be written back."""

    job: Job
    kind: OutcomeKind
    seconds: float
    error: str | None = None
    at: datetime | None = None
    delay: float | None = None


class _Work:
    """State shared by the main thread, the workers and the lease keeper.

    One condition guards it all; every critical section is a few dictionary or
    deque operations, never a handler call or a statement.
    """

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.wake = threading.Event()
        self.pending: deque[Job] = deque()
        # A job that came back from a run that died waits here until nothing else
        # of this run is waiting or working, then runs alone (see _dispatch_suspect).
        self.held: list[Job] = []
        self.suspects: set[int] = set()
        self.running: dict[int, Job] = {}
        self.results: list[Outcome] = []
        self.leased_at: dict[int, float] = {}
        # Attempts, as (id, attempt): a job this run lost may come back to it in a
        # later claim, under a new attempt that is ours again.
        self.lost: set[tuple[int, int]] = set()
        self.abandoned: set[tuple[int, int]] = set()
        # claimed jobs whose lease may have run out before a worker took them
        self.stale: list[Job] = []
        self.closing = False
        self.lost_count = 0

    def owned(self) -> list[tuple[Job, float]]:
        with self.cv:
            jobs = list(self.pending) + list(self.running.values()) + self.held
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
                live = chain(self.pending, self.held, self.running.values())
                gone &= {(job.id, job.attempt) for job in live}
            if not gone:
                return
            self.lost |= gone
            self.lost_count += len(gone)
            self.pending = deque(job for job in self.pending if (job.id, job.attempt) not in gone)
            self.held = [job for job in self.held if (job.id, job.attempt) not in gone]
            for job_id, _ in gone:
                self.leased_at.pop(job_id, None)
        if held_only:
            log.warning("lease extension found %d job(s) no longer ours", len(gone))
        self.wake.set()

    def take_results(self) -> list[Outcome]:
        with self.cv:
            results, self.results = self.results, []
            return results

    def take_stale(self) -> list[Job]:
        with self.cv:
            stale, self.stale = self.stale, []
            return stale

    def close(self) -> list[Job]:
        """Stop handing out jobs; return the ones never started."""
        with self.cv:
            self.closing = True
            unstarted = list(self.pending) + self.held + self.stale
            self.pending.clear()
            self.held = []
            self.stale = []
            self.cv.notify_all()
            return unstarted

    def forget(self, job_ids: Sequence[int]) -> None:
        with self.cv:
            for job_id in job_ids:
                self.leased_at.pop(job_id, None)


class _Signals:
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


class Runner:
    """One run over one queue table. Use :meth:`run` once."""

    def __init__(
        self,
        config: RunConfig,
        handlers: Mapping[str, HandlerFunc],
        *,
        clock: Callable[[], float] = time.monotonic,
        started: float | None = None,
    ) -> None:
        """``started`` is when the budget began on ``clock`` (default: now); the CLI
        passes its process start, so interpreter start-up counts against the budget."""
        config.validate()
        self.config = config
        self.table = config.table
        self.clock = clock
        self.redactor = Redactor(config.connect.dsn)
        self.summary = Summary(table=config.table.qualified)
        self.handlers = dict(handlers)
        self.queues = self._choose_queues()
        self.work = _Work()
        self.signals = _Signals(self.work.wake)
        self.bridge = AsyncBridge()
        self.started = clock() if started is None else started
        self.deadline = self.started + config.max_seconds
        self.session = Session(
            config.connect,
            deadline=lambda: self.deadline,
            clock=clock,
            on_reconnect=self._after_reconnect,
        )
        self.slot_lost = False
        self.keeper: LeaseKeeper | None = None
        self.workers: list[threading.Thread] = []
        self.open_queues: deque[str] = deque(self.queues)
        self.job_seconds = INITIAL_JOB_SECONDS_GUESS
        self.claimed_jobs = 0
        self.claimed_bytes = 0
        self.poisoned: list[queue.Failure] = []
        self.out_of_budget = False
        self.alone: int | None = None  # a suspect running alone; no claims meanwhile
        self.claim_cap: int | None = None  # set after a claim the server gave up on
        self.exchange = Exchange(
            self.session,
            self.table,
            ClaimSettings(
                config.lease,
                config.max_payload,
                CLAIM_PAYLOAD_BYTES,
                config.backoff_base,
                config.backoff_cap,
            ),
            clock,
        )
        self._results_seen_at: float | None = None
        self._last_progress = 0.0

    # -- setup ------------------------------------------------------------------------

    def _choose_queues(self) -> list[str]:
        if not self.config.queues:
            return list(self.handlers)
        chosen = []
        for name in self.config.queues:
            if name in self.handlers:
                chosen.append(name)
            else:
                self.summary.notes.append(f"queue {name!r} has no handler; left alone")
        return chosen

    # -- the run ----------------------------------------------------------------------

    def run(self) -> Summary:
        """Do the whole run and return its summary; raise only before anything was claimed."""
        try:
            inspection = self._connect_and_inspect()
            if inspection is None:
                return self._finish_summary()
            with self.signals.installed():
                self._work_and_stop(inspection)
            return self._finish_summary()
        finally:
            self.bridge.close()
            self.session.close()

    def _connect_and_inspect(self) -> schema.Inspection | None:
        max_runners = self.config.max_runners
        inspection = self.session.call(
            lambda conn: schema.inspect(conn, self.table, max_runners=max_runners)
        )
        inspection.check_runnable()
        if max_runners and inspection.runner_slot is None:
            self.summary.exit_reason = "runners-busy"
            self.summary.notes.append(
                f"{max_runners} run(s) already working on {self.table.qualified}; exiting"
            )
            return None
        if not self.queues:
            self.summary.exit_reason = "no-handlers"
            self.summary.notes.append("no queue has a handler; nothing to do")
            return None
        return inspection

    def _after_reconnect(self, conn: psycopg.Connection[Any]) -> None:
        """A new connection mid-run: check the server again and take a runner slot again.

        The slot was a session advisory lock, gone with the old session. A server
        that came back read-only (a standby promoted, or failed over to) stops the
        run before anything is repeated; a slot another run took meanwhile makes
        this run leave in order (exit reason runners-busy). Driver errors go back
        to the session, which retries a connection that broke while checked.
        """
        inspection = schema.inspect(conn, self.table, max_runners=self.config.max_runners)
        inspection.check_runnable()
        if self.config.max_runners and inspection.runner_slot is None:
            log.warning("the runner slot was lost with the connection and is taken; stopping")
            self.slot_lost = True
            self.work.wake.set()

    def _work_and_stop(self, inspection: schema.Inspection) -> None:
        reason = "error"
        try:
            reaped = self.session.call(lambda conn: queue.reap(conn, self.table))
            self.summary.reaped = reaped.requeued + reaped.failed
            self._start_threads()
            reason = self._loop()
        except DrainError as exc:
            self.summary.error = str(exc)
            reason = "error"
        except BaseException:
            # SystemExit, KeyboardInterrupt, a bug: release and cut leases, then re-raise.
            self.summary.exit_reason = "error"
            self.summary.error = self.redactor(
                traceback.format_exc(limit=1).strip().splitlines()[-1]
            )
            self._stop_work(urgent=True)
            raise
        self.summary.exit_reason = reason
        self._stop_work(urgent=self.signals.count > 1 or reason == "error")
        if self.summary.error is not None:
            reason = "error"
        self.summary.exit_reason = self._exit_reason(reason)
        if self.summary.exit_reason != "error" and self.signals.count < 2:
            self._maintain(inspection)
        self._record(inspection)

    def _exit_reason(self, stopped_by: str) -> str:
        """Why the run ended, decided once, after the stop sequence.

        A run that gave jobs back or left some working never says ``drained``
        (exit 0): a scheduler re-triggers on exit 3, and a job that always
        outlives the budget would otherwise burn its attempts unseen. A run whose
        budget ran out with nothing left is ``drained``.
        """
        if stopped_by in ("error", "signal"):
            return stopped_by
        summary = self.summary
        if summary.released or summary.abandoned:
            if summary.released:
                summary.notes.append(
                    f"{summary.released} job(s) claimed but not started were given back"
                )
            return "budget" if stopped_by == "budget" else "work-left"
        if stopped_by == "budget" and not self._work_left():
            return "drained"
        return stopped_by

    def _finish_summary(self) -> Summary:
        self.summary.lost = self.work.lost_count
        self.summary.seconds = self.clock() - self.started
        self._progress(final=True)
        return self.summary

    # -- threads ----------------------------------------------------------------------

    def _start_threads(self) -> None:
        self.keeper = LeaseKeeper(
            self.session,
            self.table,
            self.config.lease,
            owned=self.work.owned,
            renewed=self.work.renewed,
            lost=lambda jobs: self.work.mark_lost(jobs, held_only=True),
            clock=self.clock,
        )
        self.keeper.start()
        for number in range(self.config.concurrency):
            thread = threading.Thread(
                target=self._worker, name=f"drain-worker-{number + 1}", daemon=True
            )
            thread.start()
            self.workers.append(thread)

    def _worker(self) -> None:
        work = self.work
        low_water = self._low_water()
        flush_at = self.config.batch_size
        start_limit = self.config.lease * START_LIMIT_SHARE
        while True:
            with work.cv:
                while not work.pending and not work.closing:
                    work.cv.wait()
                if work.closing:
                    return
                job = work.pending.popleft()
                if self.clock() - work.leased_at.get(job.id, 0.0) >= start_limit:
                    work.stale.append(job)  # its lease may be gone: never start it
                    work.wake.set()
                    continue
                work.running[job.id] = job
                wake = len(work.pending) <= low_water
            if wake:
                work.wake.set()
            outcome = self._execute(job)
            with work.cv:
                del work.running[job.id]
                if (job.id, job.attempt) in work.lost or (job.id, job.attempt) in work.abandoned:
                    continue
                work.results.append(outcome)
                wake = len(work.results) >= flush_at or (
                    not work.running and len(work.pending) <= low_water
                )
            if wake:
                work.wake.set()

    def _execute(self, job: Job) -> Outcome:
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
                return Outcome(job, "fail", time.perf_counter() - started, self._error_text(exc))
            except BaseException as exc:  # a handler's SystemExit or KeyboardInterrupt too
                return Outcome(job, "retry", time.perf_counter() - started, self._error_text(exc))
            return Outcome(job, "done", time.perf_counter() - started)
        except BaseException as exc:  # reading what the handler raised failed (a property, say)
            text = self._error_text(f"the handler's outcome could not be read: {describe(exc)}")
            return Outcome(job, "retry", time.perf_counter() - started, text)

    def _error_text(self, error: BaseException | str) -> str:
        """The text ``last_error`` gets: storable, redacted and short (drain.redact)."""
        text = describe(error) if isinstance(error, BaseException) else error
        return storable_error(text, self.redactor)

    def _low_water(self) -> int:
        """Claim the next batch while this many jobs still wait, so workers never starve."""
        return min(self.config.concurrency, self.config.batch_size // 2)

    # -- the loop ---------------------------------------------------------------------

    def _loop(self) -> str:
        work = self.work
        while True:
            work.wake.clear()
            if self.signals.count:
                return "signal"
            if self.slot_lost:
                return "runners-busy"
            if self.keeper is not None and self.keeper.failure is not None:
                raise self.keeper.failure
            now = self.clock()
            if now >= self.deadline:
                return "budget"
            self._release_stale()
            claim = self._next_claim(now)
            if claim or self.poisoned or self._flush_due(now):
                self._exchange(work.take_results(), claim)
            self._dispatch_suspect()
            with work.cv:
                idle = not (work.pending or work.running or work.results or work.held)
            if idle and not self.poisoned:
                if not self.open_queues:
                    return "drained"
                if self.out_of_budget:
                    return "budget"
                if claim is not None:
                    continue
            self._progress()
            work.wake.wait(timeout=max(0.0, min(0.5, self.deadline - self.clock())))

    def _flush_due(self, now: float) -> bool:
        """Whether finished outcomes should go out now rather than ride with the next claim.

        Outcomes normally travel with the next claim, in one round trip. They go
        on their own when a batch's worth has piled up, when nothing else is left
        to wait for, or when the oldest has waited ``FLUSH_AFTER`` seconds (slow
        jobs at high concurrency would otherwise hold finished jobs back).
        """
        with self.work.cv:
            count = len(self.work.results)
            idle = not self.work.pending and not self.work.running
        if not count:
            self._results_seen_at = None
            return False
        if self._results_seen_at is None:
            self._results_seen_at = now
        return count >= self.config.batch_size or idle or now - self._results_seen_at >= FLUSH_AFTER

    def _release_stale(self) -> None:
        """Give back jobs whose lease ran too low before a worker took them.

        Released where still ours; another run may already have reaped them, and
        then the fenced release finds nothing and they count as lost.
        """
        stale = self.work.take_stale()
        if not stale:
            return
        log.warning(
            "%d job(s) waited past two thirds of their lease (was this run frozen?); "
            "giving them back unstarted",
            len(stale),
        )
        marked = self.work.suspects
        released = self.session.call(
            lambda conn: queue.release(conn, self.table, stale, keep_marked=marked)
        )
        self.summary.released += len(released.owned)
        self._count_lost(_lost_of(stale, released))
        self.work.forget([job.id for job in stale])

    def _dispatch_suspect(self) -> None:
        """Start a held suspect once nothing else of this run is waiting or working.

        A suspect came back from a run that died, perhaps because of it. Run
        alone, with no batch-mates claimed beside it, it can only cost its own
        attempt if it kills this run too.
        """
        work = self.work
        with work.cv:
            if not work.held or work.pending or work.running:
                return
            job = work.held.pop(0)
            work.pending.append(job)
            self.alone = job.id
            work.cv.notify_all()

    def _next_claim(self, now: float) -> tuple[str, int] | None:
        """The queue and size of the next claim, or None when no claim is due."""
        if not self.open_queues:
            return None
        with self.work.cv:
            waiting = len(self.work.pending)
            busy = len(self.work.running)
            alone = self.alone
            if (
                alone is not None
                and alone not in self.work.running
                and all(job.id != alone for job in self.work.pending)
            ):
                self.alone = None  # the suspect is done: claims resume
            if self.work.held or self.alone is not None:
                return None
        if waiting > self._low_water():
            return None
        size = self._claim_size()
        if self.job_seconds > 0:
            remaining = self.deadline - now
            can_finish = int(remaining * self.config.concurrency / self.job_seconds)
            size = min(size, can_finish - waiting - busy)
        if size < 1:
            self.out_of_budget = not waiting and not busy
            return None
        queue_name = self.open_queues[0]
        self.open_queues.rotate(-1)
        return queue_name, size

    def _claim_size(self) -> int:
        """How many jobs the next claim asks for, before the budget has its say.

        A claim costs one round trip and one commit whether it brings 10 jobs or
        1,000, so jobs that finish fast are claimed in bulk: enough for about
        ``CLAIM_WORK_SECONDS`` of work across the workers, up to --batch-size.
        Slow jobs are claimed a few at a time (never fewer than the workers), so
        a run holds no leases on work it will not reach soon and several runs
        share a backlog of slow jobs evenly; before any job has been timed a
        claim brings ``FIRST_CLAIM_PER_WORKER`` jobs per worker. Large payloads
        stop a claim growing past ``CLAIM_PAYLOAD_BYTES``. Measured with bench/ (20,000 no-op jobs, fsync
        on, 2 cores, the run loop alone, medians of 3): claims of 100 drained
        11,100 jobs/s, claims growing to 1,000 drained 14,400; through a proxy
        adding 3 ms per round trip, 5,500 and 8,200.
        """
        limit = self.config.batch_size
        workers = self.config.concurrency
        first = min(limit, FIRST_CLAIM, FIRST_CLAIM_PER_WORKER * workers)
        size = first
        if self.job_seconds > 0:
            fits = math.ceil(CLAIM_WORK_SECONDS * workers / self.job_seconds)
            size = min(limit, max(workers, fits))
        if self.claimed_bytes > 0:
            per_job = self.claimed_bytes / self.claimed_jobs
            size = min(size, max(1, int(CLAIM_PAYLOAD_BYTES / per_job)))
        if self.claim_cap is not None:
            size = min(size, self.claim_cap)
        return size

    def _exchange(self, results: list[Outcome], claim: tuple[str, int] | None) -> None:
        """Send outcomes and the next claim together (see :mod:`drain.exchange`), then apply
        what the database said."""
        self._results_seen_at = None
        self._learn_job_seconds(results)
        outcomes = Outcomes(
            done=[o.job for o in results if o.kind == "done"],
            failures=[
                queue.Failure(o.job, o.error or "", permanent=o.kind == "fail")
                for o in results
                if o.kind in ("retry", "fail")
            ]
            + self.poisoned,
            snoozes=[
                queue.Snooze(o.job, at=o.at, delay=o.delay) for o in results if o.kind == "snooze"
            ],
        )
        replies = self.exchange.send(outcomes, ClaimRequest(*claim) if claim else None)
        self.poisoned = []
        for reply in replies:
            self._apply(reply)
        if claim is not None:
            self._after_claim(claim[0], claim[1], replies[-1])

    def _apply(self, reply: Reply) -> None:
        """Count what one exchange recorded; jobs no longer ours are lost."""
        summary = self.summary
        if reply.completed is not None:
            summary.done += len(reply.completed.owned)
        if reply.failed is not None:
            summary.retried += len(reply.failed.retried)
            summary.failed += len(reply.failed.failed)
        if reply.snoozed is not None:
            summary.snoozed += len(reply.snoozed.owned)
        kinds = {job.id: "done" for job in reply.sent.done}
        kinds |= {s.job.id: "snooze" for s in reply.sent.snoozes}
        for job_id, status in reply.confirmed.items():
            kind = kinds.get(job_id)
            if kind == "done":
                summary.done += 1
            elif kind == "snooze":
                summary.snoozed += 1
            elif status == "failed":
                summary.failed += 1
            else:
                summary.retried += 1
        unconfirmed = set(reply.lost()) - reply.confirmed.keys()
        self._count_lost([job for job in reply.sent.jobs() if job.id in unconfirmed])
        self.work.forget(
            [job.id for job in reply.sent.done]
            + [f.job.id for f in reply.sent.failures]
            + [s.job.id for s in reply.sent.snoozes]
        )

    def _after_claim(self, queue_name: str, size: int, reply: Reply) -> None:
        """Take a claim's jobs in, or claim less after a claim the server gave up on."""
        if reply.claim_error is not None:
            if size <= 1:
                raise reply.claim_error
            self.claim_cap = max(1, size // 2)
            log.warning("%s; claiming %d at a time", reply.claim_error, self.claim_cap)
            return
        if self.claim_cap is not None:
            self.claim_cap = min(self.config.batch_size, math.ceil(self.claim_cap * 1.25))
        assert reply.claimed is not None
        claimed = reply.claimed
        if not len(claimed):
            self.open_queues.remove(queue_name)
            return
        leased_at = self._fresh_leases(claimed, reply.sent_at, reply.returned_at)
        self._accept_claim(claimed, leased_at)

    def _fresh_leases(self, claimed: queue.Claim, sent_at: float, returned_at: float) -> float:
        """When the claim's leases began, as far as this run may assume.

        Leases count from the moment each row was leased, which is after the claim
        was sent: the send time is a safe stand-in. A claim that took a tenth of a
        lease or more to come back is renewed at once, before any of its jobs is
        handed out, so no job starts on a lease shortened by a slow claim.
        """
        if not claimed.jobs or returned_at - sent_at < self.config.lease * SLOW_CLAIM_SHARE:
            return sent_at
        renewed_at = self.clock()
        kept = self.session.call(
            lambda conn: queue.extend(conn, self.table, claimed.jobs, self.config.lease)
        )
        if kept.lost:
            lost = set(kept.lost)
            claimed.jobs = [job for job in claimed.jobs if job.id not in lost]
            self.summary.claimed += len(lost)
            self.work.lost_count += len(lost)
            log.warning("%d claimed job(s) were gone before a slow claim returned", len(lost))
        return renewed_at

    def _accept_claim(self, claimed: queue.Claim, claimed_at: float) -> None:
        self.summary.failed += len(claimed.exhausted)
        for attempt, reason in claimed.poisoned:
            self.poisoned.append(queue.Failure(attempt, reason, permanent=True))
        self.claimed_jobs += len(claimed.jobs)
        self.claimed_bytes += claimed.payload_bytes
        held = self._hold_one_suspect(claimed, claimed_at) if claimed.suspects else 0
        self.summary.claimed += len(claimed) + held
        work = self.work
        with work.cv:
            for job in claimed.jobs:
                work.leased_at[job.id] = claimed_at
            work.pending.extend(claimed.jobs)
            work.cv.notify_all()

    def _hold_one_suspect(self, claimed: queue.Claim, claimed_at: float) -> int:
        """Keep one suspect of this claim to run alone; give the rest of the claim back.

        Its batch-mates go back at once with their attempt (suspects keep the
        reaper's mark), so a suspect that kills this run costs them nothing.
        Suspects are rare: this costs a round trip only when a run has died.
        Returns how many jobs it kept (to count as claimed): 1, or 0 when the
        claim's only suspects were rows too broken to run.
        """
        suspect = next((job for job in claimed.jobs if job.id in claimed.suspects), None)
        if suspect is None:  # the only suspects were rows too broken to run
            return 0
        others = [job for job in claimed.jobs if job is not suspect]
        if others:
            marked = claimed.suspects
            given_back = self.session.call(
                lambda conn: queue.release(conn, self.table, others, keep_marked=marked)
            )
            self._count_lost(_lost_of(others, given_back))
        claimed.jobs = []
        with self.work.cv:
            self.work.held.append(suspect)
            self.work.suspects.add(suspect.id)
            self.work.leased_at[suspect.id] = claimed_at
        return 1

    def _confirm(self, jobs: Sequence[Owned]) -> dict[int, str]:
        return self.session.call(lambda conn: queue.confirm_outcomes(conn, self.table, jobs))

    def _count_lost(self, jobs: Sequence[Owned]) -> None:
        if jobs:
            log.warning("%d job(s) were no longer ours; their results were not recorded", len(jobs))
            self.work.mark_lost(jobs)

    def _learn_job_seconds(self, results: Sequence[Outcome]) -> None:
        for outcome in results:
            if self.job_seconds <= 0:
                self.job_seconds = outcome.seconds
            else:
                self.job_seconds += JOB_SECONDS_SMOOTHING * (outcome.seconds - self.job_seconds)

    # -- stopping ---------------------------------------------------------------------

    def _stop_work(self, *, urgent: bool) -> None:
        """Release what never started, wait out the grace period, cut leases of the rest."""
        unstarted = self.work.close()
        try:
            self._flush_and_release(unstarted)
            if not urgent:
                self._wait_for_in_flight()
            self._abandon_in_flight()
        except DrainError as exc:
            self.summary.error = self.summary.error or str(exc)
            self.summary.exit_reason = "error"
        finally:
            # Programs go before the lease keeper: a stop that failed above leaves
            # leases to run out, never a program running for a job nobody holds.
            for func in self.handlers.values():
                if isinstance(func, ExecHandler):
                    func.terminate_all()
            if self.keeper is not None:
                self.keeper.stop()

    def _flush_and_release(self, unstarted: list[Job]) -> None:
        if unstarted:
            marked = self.work.suspects
            released = self.session.call(
                lambda conn: queue.release(conn, self.table, unstarted, keep_marked=marked)
            )
            self.summary.released += len(released.owned)
            self._count_lost(_lost_of(unstarted, released))
            self.work.forget([job.id for job in unstarted])
        results = self.work.take_results()
        if results or self.poisoned:
            self._exchange(results, None)

    def _wait_for_in_flight(self) -> None:
        """In-flight jobs get the grace period, counted from the deadline or the signal."""
        stop_began = self.deadline if self.summary.exit_reason == "budget" else self.clock()
        grace_end = stop_began + self.config.grace_seconds
        while True:
            with self.work.cv:
                busy = bool(self.work.running)
            results = self.work.take_results()
            if results:
                self._exchange(results, None)
            if not busy or self.signals.count > 1 or self.clock() >= grace_end:
                return
            self.work.wake.clear()
            self.work.wake.wait(timeout=max(0.0, min(0.2, grace_end - self.clock())))

    def _abandon_in_flight(self) -> None:
        """Stop the programs of jobs still working, then cut those jobs' leases.

        A lease is cut only once everything started for its job is gone (an
        ``--exec`` program's whole process group, which terminate_all waits for),
        since the next run may start the job at once. A job whose program survived
        SIGKILL keeps its lease and is left to it.
        """
        with self.work.cv:
            leftover = [
                job
                for job in self.work.running.values()
                if (job.id, job.attempt) not in self.work.lost
            ]
            self.work.abandoned.update((job.id, job.attempt) for job in leftover)
        programs = {id(f): f for f in self.handlers.values() if isinstance(f, ExecHandler)}
        survivors: set[int] = set()
        for func in programs.values():
            survivors |= func.terminate_all()
        results = self.work.take_results()
        if results:
            self._exchange(results, None)
        if survivors:
            self.summary.notes.append(
                f"{len(survivors)} job(s) whose programs survived SIGKILL keep their leases "
                "until they run out"
            )
        leftover = [job for job in leftover if job.id not in survivors]
        if not leftover:
            return
        cut = self.session.call(lambda conn: queue.extend(conn, self.table, leftover, 0))
        self.summary.abandoned += len(cut.owned)
        self.summary.notes.append(
            f"{len(cut.owned)} job(s) still working at the end; their leases were cut short "
            "so the next run reaps them"
        )

    def _work_left(self) -> bool:
        if self.summary.released:
            return True
        try:
            return self.session.call(lambda conn: queue.ready_left(conn, self.table, self.queues))
        except DrainError:
            return True

    # -- after the work ---------------------------------------------------------------

    def _maintain(self, inspection: schema.Inspection) -> None:
        """Archive old done jobs, then vacuum when dead rows pile up."""
        oid = inspection.table_oid
        assert oid is not None
        config = self.config
        health: queue.TableHealth | None = None
        try:
            if config.archive_mode == "move" and not inspection.archive_exists:
                self.summary.notes.append(
                    f"archive skipped: no table {self.table.archive_name} (run `drain init`)"
                )
            elif config.archive_mode != "off":
                mode = config.archive_mode
                archived = self.session.call(
                    lambda conn: queue.archive(
                        conn,
                        self.table,
                        oid,
                        config.archive_after,
                        config.archive_batch,
                        mode,
                        keep_going=lambda: self.clock() < self.deadline,
                    )
                )
                self.summary.archived += archived.archived
                health = archived.health
            if config.vacuum == "off" or self.clock() >= self.deadline:
                return
            if health is None and config.vacuum == "auto":
                health = self.session.call(lambda conn: queue.table_health(conn, self.table, oid))
            if health is not None:
                # The server's counts lag: a backend publishes them at most once a
                # second, so a run shorter than that would not see its own dead rows.
                # Every row this run updated or deleted left one behind.
                s = self.summary
                own = s.claimed + s.processed + s.reaped + s.released + s.archived
                health = health._replace(dead_rows=max(health.dead_rows, own))
            if config.vacuum == "always" or (health is not None and _needs_vacuum(health)):
                skipped = self.session.call(self._vacuum)
                if skipped:
                    self.summary.notes.append(f"vacuum skipped: {skipped}")
                else:
                    self.summary.vacuumed = True
        except DrainError as exc:
            self.summary.notes.append(f"maintenance skipped: {exc}")

    def _vacuum(self, conn: psycopg.Connection[Any]) -> str | None:
        """VACUUM the table; the server's reason when it skipped it (not the owner, say).

        PostgreSQL skips a table it may not vacuum with a warning, not an error.
        """
        warnings: list[str] = []

        def collect(notice: psycopg.errors.Diagnostic) -> None:
            if notice.severity_nonlocalized == "WARNING" and notice.message_primary:
                warnings.append(notice.message_primary)

        conn.add_notice_handler(collect)
        try:
            conn.execute(self.table.statement("vacuum"))
        finally:
            conn.remove_notice_handler(collect)
        return self.redactor("; ".join(warnings)) if warnings else None

    def _record(self, inspection: schema.Inspection) -> None:
        if not self.config.record or not inspection.runs_exists:
            return
        summary = self.summary
        params = {
            "jobs_table": summary.table,
            "seconds": self.clock() - self.started,
            "claimed": summary.claimed,
            "done": summary.done,
            "retried": summary.retried,
            "failed": summary.failed,
            "lost": self.work.lost_count,
            "reaped": summary.reaped,
            "released": summary.released,
            "archived": summary.archived,
            "exit_reason": summary.exit_reason,
            "exit_code": summary.exit_code,
            "error": summary.error,
        }
        try:
            self.session.call(lambda conn: conn.execute(self.table.statement("record_run"), params))
        except DrainError as exc:
            summary.notes.append(f"run not recorded: {exc}")

    # -- output -----------------------------------------------------------------------

    def _progress(self, final: bool = False) -> None:
        if not self.config.progress:
            return
        now = self.clock()
        if not final and now - self._last_progress < 0.5:
            return
        self._last_progress = now
        s = self.summary
        elapsed = now - self.started
        rate = s.processed / elapsed if elapsed > 0 else 0.0
        line = (
            f"\rdrain: {s.processed:,} jobs ({s.done:,} done, {s.retried:,} retried, "
            f"{s.failed:,} failed) {rate:,.0f}/s, {max(0.0, self.deadline - now):.0f}s left "
        )
        sys.stderr.write(line + ("\n" if final else ""))
        sys.stderr.flush()


def _lost_of(sent: Sequence[Job], fenced: queue.Fenced) -> list[Job]:
    """The jobs of ``sent`` that a fenced statement found no longer ours."""
    lost = set(fenced.lost)
    return [job for job in sent if job.id in lost]


def _needs_vacuum(health: queue.TableHealth) -> bool:
    return (
        health.dead_rows >= VACUUM_MIN_DEAD_ROWS
        and health.dead_rows >= VACUUM_DEAD_FRACTION * max(health.live_rows, 1)
    )


def resolve_handlers(
    *,
    app: str | None = None,
    handler: str | None = None,
    exec_command: str | None = None,
    queues: Sequence[str] = (),
    handlers: Mapping[str, HandlerFunc] | None = None,
    config: RunConfig | None = None,
) -> dict[str, HandlerFunc]:
    """Handlers by queue from exactly one source: an app module, a function, a program, or a mapping.

    ``config`` gives a program the variables it may keep (``exec_keep_env``) and
    the DSN whose password stays out of its environment and output.
    """
    given = [x is not None for x in (app, handler, exec_command, handlers)]
    if sum(given) != 1:
        from drain.errors import UsageError

        raise UsageError("give exactly one handler source: --app, --handler or --exec")
    if app is not None:
        return dict(handler_module.load_app(app))
    if handlers is not None:
        return dict(handlers)
    names = list(queues) or ["default"]
    func: HandlerFunc
    if handler is not None:
        func = handler_module.load_function(handler)
    elif config is not None:
        func = ExecHandler(
            exec_command or "", keep_env=config.exec_keep_env, dsn=config.connect.dsn
        )
    else:
        func = ExecHandler(exec_command or "")
    return {name: func for name in names}


def run(
    dsn: str | None = None,
    *,
    app: str | None = None,
    handler: str | None = None,
    exec_command: str | None = None,
    handlers: Mapping[str, HandlerFunc] | None = None,
    config: RunConfig | None = None,
    **settings: Any,
) -> Summary:
    """Drain the queue once, as ``drain run`` does, and return the summary.

    Give the handlers one way: ``app="myapp.jobs"`` (a module with
    ``@drain.handler`` functions), ``handler="mod:func"``, ``exec_command="cmd"``
    or ``handlers={"queue": func}``. Any :class:`~drain.config.RunConfig` field may
    be passed as a keyword (``max_seconds=60``, ``concurrency=4``, ``queues=("emails",)``).
    Raises :class:`~drain.errors.DrainError` when the run cannot start (no
    connection, no schema); afterwards problems end up in the summary.
    """
    from drain.db import ConnectOptions, resolve_dsn

    if config is None:
        connect_fields = {"connect_timeout", "retry_for", "application_name", "pooler"}
        connect_settings = {k: settings.pop(k) for k in list(settings) if k in connect_fields}
        connect = ConnectOptions(dsn=resolve_dsn(dsn), **connect_settings)
        if "queues" in settings:
            settings["queues"] = tuple(settings["queues"])
        config = RunConfig(connect=connect, **settings)
    elif settings:
        config = replace(config, **settings)
    resolved = resolve_handlers(
        app=app,
        handler=handler,
        exec_command=exec_command,
        queues=config.queues,
        handlers=handlers,
        config=config,
    )
    return Runner(config, resolved).run()
