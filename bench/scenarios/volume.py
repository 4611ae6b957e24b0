"""Volume: draining 200,000 jobs against draining 20,000, for speed and for memory.

The cost of a run must be linear in its work: jobs/s draining 200,000 within
20 % of draining 20,000. Memory must not grow with the job count: the drain
process's peak RSS (from ``wait4``, the whole process at its largest) at most
100 MB for 200,000 jobs, and within 10 % of its peak for 20,000. The claim
statement's latency is timed inside the protocol loop (p50, p99), since drain
sends its claims pipelined with completions and cannot time one alone: with
claims of 100, and of 1,000 without prepared statements, which is how drain
claims fast jobs.

Memory must follow what a run decodes, not what is stored: drain also drains
300 jobs (30 with ``--quick``) whose payloads are 4 MB of one repeated letter,
``{"n": i, "blob": "xxx..."}`` built by the server, which compresses each to a
few tens of kilobytes on disk. Its claims stop at 16 MiB of decoded payload,
so its peak RSS must stay within::

    2 x 16 MiB (the claim pending in the pipeline and the one being decoded)
    + the peak of the 20,000 no-op run (300 with --quick), measured alongside
    + 50 MB (the copies a claim passes through while it is decoded, allocator slack)

whatever the count. A cap that counted the stored size let one claim bring
hundreds of such payloads at once.
"""

from __future__ import annotations

from typing import Any

import psycopg

from bench.measure import ProcessRun
from bench.scenarios import Check, Context, Outcome, Row, alternate
from bench.systems import DrainCLI, ProtocolLoop, System

NAME = "volume"
TITLE = (
    "Volume: {large:,} no-op jobs against {small:,}; {payloads:,} jobs of 4 MB payloads; "
    "peak memory; claim latency"
)
MAX_RSS_MB = 100.0
# The large payloads: decoded size of each, and drain's cap on a claim's decoded
# payload (drain.core.settings.DEFAULT_MAX_CLAIM_BYTES), held here as the figure
# so the bound stays the same when an older drain is measured.
BLOB_BYTES = 4 * 1024 * 1024
CLAIM_CAP_MB = 16.0
PENDING_CLAIMS = 2
SLACK_MB = 50.0


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


def stored_kb(system: System) -> float:
    """The largest payload as stored (compressed, out of line): the premise of the row."""
    with psycopg.connect(system.dsn, autocommit=True) as conn:
        row: Any = conn.execute("SELECT max(pg_column_size(payload)) FROM jobs").fetchone()
    return round(float(row[0] or 0) / 1024, 1)


def run(ctx: Context) -> Outcome:
    small, large = ctx.size(20_000, 300), ctx.size(200_000, 3_000)
    payloads = ctx.size(300, 30)
    server = ctx.server
    outcome = Outcome(NAME, TITLE.format(large=large, small=small, payloads=payloads))
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
    blobs = DrainCLI(server, key="drain-4mb", blob_bytes=BLOB_BYTES)
    blobs.setup()
    blobs_row = Row(
        f"{blobs.label}, {payloads:,} jobs of 4 MB payloads", f"{blobs.key}@{payloads}", payloads
    )
    outcome.rows.append(blobs_row)
    plan.append((blobs, blobs_row))
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
    outcome.facts["largest_payload_stored_kb"] = stored_kb(blobs)
    outcome.checks.append(
        Check(
            f"drain peak RSS, {payloads:,} jobs of 4 MB payloads, against "
            f"{PENDING_CLAIMS} x {CLAIM_CAP_MB:.0f} MiB claims + the {small:,}-job peak "
            f"+ {SLACK_MB:.0f} MB",
            blobs_row.extra["peak_rss_mb"].median,
            PENDING_CLAIMS * CLAIM_CAP_MB + rss_small + SLACK_MB,
            at_least=False,
            unit=" MB",
        )
    )
    return outcome
