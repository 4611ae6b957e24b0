"""Server floor: drain, the protocol loop and the peers against the server's own floor.

The floor (:class:`bench.systems.Floor`, ``bench/sql/floor.sql``) is the lease
protocol run by the server alone: claim 1,000, complete fenced by attempt,
commit, until empty, timed around its one ``CALL``. It is the limit a drainer
on one connection can approach by overlapping its own work with the server's,
so every other row is reported as a fraction of it. drain appears twice: on a
table refilled and analyzed before each run (fresh statistics, the throughput
scenario's method), and in the steady state, a burst enqueued on the table its
previous run left, under the statistics that run's end took. Target: drain in
the steady state at least 0.7x the floor, 100,000 jobs. The throughput scenario
puts the floor beside its rows at 20,000 jobs.
"""

from __future__ import annotations

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
from bench.scenarios.throughput import measure
from bench.systems import DrainCLI, Floor, ProtocolLoop, SteadyDrain, System

NAME = "floor"
TITLE = "Server floor: {jobs:,} no-op jobs against the lease protocol run inside the server"
TARGET = 0.7


def run(ctx: Context) -> Outcome:
    count = ctx.size(100_000, 1_000)
    server = ctx.server
    systems: list[System] = [
        Floor(server),
        DrainCLI(server),
        SteadyDrain(server),
        ProtocolLoop(server, 100),
        ProtocolLoop(server, 1000, prepare=False),
    ]
    if ctx.peers:
        systems += find_peers(server, ctx.graphile, fast_only=True)
    setup_all(systems)
    outcome = Outcome(NAME, TITLE.format(jobs=count))
    plan = []
    for system in systems:
        row = Row(system.label, system.key, system.jobs_for(count))
        outcome.rows.append(row)
        plan.append((system, row))
    alternate(ctx, plan, measure)
    outcome.facts["over_the_floor"] = over_floor(outcome)
    outcome.checks.append(
        Check(
            "drain in the steady state / server floor",
            rate_ratio(outcome, "drain-steady", "floor"),
            TARGET,
        )
    )
    return outcome
