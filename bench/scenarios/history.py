"""History: the same drain on an empty table and on one holding 1,000,000 done jobs.

Done jobs stay in the queue table until they are archived (after 7 days by
default), so a busy queue carries a large history. The claim walks only the
partial ready index and must not notice it. Target: drain's jobs/s with the
history within 15 % of its jobs/s on an empty table. The claim statement's own
latency (p50, p99) is timed inside the protocol loop on both tables.
"""

from __future__ import annotations

from bench.measure import ProcessRun
from bench.scenarios import Check, Context, Outcome, Row, alternate, rate_ratio
from bench.systems import DrainCLI, DrainTableSystem, ProtocolLoop, System

NAME = "history"
TITLE = "History: {jobs:,} no-op jobs over {history:,} done jobs, against an empty table"


def measure(system: System, count: int, row: Row) -> ProcessRun:
    system.fill(count)
    result = system.run(count)
    row.seconds.add(result.seconds)
    if isinstance(system, ProtocolLoop):
        claims = ProtocolLoop.report(result)["claim_ms"]
        row.add("claim_p50_ms", float(claims["p50"]))
        row.add("claim_p99_ms", float(claims["p99"]))
    return result


def run(ctx: Context) -> Outcome:
    count = ctx.size(20_000, 500)
    history = ctx.size(1_000_000, 10_000)
    server = ctx.server
    outcome = Outcome(NAME, TITLE.format(jobs=count, history=history))
    plan: list[tuple[System, Row]] = []
    for with_history in (False, True):
        suffix = f", {history:,} done jobs in the table" if with_history else ", empty table"
        systems: list[DrainTableSystem] = [DrainCLI(server), ProtocolLoop(server, 100)]
        for system in systems:
            system.setup()
            if with_history:
                ctx.log(f"  adding {history:,} done jobs under {system.label}")
                system.add_history(history)
            key = f"{system.key}+history" if with_history else system.key
            row = Row(system.label + suffix, key, count)
            outcome.rows.append(row)
            plan.append((system, row))
    alternate(ctx, plan, measure)
    outcome.facts["done_jobs"] = history
    outcome.checks.append(
        Check(
            "drain with history / drain on empty table",
            rate_ratio(outcome, "drain+history", "drain"),
            0.85,
        )
    )
    return outcome
