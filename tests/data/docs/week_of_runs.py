"""A week of recorded runs for docs/how-to/plan.md: what ``drain plan --dsn`` reads.

130 runs of ``public.jobs`` over the last 7 days, as a run every 20 minutes leaves
them in ``drain_runs`` (the statement ``sql/record_run.sql`` writes one with):
most take 30 to 41 s, the slowest 10 take 44 s, so the 95th percentile is 44 s.
"""

from __future__ import annotations

import os

import psycopg

RUNS = 130
WEEK = 7 * 24 * 3600

with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
    for number in range(RUNS):
        seconds = 44.0 if number >= RUNS - 10 else 30.0 + number % 12
        ago = WEEK * (number + 1) / (RUNS + 1)
        conn.execute(
            "INSERT INTO drain_runs (jobs_table, started_at, finished_at, seconds, claimed,"
            " done, retried, failed, lost, reaped, released, archived, exit_reason,"
            " exit_code)"
            " VALUES ('public.jobs', now() - make_interval(secs => %(ago)s),"
            " now() - make_interval(secs => %(ago)s - %(seconds)s), %(seconds)s,"
            " 40, 40, 0, 0, 0, 0, 0, 0, 'drained', 0)",
            {"ago": ago, "seconds": seconds},
        )
