"""What one exchange sent and what the database said back, read once its pipeline is done.

A pipeline's statements answer only when it syncs, so :class:`Sent` holds each
statement's pending rows as :mod:`~drain.runner.exchange` sends them, and turns
them into one :class:`Reply` afterwards. The reply is then the runner's to
read: :meth:`Reply.tally` counts what was recorded into the summary, and names
the attempts lost for good (a repeated send may have found its own first send's
work, which the confirmed statuses tell apart). A claim's rows stay as they came
(:class:`ClaimReply`) until the runner decodes them, which it may do while the
server works on the next claim.
"""

from __future__ import annotations

from typing import NamedTuple

from drain.core.errors import StatementAborted
from drain.core.jobs import Owned
from drain.core.summary import Summary
from drain.runner.outcomes import Outcomes
from drain.store import claims, fencing, params, rates


class Reply(NamedTuple):
    """What the database said to one exchange.

    ``confirmed`` holds the attempts a repeated statement found gone but that the
    first send had in fact recorded (their status). ``claim_error`` is set when
    the claim was rolled back by the server (the outcomes were not).
    """

    sent: Outcomes
    completed: fencing.Fenced | None
    failed: fencing.FailOutcome | None
    snoozed: fencing.Fenced | None
    confirmed: dict[int, str]
    claimed: ClaimReply | None
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

    def tally(self, summary: Summary) -> list[Owned]:
        """Count what was recorded into ``summary``; return the attempts lost for good."""
        if self.completed is not None:
            summary.done += len(self.completed.owned)
        if self.failed is not None:
            summary.retried += len(self.failed.retried)
            summary.failed += len(self.failed.failed)
        if self.snoozed is not None:
            summary.snoozed += len(self.snoozed.owned)
        kinds = {job.id: "done" for job in self.sent.done}
        kinds |= {s.job.id: "snooze" for s in self.sent.snoozes}
        recorded = set()
        for job_id, status in self.confirmed.items():
            # A completion is ours only if the row says done: a job reaped to
            # failed and retried is queued under the same attempt number.
            counter = _COUNTERS.get((kinds.get(job_id, "fail"), status))
            if counter is not None:
                setattr(summary, counter, getattr(summary, counter) + 1)
                recorded.add(job_id)
        unconfirmed = set(self.lost()) - recorded
        return [job for job in self.sent.jobs() if job.id in unconfirmed]


# What a confirmed outcome counts as, by (what was sent, the status the row shows).
_COUNTERS = {
    ("done", "done"): "done",
    ("snooze", "queued"): "snoozed",
    ("fail", "failed"): "failed",
    ("fail", "queued"): "retried",
}


class Sent:
    """The statements one pipeline sent, whose rows are read once it is done."""

    def __init__(self) -> None:
        self.done: params.Pending[fencing.Fenced] | None = None
        self.fail: params.Pending[fencing.FailOutcome] | None = None
        self.snooze: params.Pending[fencing.Fenced] | None = None
        self.claim: params.Pending[claims.Claim] | None = None
        self.room: params.Pending[int] | None = None  # a capped queue's room before the claim
        self.taken: params.Pending[rates.Taken] | None = None  # a rated queue's tokens
        self.committed = False  # the outcomes' transaction is behind us
        self.claim_error: StatementAborted | None = None

    def reply(self, outcomes: Outcomes, sent_at: float, returned_at: float) -> Reply:
        claimed = ClaimReply(self.claim, self.room, self.taken) if self.claim else None
        return Reply(
            outcomes,
            self.done.result() if self.done else None,
            self.fail.result() if self.fail else None,
            self.snooze.result() if self.snooze else None,
            {},
            claimed,
            self.claim_error,
            sent_at,
            returned_at,
        )


class ClaimReply:
    """A claim's reply as it came back, its rows not yet turned into jobs.

    :meth:`read` decodes them (once). Until then the reply is bytes in the
    client's memory, whatever became of the connection since.
    """

    def __init__(
        self,
        claim: params.Pending[claims.Claim],
        room: params.Pending[int] | None,
        taken: params.Pending[rates.Taken] | None,
    ) -> None:
        self._claim, self._room, self._taken = claim, room, taken
        self._read: claims.Claim | None = None

    def unread_rows(self) -> int | None:
        """Rows a plain claim (no cap, no rate) brought, before decoding; None for
        any other claim."""
        if self._room is not None or self._taken is not None:
            return None
        return claims.unread_rows(self._claim)

    def brought_suspect(self) -> bool:
        """Whether the claim, still undecoded, brought a suspect."""
        return claims.brought_suspect(self._claim)

    def read(self) -> claims.Claim:
        """The claim's jobs, decoded the first time this is asked."""
        if self._read is not None:
            return self._read
        claimed = self._read = self._claim.result()
        if self._room is not None:
            claimed.capped = self._room.result() == 0
        if self._taken is not None:
            taken = self._taken.result()
            claimed.rate_room = taken.room
            claimed.rate_wait = taken.wait_seconds if taken.wait_seconds > 0 else None
        return claimed
