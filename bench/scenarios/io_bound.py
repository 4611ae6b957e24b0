"""I/O-bound jobs: 20,000 jobs that each wait 50 ms, every system at the same concurrency.

At concurrency C the ceiling is C / 50 ms (10,000 jobs/s at C = 500). Rows: drain
with an ``async def`` handler (tasks on the run's event loop), drain with a sync
handler (a thread per job; refused past 1,000, so at C = 500 only),
graphile-worker with its batching on and its local queue sized to C, and
pgqueuer's drain mode with ``max_concurrent_tasks`` C, its asyncio entrypoint
awaiting the same sleep. Peak RSS of each process is reported beside its rate.

Targets (issue 25): at C = 500, drain async at least 0.75x the ceiling, 1.3x
graphile-worker, 1.5x pgqueuer and no slower than drain's own threads; at C =
2000, drain async at least 1.3x graphile-worker, under 150 MB peak RSS.
"""

from __future__ import annotations

from bench.handlers import IO_SECONDS
from bench.measure import ProcessRun
from bench.peers import GraphileWorker, Pgqueuer, graphile_command, installed
from bench.scenarios import Check, Context, Outcome, Row, alternate, rate_ratio, setup_all
from bench.systems import DrainCLI, System

NAME = "io"
TITLE = "I/O-bound: {jobs:,} jobs waiting 50 ms each, concurrency {concurrency:,}"
CONCURRENCIES = (500, 2000)
SYNC_LIMIT = 1000  # drain's thread cap for sync handlers
PGQUEUER_BATCH = 100
RSS_LIMIT_MB = 150.0


def measure(system: System, count: int, row: Row) -> ProcessRun:
    """The wall time and the process's peak RSS."""
    system.fill(count)
    result = system.run(count)
    row.seconds.add(result.seconds)
    row.add("peak_rss_mb", result.max_rss_mb)
    return result


def systems_at(ctx: Context, concurrency: int) -> list[System]:
    server = ctx.server
    c = str(concurrency)
    found: list[System] = [
        DrainCLI(
            server,
            handler="bench.handlers:sleep_50ms_async",
            options=["--concurrency", c],
            key="drain-async",
            label=f"drain run --concurrency {concurrency}, async def handler (tasks)",
        )
    ]
    if concurrency <= SYNC_LIMIT:
        found.append(
            DrainCLI(
                server,
                handler="bench.handlers:sleep_50ms",
                options=["--concurrency", c],
                key="drain-sync",
                label=f"drain run --concurrency {concurrency}, sync handler (threads)",
            )
        )
    if not ctx.peers:
        return found
    command = graphile_command(ctx.graphile)
    if command:
        found.append(
            GraphileWorker(
                server,
                command,
                batched=True,
                jobs=concurrency,
                task="sleep50",
                local_queue=concurrency,
                key="graphile-io",
            )
        )
    if installed("pgqueuer"):
        found.append(
            Pgqueuer(
                server, PGQUEUER_BATCH, entrypoint="sleep50", tasks=concurrency, key="pgqueuer-io"
            )
        )
    return found


def run(ctx: Context) -> Outcome:
    count = ctx.size(20_000, 2_000)
    outcome = Outcome(NAME, TITLE.format(jobs=count, concurrency=CONCURRENCIES[0]))
    outcome.title = f"I/O-bound: {count:,} jobs waiting 50 ms each, at concurrency " + " and ".join(
        f"{c:,}" for c in CONCURRENCIES
    )
    plan: list[tuple[System, Row]] = []
    for concurrency in CONCURRENCIES:
        systems = systems_at(ctx, concurrency)
        setup_all(systems)
        for system in systems:
            system.key = f"{system.key}-{concurrency}"
            row = Row(f"C={concurrency}: {system.label}", system.key, count)
            outcome.rows.append(row)
            plan.append((system, row))
    alternate(ctx, plan, measure)
    for concurrency in CONCURRENCIES:
        ceiling = concurrency / IO_SECONDS
        outcome.facts[f"ceiling_jobs_per_second_c{concurrency}"] = ceiling
        mine = outcome.row(f"drain-async-{concurrency}")
        if mine is None:
            continue
        targets: tuple[tuple[str, float], ...]
        if concurrency == CONCURRENCIES[0]:
            outcome.checks.append(
                Check(f"C={concurrency}: drain async / ceiling", mine.rate.median / ceiling, 0.75)
            )
            targets = (("drain-sync", 1.0), ("graphile-io", 1.3), ("pgqueuer-io", 1.5))
        else:
            targets = (("graphile-io", 1.3),)
            rss = mine.extra["peak_rss_mb"].maximum
            outcome.checks.append(
                Check(
                    f"C={concurrency}: drain async peak RSS (largest of the runs)",
                    rss,
                    RSS_LIMIT_MB,
                    at_least=False,
                    unit=" MB",
                )
            )
        for other, bound in targets:
            key = f"{other}-{concurrency}"
            if outcome.row(key) is not None:
                ratio = rate_ratio(outcome, f"drain-async-{concurrency}", key)
                outcome.checks.append(
                    Check(f"C={concurrency}: drain async / {other}", ratio, bound)
                )
    outcome.notes.append(
        f"drain with a sync handler is refused past --concurrency {SYNC_LIMIT:,} "
        "(a thread per job), so it has no row at C=2,000"
    )
    return outcome
