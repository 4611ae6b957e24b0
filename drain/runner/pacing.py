"""The order and the speed of a run's claims: by priority, and by each queue's rate.

Both are settled before the first claim: a table with the ``priority`` column
is claimed highest first (sql/claim_priority.sql), and a run given
``--queue-rate`` makes sure the buckets' table is there (``drain_rates``). While
the run works, a rated queue whose bucket is short pauses its claims; the main
loop sleeps until the first bucket refills rather than asking the database (the
policy keeps the pauses, :mod:`~drain.runner.policy`). When the loop stops, the
queues the rate held back are read at once, before the stop sequence's grace
lets the pauses run out, so the run can tell whether the rate, not the queue,
ended it (exit reason ``rate``, decided in :meth:`drain.runner.runner.Runner._exit_reason`).
"""

from __future__ import annotations

from collections.abc import Callable

from drain.core.config import RunConfig
from drain.core.summary import Summary
from drain.runner.exchange import Exchange
from drain.runner.policy import ClaimPolicy
from drain.runner.reporting import work_left
from drain.store import rates, schema
from drain.store.db import Session

# The longest the main loop waits for a worker before it looks again.
LOOP_WAIT = 0.5


class Pacing:
    """One run's claim order and rates; the main thread alone uses it."""

    def __init__(
        self,
        session: Session,
        config: RunConfig,
        policy: ClaimPolicy,
        clock: Callable[[], float],
        deadline: float,
    ) -> None:
        self.session, self.config, self.policy = session, config, policy
        self.clock, self.deadline = clock, deadline
        # The rated queues their bucket held back when the loop stopped.
        self.held: list[str] = []

    def prepare(self, exchange: Exchange, inspection: schema.Inspection) -> None:
        """Claim by priority where the table has the column; make the buckets'
        table where a queue is rated."""
        exchange.by_priority = inspection.has_priority
        if self.config.queue_rates:
            self.session.call(lambda conn: rates.ensure_table(conn, self.config.table))

    def sleep(self) -> float:
        """How long the loop may wait for a worker: at most half a second, never past
        the deadline, nor past the moment a rated queue's bucket refills."""
        now = self.clock()
        longest = min(LOOP_WAIT, self.deadline - now)
        refill = self.policy.rate_wake(now)
        return max(0.0, longest if refill is None else min(longest, refill))

    def loop_stopped(self) -> None:
        """Read which rated queues the rate holds back, as the loop stops."""
        self.held = self.policy.held_by_rate()

    def ended_the_run(self, summary: Summary) -> bool:
        """Whether a queue's rate, not the queue, ended the run: a rated queue that its
        bucket held back when the run stopped still has ready jobs (noted as ``paced``)."""
        held = self.held
        if not held or not work_left(self.session, self.config.table, held):
            return False
        given = dict(self.config.queue_rates)
        summary.note("paced", rates=",".join(f"{name}={given[name].text}" for name in held))
        return True
