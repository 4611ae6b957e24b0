"""Empty run: process start to exit when there is nothing to do.

This is what a schedule pays on every tick of a quiet day, so it is measured
against the least any Python worker can do: a process that imports psycopg,
connects and disconnects. Target: drain within 1.3x of it, and at most 6
statements sent, counted on the wire by the proxy (with no delay): the schema
check, the reap with the read of the recurring jobs due (one pipeline, one round
trip), the claim and the run's record.
"""

from __future__ import annotations

from bench.measure import PYTHON, ProcessRun
from bench.peers import find_peers
from bench.scenarios import Check, Context, Outcome, Row, alternate, setup_all
from bench.systems import DrainCLI, System
from tests.support.pgproxy import PgProxy

NAME = "empty"
TITLE = "Empty run: process start to exit on an empty queue"
MAX_STATEMENTS = 6
CONNECT_ONLY = "import sys, psycopg; psycopg.connect(sys.argv[1]).close()"


class ConnectOnly(System):
    """The floor: a Python process that imports psycopg, connects and disconnects."""

    key = "connect-only"
    label = "python: import psycopg, connect, disconnect"

    def setup(self) -> None:
        self.dsn = self.server.create_database("connect_only")

    def fill(self, count: int) -> None:
        """Nothing to fill: this process does no work."""

    def argv(self, dsn: str) -> list[str]:
        return [PYTHON, "-c", CONNECT_ONLY, dsn]

    def left(self) -> int:
        return 0


def measure(system: System, count: int, row: Row) -> ProcessRun:
    system.fill(0)
    result = system.run(0)
    row.seconds.add(result.seconds)
    return result


def run(ctx: Context) -> Outcome:
    server = ctx.server
    systems: list[System] = [ConnectOnly(server), DrainCLI(server)]
    if ctx.peers:
        systems += find_peers(server, ctx.graphile)
        systems = [s for s in systems if s.key != "graphile-batched"]
    setup_all(systems)
    outcome = Outcome(NAME, TITLE)
    plan = []
    for system in systems:
        row = Row(system.label, system.key, 0)
        outcome.rows.append(row)
        plan.append((system, row))
    # Start-up times are short and noisy: ten times the usual number of runs
    # (two in quick mode, which only checks that the scenario works).
    alternate(ctx, plan, measure, runs=ctx.size(10 * ctx.runs, 2))
    statements: dict[str, int] = {}
    sessions: dict[str, int] = {}
    with PgProxy.for_dsn(systems[0].dsn) as proxy:
        for system, row in plan:
            system.fill(0)
            proxy.reset()
            system.run(0, dsn=proxy.dsn_through(system.dsn))
            statements[system.key] = proxy.statements
            sessions[system.key] = proxy.connections
            row.add("statements", proxy.statements)
            row.add("sessions", proxy.connections)
    outcome.facts["statements"] = statements
    outcome.facts["sessions"] = sessions
    drain, floor = outcome.row("drain"), outcome.row("connect-only")
    assert drain is not None and floor is not None
    outcome.checks.append(
        Check(
            "drain / connect-only, seconds",
            drain.seconds.median / floor.seconds.median,
            1.3,
            at_least=False,
        )
    )
    outcome.checks.append(
        Check("drain statements", statements["drain"], MAX_STATEMENTS, at_least=False, unit="")
    )
    return outcome
