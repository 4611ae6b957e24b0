"""Finished attempts, as the runner holds them and as the statements take them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, NamedTuple

from drain.core.jobs import Job, Owned
from drain.store import fencing

OutcomeKind = Literal["done", "retry", "fail", "snooze", "cancelled", "given-back"]
# Attempts that end with no outcome of their own: the job goes back as if never
# started (release.sql), which fails a cancelled one. "cancelled": an --exec
# program stopped for drain cancel; "given-back": one whose command cannot run.
GIVEN_BACK = frozenset({"cancelled", "given-back"})


class Outcome(NamedTuple):
    """What one attempt came to, waiting to be written back."""

    job: Job
    kind: OutcomeKind
    seconds: float
    error: str | None = None
    at: datetime | None = None
    delay: float | None = None


class Outcomes(NamedTuple):
    """Finished attempts waiting to be written back, by statement."""

    done: Sequence[Owned] = ()
    failures: Sequence[fencing.Failure] = ()
    snoozes: Sequence[fencing.Snooze] = ()

    def __len__(self) -> int:
        return len(self.done) + len(self.failures) + len(self.snoozes)

    @classmethod
    def of(cls, results: Sequence[Outcome], poisoned: Sequence[fencing.Failure]) -> Outcomes:
        """The statements' view of finished attempts, plus rows too broken to run."""
        failures = [
            fencing.Failure(o.job, o.error or "", permanent=o.kind == "fail")
            for o in results
            if o.kind in ("retry", "fail")
        ]
        return cls(
            done=[o.job for o in results if o.kind == "done"],
            failures=failures + list(poisoned),
            snoozes=[
                fencing.Snooze(o.job, at=o.at, delay=o.delay) for o in results if o.kind == "snooze"
            ],
        )

    def jobs(self) -> list[Owned]:
        """Every attempt these outcomes are for."""
        return [
            *self.done,
            *(failure.job for failure in self.failures),
            *(snooze.job for snooze in self.snoozes),
        ]

    def halves(self) -> tuple[Outcomes, Outcomes]:
        """The outcomes in two, the first half the larger: both non-empty from two on.

        Cut across the three lists in their order, not each list in two: one
        completion and one snooze cut list by list left both in the first half,
        and halving never got a refused outcome alone.
        """
        middle = (len(self) + 1) // 2
        done = self.done[:middle]
        failures = self.failures[: middle - len(done)]
        snoozes = self.snoozes[: middle - len(done) - len(failures)]
        return (
            Outcomes(done, failures, snoozes),
            Outcomes(
                self.done[len(done) :],
                self.failures[len(failures) :],
                self.snoozes[len(snoozes) :],
            ),
        )
