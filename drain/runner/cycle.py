"""One turn of the run's loop on the database side: claim, send outcomes, take what came back.

The loop in :mod:`drain.runner.runner` decides when to stop; this part decides,
each turn, whether a claim is due (:meth:`Cycle.next_claim`), whether finished
outcomes should go out without one (:meth:`Cycle.flush_due`, the one rule in
:func:`~drain.runner.exchange.flush_due`), and sends both in one pipeline
(:meth:`Cycle.send`), putting what came back onto the board. Main thread only.

A claim that came back while the workers were running through their jobs fast
is held, its rows undecoded (:class:`Held`), and the next claim goes out at
once: the held rows are decoded and put on the board while the server works on
that next claim (the exchange's ``meanwhile``), instead of the server waiting
while the client decodes. A held claim never outlives the next turn: it is
taken by the next send, or at once when no claim is due (:meth:`Cycle.next_claim`),
and before the stop sequence (:meth:`Cycle.take_held`). Only a claim that needs
nothing of the connection to be taken is held: a plain claim (no cap, no rate)
that came back fast; and not one that brought a suspect, which must run alone
before any other claim goes out (see :mod:`~drain.runner.intake`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from drain.core.summary import Summary
from drain.runner.board import Board
from drain.runner.exchange import Exchange, flush_due
from drain.runner.intake import Intake
from drain.runner.outcomes import Outcome, Outcomes
from drain.runner.policy import ClaimPolicy, ClaimRequest
from drain.runner.replies import ClaimReply, Reply

log = logging.getLogger("drain")


class Held(NamedTuple):
    """A claim's reply kept undecoded until the next claim is on its way."""

    queue: str
    claimed: ClaimReply
    rows: int
    sent_at: float
    returned_at: float


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
        self._held: Held | None = None
        self._held_error: BaseException | None = None

    @property
    def holding(self) -> bool:
        """A claim's reply is held: the loop turns again at once, without waiting."""
        return self._held is not None

    def next_claim(self) -> ClaimRequest | None:
        """The claim to send now, or None (drained, blocked, or enough jobs waiting).

        The jobs of a held claim count for the claim's size but not against the
        low-water mark: that is what sends the next claim before they are decoded.
        With no claim due, a held claim is taken now.
        """
        claim = self._next_claim()
        if claim is None:
            self.take_held()
        return claim

    def _next_claim(self) -> ClaimRequest | None:
        if self.policy.drained or self.board.claims_blocked():
            return None
        load = self.board.load()
        if load.waiting > self.board.low_water:
            return None
        held = self._held.rows if self._held is not None else 0
        return self.policy.next_claim(
            self.clock(), self.deadline, waiting=load.waiting + held, busy=load.busy
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
        """Outcomes and the next claim to the database; what came back onto the board.

        A held claim is taken while the server works on this send's statements.
        """
        self._results_seen_at = None
        self.policy.learn(outcome.seconds for outcome in results)
        outcomes = Outcomes.of(results, self.intake.poisoned)
        self.intake.poisoned = []
        if claim is not None:
            load = self.board.load()
            # the held claim's jobs go on the board during this claim: renewals wait for it
            holds = load.waiting or load.busy or load.held or self._held is not None
            claim = claim._replace(time_limited=bool(holds))
        try:
            meanwhile = self.take_held_quietly if self._held is not None else None
            replies = self.exchange.send(outcomes, claim, meanwhile)
        except BaseException:
            self.take_held_quietly()  # the send failed before it could; its error is raised
            self._held_error = None
            raise
        for reply in replies:
            self.board.mark_lost(reply.tally(self.summary))
            self.board.forget([job.id for job in reply.sent.jobs()])
        self.take_held()  # raises what taking it meanwhile raised, once the replies are counted
        if claim is not None:
            self._came_back(claim, replies[-1])

    def _came_back(self, claim: ClaimRequest, last: Reply) -> None:
        if last.claim_error is not None:
            log.warning(
                "%s; claiming %d at a time", last.claim_error, self.policy.gave_up(claim.size)
            )
            return
        assert last.claimed is not None
        rows = last.claimed.unread_rows()
        held = Held(claim.queue, last.claimed, rows or 0, last.sent_at, last.returned_at)
        if (
            rows
            and not self.intake.slow(last.sent_at, last.returned_at)
            and self.policy.prefetch(self.board.load().waiting + rows)
            and not last.claimed.brought_suspect()
        ):
            self._held = held
        else:
            self._take(held)

    def take_held(self) -> None:
        """Put a held claim's jobs on the board now (nothing if none is held)."""
        self.take_held_quietly()
        error, self._held_error = self._held_error, None
        if error is not None:
            raise error

    def take_held_quietly(self) -> None:
        """The exchange's ``meanwhile`` (and the stop's): take the held claim once,
        keeping any error for :meth:`take_held` to raise once the exchange is done
        with the connection (at the stop, its jobs are left to their leases)."""
        held, self._held = self._held, None
        if held is None:
            return
        try:
            self._take(held)
        except BaseException as exc:  # raised by take_held, after the pipeline
            self._held_error = exc

    def _take(self, held: Held) -> None:
        self.intake.take(held.queue, held.claimed.read(), held.sent_at, held.returned_at)
