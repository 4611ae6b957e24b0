"""Throughput: one process drains 20,000 ready no-op jobs, start to exit.

Targets: ``drain run`` with its defaults at least 0.8x the direct-protocol loop
with claim 100, 2x pgqueuer's drain mode and 1.5x graphile-worker with its
batching on (the peers' checks appear when they are installed); on a table with
the priority column (claimed by priority through its index, the same jobs) at
least 0.95x the plain table. A row with the jobs spread over priorities 0 to 2
shows what scattering each claim over the heap costs (no target). Every row is
also reported as a fraction of the server floor (:class:`bench.systems.Floor`,
the lease protocol run inside the server, timed around its one ``CALL``).
"""

from __future__ import annotations

from bench.measure import ProcessRun
from bench.peers import find_peers
from bench.scenarios import (
    Check,
    Context,
    Outcome,
    Row,
    alternate,
    over_floor,
    rate_ratio,
    setup_all,
)
from bench.systems import DrainCLI, Floor, PriorityDrainCLI, ProtocolLoop, System

NAME = "throughput"
TITLE = "Throughput: {jobs:,} no-op jobs, one process, start to exit"

TARGETS = (
    ("protocol-100", 0.8, "drain / protocol loop, claim 100"),
    ("pgqueuer", 2.0, "drain / pgqueuer drain mode"),
    ("graphile-batched", 1.5, "drain / graphile-worker with batching"),
)
PRIORITY_TARGET = ("drain-priority", "drain", 0.95, "drain on a priority table / drain plain")


def measure(system: System, count: int, row: Row) -> ProcessRun:
    """Record the wall time, plus the seconds the system itself reports for its work."""
    system.fill(count)
    result = system.run(count)
    row.seconds.add(result.seconds)
    if isinstance(system, DrainCLI):
        row.add("own_seconds", float(DrainCLI.summary(result)["seconds"]))
    elif isinstance(system, ProtocolLoop):
        row.add("own_seconds", float(ProtocolLoop.report(result)["seconds"]))
    return result


def run(ctx: Context) -> Outcome:
    count = ctx.size(20_000, 500)
    server = ctx.server
    systems: list[System] = [
        DrainCLI(server),
        ProtocolLoop(server, 100),
        ProtocolLoop(server, 100, prepare=False),
        ProtocolLoop(server, 10),
        ProtocolLoop(server, 1),
        PriorityDrainCLI(server),
        PriorityDrainCLI(server, mixed=True),
        Floor(server),
    ]
    if ctx.peers:
        systems += find_peers(server, ctx.graphile)
    setup_all(systems)
    outcome = Outcome(NAME, TITLE.format(jobs=count))
    plan = []
    for system in systems:
        row = Row(system.label, system.key, system.jobs_for(count))
        outcome.rows.append(row)
        plan.append((system, row))
    alternate(ctx, plan, measure)
    for other, bound, target in TARGETS:
        if outcome.row(other) is not None:
            outcome.checks.append(Check(target, rate_ratio(outcome, "drain", other), bound))
    mine, plain, bound, target = PRIORITY_TARGET
    outcome.checks.append(Check(target, rate_ratio(outcome, mine, plain), bound))
    outcome.facts["over_the_floor"] = over_floor(outcome)
    capped = [row.label for row in outcome.rows if row.jobs < count]
    if capped:
        outcome.notes.append(
            "fewer jobs per run for the slowest systems, to keep the suite in minutes: "
            + ", ".join(capped)
        )
    return outcome
