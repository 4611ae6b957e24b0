"""The yardstick: the queue protocol written directly in psycopg 3, a few lines long.

Each round claims up to ``--claim`` jobs with drain's own claim statement
(``sql/claim.sql``), decodes every payload and calls a no-op on it, then marks the
whole batch done with one completion (``sql/complete.sql``), waiting for each
step. ``--claim 1`` is the one-job-per-round-trip design. Nothing of drain's
Python is imported, so the difference between this loop and ``drain run`` is
exactly what drain's runner adds or saves around the same SQL.

Run as a process, as the benchmarks do::

    python -m bench.protocol --dsn postgresql://localhost/bench --claim 100

It prints one JSON object: the jobs done, the seconds of the loop, and the
latency of every claim statement (p50, p99, max, in milliseconds).
``--no-prepare`` turns psycopg's server-side prepared statements off (by
default psycopg prepares a statement from its fifth execution on), to show how
much of a difference the planner's generic plans make on a queue table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

SQL_DIRECTORY = Path(__file__).resolve().parent.parent / "sql"
LEASE = timedelta(minutes=5)
MAX_PAYLOAD = 16 * 1024 * 1024


def statement(name: str, schema: str = "public", table: str = "jobs") -> bytes:
    """``sql/<name>.sql`` without its header comment, with the table quoted by the driver."""
    lines = (SQL_DIRECTORY / f"{name}.sql").read_text(encoding="utf-8").splitlines()
    while lines and (lines[0].startswith("--") or not lines[0].strip()):
        lines.pop(0)
    text = sql.SQL("\n".join(lines)).format(jobs=sql.Identifier(schema, table))
    return text.as_bytes(None)


def noop(payload: Any) -> None:
    """The job: nothing, so the loop measures the queue alone."""


def drain_queue(
    dsn: str, claim_size: int, queue: str = "default", *, prepare: bool = True
) -> dict[str, Any]:
    """Claim, run and complete until a claim comes back empty; return the figures."""
    claim = statement("claim")
    complete = statement("complete")
    params = {
        "queue": queue,
        "limit": claim_size,
        "lease": LEASE,
        "max_payload": MAX_PAYLOAD,
        "max_bytes": MAX_PAYLOAD,
    }
    claim_seconds: list[float] = []
    done = 0
    started = time.perf_counter()
    threshold = 5 if prepare else None  # 5 is psycopg's default
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=threshold) as conn:
        while True:
            before = time.perf_counter()
            rows = conn.execute(claim, params).fetchall()
            claim_seconds.append(time.perf_counter() - before)
            if not rows:
                break
            # Columns: id, attempt, max_attempts, exhausted, payload text, size, created_at, run_at.
            for row in rows:
                noop(json.loads(row[4]))
            finished = conn.execute(
                complete, {"ids": [row[0] for row in rows], "attempts": [row[1] for row in rows]}
            )
            done += len(finished.fetchall())
    seconds = time.perf_counter() - started
    return {
        "jobs": done,
        "seconds": seconds,
        "claims": len(claim_seconds),
        "claim_ms": percentiles(claim_seconds),
    }


def percentiles(seconds: list[float]) -> dict[str, float]:
    """p50, p99 and max of a list of durations, in milliseconds."""
    if not seconds:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50": round(statistics.median(ordered) * 1000, 3),
        "p99": round(p99 * 1000, 3),
        "max": round(ordered[-1] * 1000, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.protocol", description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--claim", type=int, default=100, help="jobs per claim (1: one per trip)")
    parser.add_argument("--queue", default="default")
    parser.add_argument("--no-prepare", action="store_true", help="no prepared statements")
    args = parser.parse_args(argv)
    result = drain_queue(args.dsn, args.claim, args.queue, prepare=not args.no_prepare)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
