"""Outcomes and the next claim, sent together on the run's one connection.

A batch's outcomes (completions, failures, snoozes) and the next claim travel in
one pipeline, in two transactions: the outcomes commit on their own, at a sync
point, before the claim starts. A claim that fails (a statement timeout, a lock
timeout) then rolls back only itself; the outcomes it rode with stay recorded.
The sync point costs one round trip more than a single transaction would, and
only when there are both outcomes and a claim to send. With a ``meanwhile``
(below), each transaction is an explicit one
(:func:`~drain.store.params.explicit_transaction`), so its row locks go when
the server reaches its ``COMMIT``, not when the client gets round to the sync
point: nothing waits on a client that was frozen while decoding.

While the run holds leases, the claim runs under a time limit of its own (see
``sql/claim_time_limit.sql``) so it can never hold the connection, which the
lease keeper shares, for longer than a fraction of a lease. A run holding no
lease (its first claim, say) has no renewal to hold up and sends no limit: a
slow claim is then renewed before its jobs start (see :mod:`drain.runner.intake`). A claim that hits a limit is reported back, not
raised: the runner claims less next time. Outcomes that hit one are split in
halves and sent again, so a role with a tight ``statement_timeout`` still gets
every outcome recorded.

Outcomes the table refuses because of one row's values (a value past its type's
limit, a CHECK of the table's own: SQLSTATE class 22 or 23) are halved the same
way until the refused one is alone; that job is failed alone, with a
``last_error`` saying why, and its batch-mates' outcomes are recorded. No row
may make a statement fail for its batch-mates (SPEC section 7).

While the server works on a pipeline's statements the client has nothing to
send: ``meanwhile`` (given by :mod:`~drain.runner.cycle`) is run then, once the
first statements are on their way and before the reply is waited for, so the
previous claim's rows are decoded while the server runs this one's statements.

What one pipeline sent, and the reply read from it once it is done, are
:mod:`~drain.runner.replies`'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg

from drain.core.config import RunConfig
from drain.core.errors import StatementAborted
from drain.core.settings import DEFAULT_MAX_CLAIM_BYTES
from drain.core.table import JobTable
from drain.runner.outcomes import Outcomes
from drain.runner.policy import ClaimRequest
from drain.runner.replies import Reply, Sent
from drain.store import claims, fencing, params, rates
from drain.store.db import Session, is_connection_failure, is_statement_aborted, translate

log = logging.getLogger("drain")

# The claim may hold the shared connection for at most this share of a lease:
# the lease keeper renews at a third of a lease, and must not wait long.
CLAIM_TIME_LIMIT_SHARE = 1 / 6
# Finished outcomes wait at most this long for a claim to ride with.
FLUSH_AFTER = 0.5

# Work for the client while the server runs a pipeline's statements (or None).
Meanwhile = Callable[[], None] | None


def flush_due(results: int, batch_size: int, *, idle: bool, waited: float) -> bool:
    """Whether finished outcomes should go out now rather than ride with the next claim.

    The one rule, asked by the main thread and by the workers deciding whether
    to wake it. Outcomes normally travel with the next claim, in one round trip.
    They go on their own when a batch's worth has piled up, when nothing else is
    left to wait for, or when the oldest has waited ``FLUSH_AFTER`` seconds (slow
    jobs at high concurrency would otherwise hold finished jobs back).
    """
    return results > 0 and (results >= batch_size or idle or waited >= FLUSH_AFTER)


class ClaimSettings(NamedTuple):
    lease: float
    max_payload: int
    max_bytes: int
    backoff_base: float
    backoff_cap: float

    @classmethod
    def of(cls, config: RunConfig) -> ClaimSettings:
        return cls(
            config.lease,
            config.max_payload,
            DEFAULT_MAX_CLAIM_BYTES,
            config.backoff_base,
            config.backoff_cap,
        )


class Exchange:
    """Sends outcomes and claims for one run over its :class:`~drain.store.db.Session`."""

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
        # Set once the schema check has read the table: claim by priority where
        # the table has the column (sql/claim_priority.sql).
        self.by_priority = False

    def send(
        self, outcomes: Outcomes, claim: ClaimRequest | None, meanwhile: Meanwhile = None
    ) -> list[Reply]:
        """Record ``outcomes`` and make ``claim``; one reply per round of statements.

        ``meanwhile`` runs while the server works (see the module's docstring). A
        send repeated after a reconnect, or in halves, may call it again: it must
        do its work once, and must neither raise nor use the connection.

        Outcomes the server refused to finish in time go again in halves; a
        single outcome that still cannot be written raises
        :class:`~drain.core.errors.StatementAborted`. Outcomes the table refused for
        one row's values go again in halves too, and the one refused alone is
        failed alone instead (see :meth:`_fail_alone`).
        """
        try:
            return [self._send_once(outcomes, claim, meanwhile)]
        except _OutcomesAborted as aborted:
            if len(outcomes) <= 1:
                raise aborted.error from None
        except _OutcomesRefused as refused:
            if len(outcomes) <= 1:
                return self._fail_alone(outcomes, refused.cause, claim)
        first, second = outcomes.halves()
        return self.send(first, None, meanwhile) + self.send(second, claim)

    def _fail_alone(
        self, outcomes: Outcomes, cause: psycopg.Error, claim: ClaimRequest | None
    ) -> list[Reply]:
        """The one outcome the table refused, recorded as a failure for good instead.

        Its ``last_error`` says what was refused and why; when the table refuses
        that too (a ``last_error`` narrower than the reason), the failure goes
        with an empty one. A job the table will not even fail is left to its
        lease and counts as lost.
        """
        (job,) = outcomes.jobs()
        what = _KIND_WORDS[_kind_of(outcomes)]
        reason = fencing.refusal_reason(what, cause)
        log.warning("job %d: %s", job.id, reason)
        for error in (reason, ""):
            failure = Outcomes(failures=[fencing.Failure(job, error, permanent=True)])
            try:
                return [self._send_once(failure, claim)]
            except _OutcomesAborted as aborted:
                raise aborted.error from None
            except _OutcomesRefused:
                continue
        replies = self.send(Outcomes(), claim) if claim is not None else []
        gone = fencing.FailOutcome((), (), (job.id,))
        left = Reply(outcomes, None, gone, None, {}, None, None, self.clock(), self.clock())
        return [left, *replies]

    def _send_once(
        self, outcomes: Outcomes, claim: ClaimRequest | None, meanwhile: Meanwhile = None
    ) -> Reply:
        sends = 0
        sent_at = self.clock()

        def pipeline(conn: psycopg.Connection[Any]) -> Reply:
            nonlocal sends
            sends += 1
            return self._pipeline(
                conn, outcomes, claim, sent_at, meanwhile=meanwhile, repeated=sends > 1
            )

        return self.session.call(pipeline)

    def _pipeline(
        self,
        conn: psycopg.Connection[Any],
        outcomes: Outcomes,
        claim: ClaimRequest | None,
        sent_at: float,
        *,
        meanwhile: Meanwhile,
        repeated: bool,
    ) -> Reply:
        sent = Sent()
        try:
            with conn.pipeline() as pipeline:
                self._send_all(conn, pipeline, outcomes, claim, sent, meanwhile)
        except psycopg.Error as exc:
            if is_connection_failure(exc, conn):
                raise
            params.end_aborted_transaction(conn)
            if not sent.committed and fencing.is_row_refusal(exc):
                raise _OutcomesRefused(exc) from None
            if not is_statement_aborted(exc):
                raise
            error = translate(exc, self.session.redactor)
            assert isinstance(error, StatementAborted)
            if not sent.committed:
                raise _OutcomesAborted(error) from None
            sent.claim_error, sent.claim = error, None
        reply = sent.reply(outcomes, sent_at, self.clock())
        lost = reply.lost()
        if repeated and lost:
            # Repeated after a reconnect: the first send may have committed before
            # its reply was lost, so a fenced statement finding nothing is not
            # proof of loss.
            by_id = {job.id: job for job in outcomes.jobs()}
            confirmed = fencing.confirm_outcomes(conn, self.table, [by_id[i] for i in lost])
            reply = reply._replace(confirmed=confirmed)
        return reply

    def _send_all(
        self,
        conn: psycopg.Connection[Any],
        pipeline: psycopg.Pipeline,
        outcomes: Outcomes,
        claim: ClaimRequest | None,
        sent: Sent,
        meanwhile: Meanwhile,
    ) -> None:
        """The outcomes' transaction, its sync point, then the claim's, into one pipeline."""
        if outcomes:
            with params.explicit_transaction(conn, wanted=meanwhile is not None):
                self._send_outcomes(conn, outcomes, sent)
        if claim is not None:
            if outcomes:
                if meanwhile is not None:
                    meanwhile()  # while the server records the outcomes
                pipeline.sync()  # the outcomes commit here, whatever the claim does
            sent.committed = True
            with params.explicit_transaction(conn, wanted=meanwhile is not None):
                self._send_claim(conn, claim, sent)
        if meanwhile is not None:
            meanwhile()  # while the server claims (a no-op if it already ran)

    def _send_outcomes(self, conn: psycopg.Connection[Any], outcomes: Outcomes, sent: Sent) -> None:
        table, settings = self.table, self.settings
        if outcomes.done:
            sent.done = fencing.send_complete(conn, table, outcomes.done)
        if outcomes.failures:
            base, cap = settings.backoff_base, settings.backoff_cap
            sent.fail = fencing.send_fail(conn, table, outcomes.failures, base, cap)
        if outcomes.snoozes:
            sent.snooze = fencing.send_snooze(conn, table, outcomes.snoozes)

    def _send_claim(self, conn: psycopg.Connection[Any], claim: ClaimRequest, sent: Sent) -> None:
        settings = self.settings
        if claim.time_limited:
            claims.send_claim_time_limit(conn, self.table, settings.lease * CLAIM_TIME_LIMIT_SHARE)
        if claim.cap is not None:
            sent.room = claims.send_cap_room(conn, self.table, claim.queue, claim.cap)
        if claim.rate is not None:
            # after the cap's room: the take leaves the least of the two for the claim
            sent.taken = rates.send_take(conn, self.table, claim.queue, claim.rate, claim.size)
        sent.claim = claims.send_claim(
            conn,
            self.table,
            claim.queue,
            claim.size,
            settings.lease,
            settings.max_payload,
            settings.max_bytes,
            by_priority=self.by_priority,
        )


class _OutcomesRefused(Exception):
    """The outcomes' own transaction was refused for a row's values (class 22 or 23)."""

    def __init__(self, cause: psycopg.Error) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _kind_of(outcomes: Outcomes) -> str:
    """What one outcome is: ``done``, ``fail`` or ``snooze``."""
    if outcomes.done:
        return "done"
    return "fail" if outcomes.failures else "snooze"


_KIND_WORDS = {"done": "completion", "fail": "failure", "snooze": "snooze"}


class _OutcomesAborted(Exception):
    """The outcomes' own transaction was rolled back by the server (not the connection)."""

    def __init__(self, error: StatementAborted) -> None:
        super().__init__(str(error))
        self.error = error
