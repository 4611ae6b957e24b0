"""The settings of one run, with their defaults and their limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from drain.db import ConnectOptions
from drain.errors import UsageError
from drain.queue import (
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_CAP,
    DEFAULT_LEASE,
    DEFAULT_MAX_PAYLOAD,
    ArchiveMode,
)
from drain.table import JobTable

VacuumMode = Literal["auto", "always", "off"]

# Jobs per claim, at most: claims start at 100 and grow toward this only while
# jobs finish fast (see Runner._claim_size).
DEFAULT_BATCH_SIZE = 1000
DEFAULT_MAX_SECONDS = 300.0
DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_ARCHIVE_AFTER = 7 * 86400.0
DEFAULT_ARCHIVE_BATCH = 10_000
# auto vacuum: when dead rows pass both of these (autovacuum's own default is
# 50 rows + 20 % of the table; a queue table deserves a tighter leash).
VACUUM_MIN_DEAD_ROWS = 1000
VACUUM_DEAD_FRACTION = 0.1


@dataclass(frozen=True)
class RunConfig:
    """Everything ``drain run`` and ``drain.run()`` take, already parsed."""

    connect: ConnectOptions
    table: JobTable = field(default_factory=JobTable)
    queues: tuple[str, ...] = ()
    batch_size: int = DEFAULT_BATCH_SIZE
    concurrency: int = 1
    lease: float = DEFAULT_LEASE
    max_seconds: float = DEFAULT_MAX_SECONDS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    max_runners: int = 0
    archive_after: float = DEFAULT_ARCHIVE_AFTER
    archive_mode: ArchiveMode | Literal["off"] = "move"
    archive_batch: int = DEFAULT_ARCHIVE_BATCH
    vacuum: VacuumMode = "auto"
    backoff_base: float = DEFAULT_BACKOFF_BASE
    backoff_cap: float = DEFAULT_BACKOFF_CAP
    max_payload: int = DEFAULT_MAX_PAYLOAD
    record: bool = True
    progress: bool = False
    # Credential variables an --exec program keeps (drain.programs strips them).
    exec_keep_env: tuple[str, ...] = ()

    def validate(self) -> None:
        """Reject settings that cannot work, before anything connects."""
        checks = [
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.concurrency >= 1, "--concurrency must be at least 1"),
            (self.lease >= 1, "--lease must be at least 1 second"),
            (self.max_seconds > 0, "--max-seconds must be above 0"),
            (self.grace_seconds >= 0, "--grace-seconds cannot be negative"),
            (self.max_runners >= 0, "--max-runners cannot be negative"),
            (self.archive_batch >= 1, "--archive-batch must be at least 1"),
            (self.archive_after >= 0, "--archive-after cannot be negative"),
            (self.backoff_base > 0 and self.backoff_cap > 0, "backoff must be above 0"),
            (
                not (self.connect.pooler and self.max_runners),
                "--max-runners needs session advisory locks, which a transaction-mode "
                "pooler cannot keep; connect directly to use it",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
