"""``drain jobs`` on a table of 1,000,000 jobs: the median time of each kind of listing.

    python -m bench.jobs_listing                      # an embedded PostgreSQL 18
    python -m bench.jobs_listing --dsn postgresql://root@127.0.0.1:5432/test
    python -m bench.jobs_listing --rows 20000 --runs 3   # a quick check that it works

Each listing is timed two ways, its runs alternated with every other
listing's: the statement alone (``drain.ops.listing.jobs`` on an open connection,
the table check included), and the whole ``drain jobs`` process, start to exit,
as a user typing it pays (most of that is Python starting and connecting, so
the same command on an empty table is measured beside it).

The table is filled twice over the same 1,000,000 rows, since which index a
listing walks depends on where the matching jobs sit:

- ``backlog``: 989,950 done jobs under a backlog of 5,000 queued ones (the
  newest ids), 50 running, every 200th job failed; ten jobs of a rare queue
  (``audit``) are the oldest.
- ``history``: every job done but 100 queued ones spread over the whole table
  and 100 failed ones among the oldest 1,000: the case where a listing of
  failed jobs walks the whole primary key before it has found them all.

Target (issue 17): every listing's statement well under a second on 1,000,000
rows. Prints a Markdown table; ``--out`` also writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench.measure import PYTHON, clean_environment, compile_sources, run_process
from bench.server import bench_server, settle
from drain.core.table import JobTable
from drain.ops import listing
from drain.store.sqlfiles import statement_for

# (label, --queue, --status)
LISTINGS: tuple[tuple[str, str | None, str | None], ...] = (
    ("drain jobs", None, None),
    ("drain jobs --queue emails", "emails", None),
    ("drain jobs --status queued", None, "queued"),
    ("drain jobs --status queued --queue reports", "reports", "queued"),
    ("drain jobs --status running", None, "running"),
    ("drain jobs --status failed", None, "failed"),
    ("drain jobs --status failed --queue emails", "emails", "failed"),
    ("drain jobs --status done", None, "done"),
    ("drain jobs --queue audit (a rare queue, its jobs the oldest)", "audit", None),
)

FILL = """
INSERT INTO jobs (queue, payload, status, attempts, max_attempts, run_at, locked_until,
                  last_error, created_at)
SELECT CASE WHEN g <= 10 THEN 'audit' ELSE (ARRAY['emails', 'reports', 'thumbnails'])[g %% 3 + 1]
       END,
       jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
       CASE WHEN g > %(rows)s - 5000 THEN 'queued' WHEN g > %(rows)s - 5050 THEN 'running'
            WHEN g %% 200 = 0 THEN 'failed' ELSE 'done' END,
       CASE WHEN g %% 200 = 0 THEN 5 ELSE 1 END, 5,
       now() - make_interval(secs => (%(rows)s - g) * 0.5),
       CASE WHEN g > %(rows)s - 5050 AND g <= %(rows)s - 5000 THEN now() + interval '5 min' END,
       CASE WHEN g %% 200 = 0 THEN 'SMTP 451: try again later' END,
       now() - make_interval(secs => (%(rows)s - g) * 0.5)
FROM generate_series(1, %(rows)s) AS g
"""

# The second shape, over the same rows: history with a few queued and old failures.
RESHAPE = (
    "UPDATE jobs SET status = 'done', locked_until = NULL WHERE status <> 'done'",
    "UPDATE jobs SET status = 'queued' WHERE id %% (%(rows)s / 100) = 7",
    "UPDATE jobs SET status = 'failed', last_error = 'boom' WHERE id <= 1000 AND id %% 10 = 3",
)


@dataclass
class Figure:
    """One listing in one shape: its statement's times and its process's times."""

    shape: str
    label: str
    queue: str | None
    status: str | None
    rows: int = 0
    statement: list[float] = field(default_factory=list)
    process: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "label": self.label,
            "rows_listed": self.rows,
            "statement_ms": _summary(self.statement),
            "process_s": _summary(self.process, scale=1.0),
        }


def _summary(values: Sequence[float], scale: float = 1000.0) -> dict[str, float]:
    if not values:
        return {}
    return {
        "median": round(statistics.median(values) * scale, 3),
        "min": round(min(values) * scale, 3),
        "max": round(max(values) * scale, 3),
        "runs": len(values),
    }


def _argv(figure: Figure, limit: int) -> list[str]:
    argv = [PYTHON, "-m", "drain", "jobs", "--limit", str(limit), "--json"]
    if figure.queue:
        argv += ["--queue", figure.queue]
    if figure.status:
        argv += ["--status", figure.status]
    return argv


def measure(
    dsn: str, figures: list[Figure], runs: int, limit: int, log: Callable[[str], None]
) -> None:
    """Time every figure ``runs`` times, alternating: statement, then process, in turn."""
    table = JobTable()
    environment = clean_environment({"DRAIN_DSN": dsn})
    with psycopg.connect(dsn, autocommit=True) as conn:
        for number in range(1, runs + 1):
            for figure in figures:
                started = time.perf_counter()
                found = listing.jobs(
                    conn, table, queue=figure.queue, status=figure.status, limit=limit
                )
                figure.statement.append(time.perf_counter() - started)
                figure.rows = len(found)
                result = run_process(_argv(figure, limit), env=environment).check(figure.label)
                if len(json.loads(result.stdout)) != figure.rows:
                    raise SystemExit(f"{figure.label}: the process listed other jobs")
                figure.process.append(result.seconds)
            log(f"  round {number}/{runs} done")


def explain(dsn: str, figures: Sequence[Figure], limit: int) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of each listing's statement, as drain sends it."""
    table = JobTable()
    lines: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for figure in figures:
            name, params = listing.listing_statement(
                queue=figure.queue, status=figure.status, limit=limit
            )
            plan = conn.execute(
                b"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement_for(table, name),
                params,
                prepare=False,
            ).fetchall()
            lines.append(f"-- {figure.shape}: {figure.label} (sql/{name}.sql)")
            lines.extend(f"   {row[0]}" for row in plan)
    return lines


def render(figures: Sequence[Figure], rows: int, limit: int) -> str:
    lines = [
        f"| shape ({rows:,} rows) | listing (--limit {limit}) | jobs listed | "
        "statement, median (ms) | `drain jobs` process, median (s) |",
        "|---|---|---:|---:|---:|",
    ]
    for figure in figures:
        statement = statistics.median(figure.statement) * 1000
        process = statistics.median(figure.process)
        lines.append(
            f"| {figure.shape} | `{figure.label}` | {figure.rows} | {statement:,.2f} | "
            f"{process:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.jobs_listing", description=__doc__)
    parser.add_argument("--dsn", help="an administrative DSN (default: an embedded server)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--limit", type=int, default=listing.DEFAULT_LIMIT)
    parser.add_argument("--out", type=Path, help="also write the figures here, as JSON")
    parser.add_argument(
        "--explain", action="store_true", help="also print each statement's EXPLAIN ANALYZE"
    )
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    compile_sources()
    figures: list[Figure] = []
    plans: list[str] = []
    with bench_server(args.dsn) as server:
        empty_dsn = server.drain_database("jobs_empty")
        empty = [Figure("empty table", "drain jobs", None, None)]
        log("empty table")
        measure(empty_dsn, empty, args.runs, args.limit, log)
        dsn = server.drain_database("jobs_listing")
        with psycopg.connect(dsn, autocommit=True) as conn:
            log(f"filling {args.rows:,} jobs")
            conn.execute(FILL, {"rows": args.rows})
            settle(conn, "public.jobs")
            for shape in ("backlog", "history"):
                if shape == "history":
                    for statement in RESHAPE:
                        conn.execute(statement, {"rows": args.rows})
                    settle(conn, "public.jobs")
                log(f"shape {shape}")
                these = [Figure(shape, *listing_) for listing_ in LISTINGS]
                measure(dsn, these, args.runs, args.limit, log)
                figures.extend(these)
                if args.explain:
                    plans.extend(explain(dsn, these, args.limit))
        info = server.info
    figures = empty + figures
    print(f"PostgreSQL {info.version}{' (embedded)' if info.embedded else ''}, {args.runs} runs")
    print()
    print(render(figures, args.rows, args.limit))
    worst = max(statistics.median(f.statement) for f in figures)
    print()
    print(f"slowest statement (median): {worst * 1000:,.1f} ms (target: well under 1,000 ms)")
    if plans:
        print()
        print("\n".join(plans))
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "server": info.as_dict(),
                    "rows": args.rows,
                    "runs": args.runs,
                    "limit": args.limit,
                    "figures": [figure.as_dict() for figure in figures],
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
