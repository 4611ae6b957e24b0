"""Volume: draining 200,000 jobs against draining 20,000, for speed and for memory.

The cost of a run must be linear in its work: jobs/s draining 200,000 within
20 % of draining 20,000. Memory must not grow with the job count: the drain
process's peak RSS (from ``wait4``, the whole process at its largest) at most
100 MB for 200,000 jobs, and within 10 % of its peak for 20,000. The claim
statement's latency is timed inside the protocol loop (p50, p99), since drain
sends its claims pipelined with completions and cannot time one alone: with
claims of 100, and of 1,000 without prepared statements, which is how drain
claims fast jobs.
"""

from __future__ import annotations

from bench.measure import ProcessRun
from bench.scenarios import Check, Context, Outcome, Row, alternate
from bench.systems import DrainCLI, ProtocolLoop, System

NAME = "volume"
TITLE = "Volume: {large:,} no-op jobs against {small:,}; peak memory; claim latency"
MAX_RSS_MB = 100.0


def measure(system: System, count: int, row: Row) -> ProcessRun:
    system.fill(count)
    result = system.run(count)
    row.seconds.add(result.seconds)
    row.add("peak_rss_mb", result.max_rss_mb)
    if isinstance(system, ProtocolLoop):
        claims = ProtocolLoop.report(result)["claim_ms"]
        row.add("claim_p50_ms", float(claims["p50"]))
        row.add("claim_p99_ms", float(claims["p99"]))
    return result


def run(ctx: Context) -> Outcome:
    small, large = ctx.size(20_000, 300), ctx.size(200_000, 3_000)
    server = ctx.server
    outcome = Outcome(NAME, TITLE.format(large=large, small=small))
    plan: list[tuple[System, Row]] = []
    for count in (small, large):
        systems = (
            DrainCLI(server),
            ProtocolLoop(server, 100),
            ProtocolLoop(server, 1000, prepare=False),
        )
        for system in systems:
            system.setup()
            row = Row(f"{system.label}, {count:,} jobs", f"{system.key}@{count}", count)
            outcome.rows.append(row)
            plan.append((system, row))
    alternate(ctx, plan, measure)
    drain_small, drain_large = outcome.row(f"drain@{small}"), outcome.row(f"drain@{large}")
    assert drain_small is not None and drain_large is not None
    outcome.checks.append(
        Check(
            f"drain jobs/s, {large:,} / {small:,} jobs",
            drain_large.rate.median / drain_small.rate.median,
            0.8,
        )
    )
    rss_small = drain_small.extra["peak_rss_mb"].median
    rss_large = drain_large.extra["peak_rss_mb"].median
    outcome.checks.append(
        Check(f"drain peak RSS, {large:,} jobs", rss_large, MAX_RSS_MB, at_least=False, unit=" MB")
    )
    outcome.checks.append(
        Check(
            f"drain peak RSS, {large:,} / {small:,} jobs",
            rss_large / rss_small,
            1.1,
            at_least=False,
        )
    )
    return outcome
