"""One turn of the run's loop on the database side: claim, send outcomes, take what came back.

The loop in :mod:`drain.runner.runner` decides when to stop; this part decides,
each turn, whether a claim is due (:meth:`Cycle.next_claim`), whether finished
outcomes should go out without one (:meth:`Cycle.flush_due`, the one rule in
:func:`~drain.runner.exchange.flush_due`), and sends both in one pipeline
(:meth:`Cycle.send`), putting what came back onto the board. Main thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drain.core.summary import Summary
from drain.runner.board import Board
from drain.runner.exchange import Exchange, flush_due
from drain.runner.intake import Intake
from drain.runner.outcomes import Outcome, Outcomes
from drain.runner.policy import ClaimPolicy, ClaimRequest

log = logging.getLogger("drain")


class Cycle:
    """The claim and the outcomes of each turn, between the board and the exchange."""

    def __init__(
        self,
        board: Board,
        policy: ClaimPolicy,
        intake: Intake,
        exchange: Exchange,
        summary: Summary,
        batch_size: int,
        clock: Callable[[], float],
        deadline: float,
    ) -> None:
        self.board, self.policy, self.intake = board, policy, intake
        self.exchange, self.summary = exchange, summary
        self.batch_size, self.clock, self.deadline = batch_size, clock, deadline
        self._results_seen_at: float | None = None

    def next_claim(self) -> ClaimRequest | None:
        """The claim to send now, or None (drained, blocked, or enough jobs waiting)."""
        if self.policy.drained or self.board.claims_blocked():
            return None
        load = self.board.load()
        if load.waiting > self.board.low_water:
            return None
        return self.policy.next_claim(
            self.clock(), self.deadline, waiting=load.waiting, busy=load.busy
        )

    def flush_due(self) -> bool:
        """Whether the outcomes on the board should go out now, without a claim."""
        load = self.board.load()
        if not load.results:
            self._results_seen_at = None
            return False
        now = self.clock()
        if self._results_seen_at is None:
            self._results_seen_at = now
        idle = not load.waiting and not load.busy
        waited = now - self._results_seen_at
        return flush_due(load.results, self.batch_size, idle=idle, waited=waited)

    def flush(self) -> None:
        """Send the outcomes on the board (and rows too broken to run), with no claim."""
        results = self.board.take_results()
        if results or self.intake.poisoned:
            self.send(results, None)
        self.intake.release_given_back()

    def send(self, results: list[Outcome], claim: ClaimRequest | None) -> None:
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
