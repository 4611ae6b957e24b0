"""Latency-bound: every byte crosses a proxy that adds about 1.5 ms each way.

A database in the cloud is a few milliseconds away; a design that waits for
each statement then spends its time waiting, whatever the server could do.
The proxy (``tests/support/pgproxy.py``; this machine has no ``tc netem``) is
calibrated until ``SELECT 1`` through it takes about 3 ms, since its own
forwarding adds a little to the configured delay, and the measured round trip
is reported. Target: drain at least 1.5x the direct-protocol loop, which waits
for each step.
"""

from __future__ import annotations

import statistics
import time

import psycopg

from bench.measure import ProcessRun
from bench.peers import find_peers
from bench.scenarios import Check, Context, Outcome, Row, alternate, rate_ratio, setup_all
from bench.systems import DrainCLI, ProtocolLoop, System
from tests.support.pgproxy import PgProxy

NAME = "latency"
TITLE = "Latency-bound: {jobs:,} no-op jobs through a proxy adding ~3 ms per round trip"
TARGET_RTT = 0.003
PROBES = 200


def round_trip(dsn: str, probes: int = PROBES) -> float:
    """The median time of ``SELECT 1`` over one connection, in seconds."""
    timings = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
        for _ in range(probes):
            started = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def calibrate(proxy: PgProxy, dsn: str, target: float = TARGET_RTT, probes: int = PROBES) -> float:
    """Adjust the proxy's delay until a round trip through it takes ``target``; return it."""
    through = proxy.dsn_through(dsn)
    measured = round_trip(through, probes)
    for _ in range(6):
        error = measured - target
        if abs(error) < 0.00005:
            break
        proxy.delay = max(0.0, proxy.delay - error / 2)
        measured = round_trip(through, probes)
    return measured


def measure(through: str, system: System, count: int, row: Row) -> ProcessRun:
    system.fill(count)
    result = system.run(count, dsn=through)
    row.seconds.add(result.seconds)
    return result


def run(ctx: Context) -> Outcome:
    count = ctx.size(20_000, 500)
    server = ctx.server
    systems: list[System] = [
        DrainCLI(server),
        ProtocolLoop(server, 100),
        ProtocolLoop(server, 100, prepare=False),
    ]
    if ctx.peers:
        systems += find_peers(server, ctx.graphile, fast_only=True)
    setup_all(systems)
    outcome = Outcome(NAME, TITLE.format(jobs=count))
    direct = round_trip(systems[0].dsn)
    proxy = PgProxy.for_dsn(systems[0].dsn, delay=TARGET_RTT / 2).start()
    try:
        measured = calibrate(proxy, systems[0].dsn, probes=ctx.size(PROBES, 50))
        outcome.facts["direct_rtt_ms"] = round(direct * 1000, 3)
        outcome.facts["proxy_delay_each_way_ms"] = round(proxy.delay * 1000, 3)
        outcome.facts["measured_rtt_ms"] = round(measured * 1000, 3)
        ctx.log(
            f"  proxy delay {proxy.delay * 1000:.3f} ms each way: SELECT 1 takes "
            f"{measured * 1000:.3f} ms (direct {direct * 1000:.3f} ms)"
        )
        plan = []
        for system in systems:
            row = Row(system.label, system.key, system.jobs_for(count))
            outcome.rows.append(row)
            plan.append((system, row, proxy.dsn_through(system.dsn)))
        rounds = [(system, row) for system, row, _ in plan]
        dsns = {system.key: through for system, _, through in plan}
        alternate(ctx, rounds, lambda s, n, r: measure(dsns[s.key], s, n, r))
    finally:
        proxy.stop()
    outcome.checks.append(
        Check("drain / protocol loop, claim 100", rate_ratio(outcome, "drain", "protocol-100"), 1.5)
    )
    return outcome
