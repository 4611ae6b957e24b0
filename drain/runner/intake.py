"""Taking a claim's jobs onto the board, and giving back what must not start.

Three rules sit here. A claim that came back slowly has its leases renewed
before any of its jobs is handed out, so no job starts on a lease a slow claim
shortened. A suspect (a job back from a run that died), which a claim brings
only alone, is kept to run alone, with no claim going out until it is done.
Jobs a worker found stale (their lease ran too low while they waited) go back
unstarted.

The slow claim's renewal and a rated queue's unused tokens given back are the
only times taking a claim uses the connection, so a plain claim that came back
fast is taken without it: the cycle takes such a claim while the server works
on the next one, unless it brought a suspect, which must run before any other
claim.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from drain.core.config import RunConfig
from drain.core.jobs import Job
from drain.core.summary import Summary
from drain.runner.board import Board
from drain.runner.policy import ClaimPolicy
from drain.store import claims, fencing, rates
from drain.store.db import Session

log = logging.getLogger("drain")

# A claim that takes this share of a lease to come back has its leases renewed
# before its jobs are handed out.
SLOW_CLAIM_SHARE = 0.1


class Intake:
    """Moves claimed jobs onto the board for the main thread."""

    def __init__(
        self,
        session: Session,
        board: Board,
        policy: ClaimPolicy,
        summary: Summary,
        config: RunConfig,
        clock: Callable[[], float],
    ) -> None:
        self.session = session
        self.table = config.table
        self.board = board
        self.policy = policy
        self.summary = summary
        self.lease = config.lease
        self.clock = clock
        # rows too broken to run, failed with the next send
        self.poisoned: list[fencing.Failure] = []

    def take(
        self, queue_name: str, claimed: claims.Claim, sent_at: float, returned_at: float
    ) -> None:
        """Put a claim's jobs on the board (or close the queue when it came back empty)."""
        if claimed.rate_room is not None:
            self._paced(queue_name, claimed, returned_at)
            if not len(claimed) and claimed.rate_room == 0:
                return  # no token, not no job: the queue waits for its bucket
        if not len(claimed):
            if claimed.capped:
                holding = not self.board.load().idle
                self.policy.at_cap(queue_name, holding=holding)
                if not holding:
                    cap = self.policy.caps[queue_name]
                    self.summary.note("queue_capped", queue=queue_name, cap=cap)
            else:
                self.policy.came_back_empty(queue_name)
            return
        leased_at = self._fresh_leases(claimed, sent_at, returned_at)
        self.summary.failed += len(claimed.exhausted)
        self.poisoned += [
            fencing.Failure(a, reason, permanent=True) for a, reason in claimed.poisoned
        ]
        self.policy.took(len(claimed.jobs), claimed.payload_bytes, returned_at - sent_at)
        held = self._hold_suspect(claimed, leased_at) if claimed.suspects else 0
        self.summary.claimed += len(claimed) + held
        self.board.add(claimed.jobs, leased_at, self.policy.low_water(len(claimed.jobs)))

    def slow(self, sent_at: float, returned_at: float) -> bool:
        """Whether a claim took so long to come back that its leases are renewed
        before its jobs are handed out (a round trip on the connection)."""
        return returned_at - sent_at >= self.lease * SLOW_CLAIM_SHARE

    def _paced(self, queue_name: str, claimed: claims.Claim, returned_at: float) -> None:
        """A rated queue's claim: give back the tokens it took but did not lease, and
        leave the queue unclaimed until its bucket holds a claim's worth again."""
        assert claimed.rate_room is not None
        unused = claimed.rate_room - len(claimed.jobs) - len(claimed.poisoned)
        if unused > 0:
            self.session.call(lambda conn: rates.refund(conn, self.table, queue_name, unused))
        if claimed.rate_wait:
            self.policy.rate_short(queue_name, returned_at + claimed.rate_wait)

    def _fresh_leases(self, claimed: claims.Claim, sent_at: float, returned_at: float) -> float:
        """When the claim's leases began, as far as this run may assume.

        Leases count from the moment each row was leased, which is after the claim
        was sent: the send time is a safe stand-in. A claim that took a tenth of a
        lease or more to come back is renewed at once, before any of its jobs is
        handed out, so no job starts on a lease shortened by a slow claim.
        """
        if not claimed.jobs or not self.slow(sent_at, returned_at):
            return sent_at
        renewed_at = self.clock()
        kept = self.session.call(
            lambda conn: fencing.extend(conn, self.table, claimed.jobs, self.lease)
        )
        if kept.lost:
            gone = lost_of(claimed.jobs, kept)
            lost = set(kept.lost)
            claimed.jobs = [job for job in claimed.jobs if job.id not in lost]
            self.summary.claimed += len(gone)
            self.board.mark_lost(gone)
        return renewed_at

    def _hold_suspect(self, claimed: claims.Claim, leased_at: float) -> int:
        """Keep the claim's suspect on the board to run alone; it starts once
        nothing else of this run waits or works, and no claim goes out until it
        is done.

        A claim leases a suspect only alone (sql/claim.sql stops before the first
        one and takes one at the head by itself), so no batch-mate of it has
        spent an attempt that a suspect killing this run would cost. Returns how
        many jobs it kept (to count as claimed): 1, or 0 when the suspect was a
        row too broken to run.
        """
        if not claimed.jobs:
            return 0
        [suspect] = claimed.jobs
        claimed.jobs = []
        self.board.hold(suspect, leased_at)
        return 1

    def release(self, jobs: Sequence[Job]) -> fencing.Fenced:
        """Give jobs back unstarted (fenced); suspects keep the reaper's mark.

        A job the table refused to release was failed alone: it is counted here,
        among neither the released nor the lost.
        """
        marked = self.board.suspects
        released = self.session.call(
            lambda conn: fencing.release(conn, self.table, jobs, keep_marked=marked)
        )
        self.summary.failed += len(released.failed)
        return released

    def release_stale(self) -> None:
        """Give back jobs whose lease ran too low before a worker took them, and jobs
        cancelled while they waited (the same release fails those: release.sql).

        Released where still ours; another run may already have reaped them, and
        then the fenced release finds nothing and they count as lost.
        """
        waited = self.board.take_stale()
        if not waited:
            return
        cancelled = {job.id for job in waited if job.cancel_requested}
        if len(cancelled) < len(waited):
            log.warning(
                "%d job(s) waited past two thirds of their lease (was this run frozen?); "
                "giving them back unstarted",
                len(waited) - len(cancelled),
            )
        self._give_back(waited, cancelled)

    def release_given_back(self) -> None:
        """Give back jobs whose programs drain stopped without an outcome: a cancelled
        one (release.sql fails it, as cancelled) or one whose command cannot run
        (queued again, its attempt given back)."""
        returned = self.board.take_given_back()
        if returned:
            self._give_back(returned, {job.id for job in returned if job.cancel_requested})

    def _give_back(self, jobs: list[Job], cancelled: set[int]) -> None:
        released = self.release(jobs)
        self.summary.cancelled += len(released.owned & cancelled)
        self.summary.released += len(released.owned - cancelled)
        self.board.mark_lost(lost_of(jobs, released))
        self.board.forget([job.id for job in jobs])


def lost_of(sent: Sequence[Job], fenced: fencing.Fenced) -> list[Job]:
    """The jobs of ``sent`` that a fenced statement found no longer ours."""
    lost = set(fenced.lost)
    return [job for job in sent if job.id in lost]
