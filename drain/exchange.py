"""Outcomes and the next claim, sent together on the run's one connection.

A batch's outcomes (completions, failures, snoozes) and the next claim travel in
one pipeline, in two transactions: the outcomes commit on their own, at a sync
point, before the claim starts. A claim that fails (a statement timeout, a lock
timeout) then rolls back only itself; the outcomes it rode with stay recorded.
The sync point costs one round trip more than a single transaction would, and
only when there are both outcomes and a claim to send.

The claim runs under a time limit of its own (see ``sql/claim_time_limit.sql``)
so it can never hold the connection, which the lease keeper shares, for longer
than a fraction of a lease. A claim that hits a limit is reported back, not
raised: the runner claims less next time. Outcomes that hit one are split in
halves and sent again, so a role with a tight ``statement_timeout`` still gets
every outcome recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import psycopg

from drain import queue
from drain.db import Session, is_connection_failure, is_statement_aborted, translate
from drain.errors import StatementAborted
from drain.jobs import Owned
from drain.table import JobTable

# The claim may hold the shared connection for at most this share of a lease:
# the lease keeper renews at a third of a lease, and must not wait long.
CLAIM_TIME_LIMIT_SHARE = 1 / 6


class Outcomes(NamedTuple):
    """Finished attempts waiting to be written back, by statement."""

    done: Sequence[Owned] = ()
    failures: Sequence[queue.Failure] = ()
    snoozes: Sequence[queue.Snooze] = ()

    def __len__(self) -> int:
        return len(self.done) + len(self.failures) + len(self.snoozes)

    def jobs(self) -> list[Owned]:
        """Every attempt these outcomes are for."""
        return [
            *self.done,
            *(failure.job for failure in self.failures),
            *(snooze.job for snooze in self.snoozes),
        ]

    def halves(self) -> tuple[Outcomes, Outcomes]:
        def cut(items: Sequence[Any]) -> tuple[Sequence[Any], Sequence[Any]]:
            middle = (len(items) + 1) // 2
            return items[:middle], items[middle:]

        done, failures, snoozes = cut(self.done), cut(self.failures), cut(self.snoozes)
        return (
            Outcomes(done[0], failures[0], snoozes[0]),
            Outcomes(done[1], failures[1], snoozes[1]),
        )


class ClaimRequest(NamedTuple):
    queue: str
    size: int


class ClaimSettings(NamedTuple):
    lease: float
    max_payload: int
    max_bytes: int
    backoff_base: float
    backoff_cap: float


class Reply(NamedTuple):
    """What the database said to one exchange.

    ``confirmed`` holds the attempts a repeated statement found gone but that the
    first send had in fact recorded (their status). ``claim_error`` is set when
    the claim was rolled back by the server (the outcomes were not).
    """

    sent: Outcomes
    completed: queue.Fenced | None
    failed: queue.FailOutcome | None
    snoozed: queue.Fenced | None
    confirmed: dict[int, str]
    claimed: queue.Claim | None
    claim_error: StatementAborted | None
    sent_at: float
    returned_at: float

    def lost(self) -> list[int]:
        """Attempts that were no longer ours, confirmed or not."""
        return [
            *(self.completed.lost if self.completed else ()),
            *(self.failed.lost if self.failed else ()),
            *(self.snoozed.lost if self.snoozed else ()),
        ]


class Exchange:
    """Sends outcomes and claims for one run over its :class:`~drain.db.Session`."""

    def __init__(
        self,
        session: Session,
        table: JobTable,
        settings: ClaimSettings,
        clock: Callable[[], float],
    ) -> None:
        self.session = session
        self.table = table
        self.settings = settings
        self.clock = clock

    def send(self, outcomes: Outcomes, claim: ClaimRequest | None) -> list[Reply]:
        """Record ``outcomes`` and make ``claim``; one reply per round of statements.

        Outcomes the server refused to finish in time go again in halves; a
        single outcome that still cannot be written raises
        :class:`~drain.errors.StatementAborted`.
        """
        try:
            return [self._send_once(outcomes, claim)]
        except _OutcomesAborted as aborted:
            if len(outcomes) <= 1:
                raise aborted.error from None
            first, second = outcomes.halves()
            return self.send(first, None) + self.send(second, claim)

    def _send_once(self, outcomes: Outcomes, claim: ClaimRequest | None) -> Reply:
        sends = 0
        sent_at = self.clock()

        def pipeline(conn: psycopg.Connection[Any]) -> Reply:
            nonlocal sends
            sends += 1
            return self._pipeline(conn, outcomes, claim, sent_at, repeated=sends > 1)

        return self.session.call(pipeline)

    def _pipeline(
        self,
        conn: psycopg.Connection[Any],
        outcomes: Outcomes,
        claim: ClaimRequest | None,
        sent_at: float,
        *,
        repeated: bool,
    ) -> Reply:
        table, settings = self.table, self.settings
        committed = False
        claim_error: StatementAborted | None = None
        p_claim: queue.Pending[queue.Claim] | None = None
        try:
            with conn.pipeline() as pipeline:
                p_done = queue.send_complete(conn, table, outcomes.done) if outcomes.done else None
                p_fail = (
                    queue.send_fail(
                        conn, table, outcomes.failures, settings.backoff_base, settings.backoff_cap
                    )
                    if outcomes.failures
                    else None
                )
                p_snooze = (
                    queue.send_snooze(conn, table, outcomes.snoozes) if outcomes.snoozes else None
                )
                if claim is not None:
                    if outcomes:
                        pipeline.sync()  # the outcomes commit here, whatever the claim does
                    committed = True
                    queue.send_claim_time_limit(
                        conn, table, settings.lease * CLAIM_TIME_LIMIT_SHARE
                    )
                    p_claim = queue.send_claim(
                        conn,
                        table,
                        claim.queue,
                        claim.size,
                        settings.lease,
                        settings.max_payload,
                        settings.max_bytes,
                    )
        except psycopg.Error as exc:
            if is_connection_failure(exc, conn) or not is_statement_aborted(exc):
                raise
            error = translate(exc, self.session.redactor)
            assert isinstance(error, StatementAborted)
            if not committed:
                raise _OutcomesAborted(error) from None
            claim_error, p_claim = error, None
        completed = p_done.result() if p_done else None
        failed = p_fail.result() if p_fail else None
        snoozed = p_snooze.result() if p_snooze else None
        claimed = p_claim.result() if p_claim else None
        reply = Reply(
            outcomes, completed, failed, snoozed, {}, claimed, claim_error, sent_at, self.clock()
        )
        lost = reply.lost()
        if repeated and lost:
            # Repeated after a reconnect: the first send may have committed before
            # its reply was lost, so a fenced statement finding nothing is not
            # proof of loss.
            by_id = {job.id: job for job in outcomes.jobs()}
            confirmed = queue.confirm_outcomes(conn, table, [by_id[i] for i in lost])
            reply = reply._replace(confirmed=confirmed)
        return reply


class _OutcomesAborted(Exception):
    """The outcomes' own transaction was rolled back by the server (not the connection)."""

    def __init__(self, error: StatementAborted) -> None:
        super().__init__(str(error))
        self.error = error
