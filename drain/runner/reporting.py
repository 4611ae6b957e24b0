"""What a run tells its observers at the start and the end, and the backlog it leaves.

The ready jobs left per queue are read once, at the end, only when the summary
(``drain run --json``) or an observer (an autoscaler's metrics) wants them, and
never after a drained run: its last claims came back empty.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from drain.core.config import RunConfig
from drain.core.errors import DrainError
from drain.core.summary import Backlog, Summary
from drain.core.table import JobTable
from drain.observe.observers import Observers, RunEnd, RunStart
from drain.store import upkeep
from drain.store.db import Session

log = logging.getLogger("drain")


def start_info(config: RunConfig, queues: Sequence[str], started_wall: float) -> RunStart:
    """What the observers hear when the run starts its work."""
    return RunStart(
        config.table.qualified,
        tuple(queues),
        started_wall,
        config.max_seconds,
        config.grace_seconds,
    )


def backlog(
    session: Session,
    config: RunConfig,
    queues: Sequence[str],
    summary: Summary,
    *,
    into_summary: bool,
    observers: Observers,
) -> dict[str, Backlog]:
    """The ready jobs left per queue, when the summary or an observer wants them."""
    wanted = into_summary or observers.wants_backlog
    if not wanted or not queues or summary.exit_reason in ("error", "runners-busy"):
        return {}
    left: dict[str, Backlog] = {}
    if summary.exit_reason != "drained":
        try:
            left = session.call(lambda conn: upkeep.backlog(conn, config.table, queues))
        except DrainError as exc:
            log.warning("could not read the ready jobs left: %s", exc)
            return {}
    left = {name: left.get(name, Backlog(0, None)) for name in queues}
    if into_summary:
        summary.ready = {
            name: {"ready": entry.ready, "oldest_ready_seconds": entry.oldest_seconds}
            for name, entry in sorted(left.items())
        }
    return left


def finished(
    observers: Observers, summary: Summary, started_wall: float, left: dict[str, Backlog]
) -> None:
    """Tell the observers the run ended, with the backlog it left."""
    observers.run_finished(summary, RunEnd(started_wall, time.time(), left))


def work_left(session: Session, table: JobTable, queues: Sequence[str]) -> bool:
    """Whether any of ``queues`` still has a job ready (asked only when a run ends).

    A run that cannot ask says yes: work left is the answer that gets it run again.
    """
    if not queues:
        return False
    try:
        return session.call(lambda conn: upkeep.ready_left(conn, table, queues))
    except DrainError:
        return True


@dataclass(frozen=True)
class RunReport:
    """What one run tells its observers, from what they need of it at the start.

    ``read_backlog``: the summary wants the ready jobs left (``drain run --json``).
    """

    config: RunConfig
    queues: Sequence[str]
    started_wall: float
    observers: Observers
    read_backlog: bool

    def tell_start(self) -> None:
        """The run starts its work (after the schema check passed)."""
        self.observers.run_started(start_info(self.config, self.queues, self.started_wall))

    def tell_end(self, session: Session, summary: Summary) -> None:
        """The run ended: read the backlog left where it is wanted, then tell it."""
        left = backlog(
            session,
            self.config,
            self.queues,
            summary,
            into_summary=self.read_backlog,
            observers=self.observers,
        )
        finished(self.observers, summary, self.started_wall, left)

    def tell_error(self, summary: Summary, error: str, seconds: float) -> None:
        """The run raised: an observer hears it ended in ``error``, with no backlog."""
        if not self.observers:
            return
        summary.exit_reason = "error"
        summary.error = summary.error or error
        summary.seconds = seconds
        finished(self.observers, summary, self.started_wall, {})
