"""What one run did, as counters a scheduler, a log and ``drain status`` can read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from drain.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, EXIT_WORK_LEFT

# Why a run ended, and the exit code each reason maps to.
EXIT_REASONS = {
    "drained": EXIT_OK,
    "runners-busy": EXIT_OK,
    "no-handlers": EXIT_OK,
    "budget": EXIT_WORK_LEFT,
    # ended for another reason, but gave claimed jobs back or left some working
    "work-left": EXIT_WORK_LEFT,
    "signal": EXIT_WORK_LEFT,
    # a capped queue's places all held by other runs, jobs of it still ready: work
    # left for a later run (a run started at once would find the same full cap)
    "capped": EXIT_WORK_LEFT,
    # a rated queue's bucket held the run back until its budget ran out (or until
    # the next token came after it), jobs of it still ready: work left
    "rate": EXIT_WORK_LEFT,
    # a job's outcome was not recorded (lease ran out, another run took it)
    "lost": EXIT_FAILURE,
    "error": EXIT_FAILURE,
    # an --exec command that cannot run (exit status 126 or 127 before any success)
    "usage": EXIT_USAGE,
}


class Note(NamedTuple):
    """Something a run wants told, as data: a code and the figures the words are built from.

    The runner never writes prose: :mod:`drain.observe.words` turns a note into the
    sentence stderr and the step summary show, and ``--json`` carries the note as
    ``{"code": ..., "figures": {...}}``.
    """

    code: str
    figures: Mapping[str, Any] = {}

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "figures": dict(self.figures)}


@dataclass
class Summary:
    """The counters of one run. ``lost`` counts jobs that stopped being ours mid-run."""

    table: str = ""
    claimed: int = 0
    done: int = 0
    retried: int = 0
    failed: int = 0
    snoozed: int = 0
    # claimed, then cancelled before they started (or their --exec program stopped): failed
    cancelled: int = 0
    lost: int = 0
    reaped: int = 0
    fired: int = 0  # jobs enqueued by recurring schedules that came due
    released: int = 0
    abandoned: int = 0
    archived: int = 0
    vacuumed: bool = False
    seconds: float = 0.0
    exit_reason: str = "drained"
    error: str | None = None
    notes: list[Note] = field(default_factory=list)
    # ready jobs left per queue at the end ({queue: {"ready": n, "oldest_ready_seconds": s}}),
    # read only when asked (drain run --json, or an observer), for autoscalers
    ready: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_REASONS[self.exit_reason]

    @property
    def processed(self) -> int:
        """Attempts that ran to an outcome (done, retried, failed or snoozed)."""
        return self.done + self.retried + self.failed + self.snoozed

    @property
    def jobs_per_second(self) -> float:
        return self.processed / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        data["jobs_per_second"] = round(self.jobs_per_second, 1)
        data["seconds"] = round(self.seconds, 3)
        data["notes"] = [note.as_dict() for note in self.notes]
        return data

    def note(self, code: str, **figures: Any) -> None:
        """Add a note: ``code`` names it, ``figures`` are what its sentence is built from."""
        self.notes.append(Note(code, figures))


class Backlog(NamedTuple):
    """A queue's ready jobs at the end of a run, read while the database is awake anyway."""

    ready: int
    oldest_seconds: float | None  # age of the oldest ready job by its run_at
