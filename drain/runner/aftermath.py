"""After the work: archive old done jobs, vacuum when dead rows pile up, record the run.

The run is the one moment a suspending compute is awake for the queue anyway, so
it cleans up after itself: autovacuum may never get its chance on a compute that
sleeps most of the day, and a queue table is all updates and deletes. None of
this may cost the run its outcome: a failure here becomes a note.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import psycopg

from drain.core.config import VACUUM_DEAD_FRACTION, VACUUM_MIN_DEAD_ROWS, RunConfig
from drain.core.errors import DrainError
from drain.core.redact import Redactor
from drain.core.summary import Summary
from drain.store import history, schema, upkeep
from drain.store.db import Session


class Aftermath:
    """Archive, vacuum and record for one run, within what is left of its budget."""

    def __init__(
        self,
        session: Session,
        config: RunConfig,
        summary: Summary,
        *,
        redactor: Redactor,
        budget_left: Callable[[], bool],
    ) -> None:
        self.session = session
        self.config = config
        self.table = config.table
        self.summary = summary
        self.redactor = redactor
        self.budget_left = budget_left

    def maintain(self, inspection: schema.Inspection) -> None:
        """Archive old done jobs, then vacuum when dead rows pile up."""
        oid = inspection.table_oid
        assert oid is not None
        try:
            health = self._archive(inspection, oid)
            if self.config.vacuum == "off" or not self.budget_left():
                return
            if health is None and self.config.vacuum == "auto":
                health = self.session.call(lambda conn: upkeep.table_health(conn, self.table, oid))
            if self.config.vacuum == "always" or (
                health is not None and self._needs_vacuum(health)
            ):
                self._vacuum()
        except DrainError as exc:
            self.summary.note("maintenance_skipped", error=str(exc))

    def _archive(self, inspection: schema.Inspection, oid: int) -> upkeep.TableHealth | None:
        config = self.config
        if config.archive_mode == "move" and not inspection.archive_exists:
            self.summary.note("archive_table_missing", archive_table=self.table.archive_name)
            return None
        if config.archive_mode == "off":
            return None
        mode = config.archive_mode
        try:
            archived = self.session.call(
                lambda conn: upkeep.archive(
                    conn,
                    self.table,
                    oid,
                    config.archive_after,
                    config.archive_batch,
                    mode,
                    keep_going=self.budget_left,
                )
            )
        except DrainError as exc:
            refused = _refusal(exc)
            if refused is None:
                raise
            archive_table = f"{self.table.schema}.{self.table.archive_name}"
            self.summary.note(
                "archive_refused",
                error=refused,
                table=self.table.qualified,
                archive_table=None if config.archive_mode == "delete" else archive_table,
            )
            return None
        self.summary.archived += archived.archived
        if archived.refused:
            self.summary.note(
                "archive_rows_refused",
                count=len(archived.refused),
                job_ids=list(archived.refused[:5]),
            )
        return archived.health

    def _needs_vacuum(self, health: upkeep.TableHealth) -> bool:
        # The server's counts lag: a backend publishes them at most once a second,
        # so a run shorter than that would not see its own dead rows. Every row
        # this run updated or deleted left one behind.
        s = self.summary
        dead = max(health.dead_rows, s.claimed + s.processed + s.reaped + s.released + s.archived)
        return dead >= VACUUM_MIN_DEAD_ROWS and dead >= VACUUM_DEAD_FRACTION * max(
            health.live_rows, 1
        )

    def _vacuum(self) -> None:
        skipped = self.session.call(self._vacuum_statement)
        if skipped and _NOT_OWNER.search(skipped):
            self.summary.note("vacuum_not_owner", error=skipped, table=self.table.qualified)
        elif skipped:  # SKIP_LOCKED: another session holds a conflicting lock
            self.summary.note("vacuum_skipped", error=skipped)
        else:
            self.summary.vacuumed = True

    def _vacuum_statement(self, conn: psycopg.Connection[Any]) -> str | None:
        """VACUUM the table; the server's reason when it skipped it (not the owner, say)."""
        warnings = upkeep.vacuum(conn, self.table)
        return self.redactor("; ".join(warnings)) if warnings else None

    def record(self, inspection: schema.Inspection, seconds: float, lost: int) -> None:
        """Write the run's counters to the run table, when there is one."""
        if not self.config.record or not inspection.runs_exists:
            return
        summary = self.summary
        params = {
            "jobs_table": summary.table,
            "seconds": seconds,
            "claimed": summary.claimed,
            "done": summary.done,
            "retried": summary.retried,
            "failed": summary.failed,
            "lost": lost,
            "reaped": summary.reaped,
            "released": summary.released,
            "archived": summary.archived,
            "exit_reason": summary.exit_reason,
            "exit_code": summary.exit_code,
            "error": summary.error,
        }
        try:
            self.session.call(lambda conn: history.record_run(conn, self.table, params))
        except DrainError as exc:
            summary.note("run_not_recorded", error=str(exc))


# PostgreSQL's words for a VACUUM this role may not run (15: "only table or database
# owner can vacuum it"; 16 and later: "permission denied to vacuum").
_NOT_OWNER = re.compile(r"owner can vacuum|permission denied", re.I)


def _refusal(exc: DrainError) -> str | None:
    """The server's words when ``exc`` is a statement refused for a missing privilege."""
    cause = exc.__cause__
    if not isinstance(cause, psycopg.errors.InsufficientPrivilege):
        return None
    return " ".join((cause.diag.message_primary or "permission denied").split())
