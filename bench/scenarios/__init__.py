"""What every scenario shares: the context it runs in, its rows, its checks, alternation.

A scenario measures a few systems under one condition and returns an
:class:`Outcome`: rows of figures (medians, minimum, maximum over the runs) and
checks of the issue's targets, each a ratio or a bound computed from figures of
this same invocation. Systems alternate run by run (A, B, C, A, B, C, ...), so
a slow minute on a shared machine hits every system alike instead of one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.measure import ProcessRun, Series
from bench.server import BenchServer
from bench.systems import System


@dataclass(frozen=True)
class Context:
    """How the suite was asked to run."""

    server: BenchServer
    runs: int
    quick: bool
    peers: bool
    graphile: str | None
    log: Callable[[str], None]

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full


@dataclass
class Row:
    """One system under one condition, over every run."""

    label: str
    key: str
    jobs: int
    seconds: Series = field(default_factory=Series)
    extra: dict[str, Series] = field(default_factory=dict)

    @property
    def rate(self) -> Series:
        """Jobs per second of each run, start to exit."""
        return Series([self.jobs / s for s in self.seconds.values if s > 0])

    def add(self, name: str, value: float) -> None:
        self.extra.setdefault(name, Series()).add(value)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "label": self.label,
            "key": self.key,
            "jobs": self.jobs,
            "seconds": self.seconds.as_dict(),
        }
        if self.jobs:
            data["jobs_per_second"] = self.rate.as_dict(digits=1)
        data.update({name: series.as_dict() for name, series in self.extra.items()})
        return data


@dataclass(frozen=True)
class Check:
    """A target of the issue, and whether this invocation met it."""

    target: str
    value: float
    bound: float
    at_least: bool = True
    unit: str = "x"

    @property
    def met(self) -> bool:
        return self.value >= self.bound if self.at_least else self.value <= self.bound

    def line(self) -> str:
        sign = ">=" if self.at_least else "<="
        verdict = "met" if self.met else "NOT met"
        return (
            f"{verdict:>7}  {self.target}: {self.value:,.2f}{self.unit} "
            f"(target {sign} {self.bound:,.2f}{self.unit})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "value": round(self.value, 3),
            "bound": self.bound,
            "at_least": self.at_least,
            "unit": self.unit,
            "met": self.met,
        }


@dataclass
class Outcome:
    """A scenario's rows, checks and notes, ready to print and to store."""

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def row(self, key: str) -> Row | None:
        return next((row for row in self.rows if row.key == key), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "rows": [row.as_dict() for row in self.rows],
            "checks": [check.as_dict() for check in self.checks],
            "notes": self.notes,
            "facts": self.facts,
        }


Measure = Callable[[System, int, Row], ProcessRun]


def run_once(system: System, count: int, row: Row) -> ProcessRun:
    """Fill, run, and record the wall time: the plain measurement most scenarios use."""
    system.fill(count)
    result = system.run(count)
    row.seconds.add(result.seconds)
    return result


def alternate(
    ctx: Context,
    plan: Sequence[tuple[System, Row]],
    measure: Measure = run_once,
    *,
    runs: int | None = None,
) -> None:
    """Run every (system, row) of ``plan`` once per round, for ``runs`` rounds, in turn."""
    rounds = runs or ctx.runs
    for number in range(1, rounds + 1):
        for system, row in plan:
            result = measure(system, row.jobs, row)
            rate = f"{row.jobs / result.seconds:,.0f} jobs/s, " if row.jobs else ""
            ctx.log(f"  run {number}/{rounds} {row.label}: {rate}{result.seconds:.3f} s")


def setup_all(systems: Iterable[System]) -> None:
    for system in systems:
        system.setup()


def rate_ratio(outcome: Outcome, key: str, other: str) -> float:
    """median jobs/s of row ``key`` over that of row ``other``."""
    mine, theirs = outcome.row(key), outcome.row(other)
    if mine is None or theirs is None or not theirs.rate.median:
        return 0.0
    return mine.rate.median / theirs.rate.median


def over_floor(outcome: Outcome, floor: str = "floor") -> dict[str, float]:
    """Every other row's median jobs/s as a fraction of the server floor's."""
    return {
        row.key: round(rate_ratio(outcome, row.key, floor), 3)
        for row in outcome.rows
        if row.key != floor
    }
