"""The procrastinate side of the comparison: an app with one no-op task.

Run by the benchmark as ``procrastinate --app bench.peers.procrastinate_app.app
worker --one-shot --concurrency 10``; the database comes from ``BENCH_PEER_DSN``.
"""

from __future__ import annotations

import os

import procrastinate

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("BENCH_PEER_DSN", ""))
)


@app.task(name="noop")
async def noop(**payload: object) -> None:
    """Do nothing: every microsecond of the run is the queue's."""
