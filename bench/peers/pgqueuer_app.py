"""The pgqueuer side of the comparison: a factory for ``pgq run`` with its entrypoints.

``noop`` does nothing; ``sleep50`` awaits 50 ms (the ``io`` scenario). The
arguments are the batch size and, optionally, ``max_concurrent_tasks``.

Run by the benchmark as ``python -m bench.peers.pgqueuer_app``, which does what
``pgq run bench.peers.pgqueuer_app:create --mode drain --batch-size 100`` does
through pgqueuer's documented ``pgqueuer.run`` (``pgq run`` itself fails at
start-up with typer 0.29: its log-level option arrives as a string). The
database comes from ``BENCH_PEER_DSN``. The connection is asyncpg, as
pgqueuer's documentation has it, when asyncpg is installed (``pip install
'pgqueuer[asyncpg]'``), else psycopg 3 in autocommit.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pgqueuer
import psycopg
from pgqueuer import AsyncpgDriver, PgQueuer, PsycopgDriver
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.models import Job

ENTRYPOINT = "noop"
SLEEP_ENTRYPOINT = "sleep50"
SLEEP_SECONDS = 0.050
# pgqueuer's documentation runs it on asyncpg; psycopg is its other driver.
DRIVER = "asyncpg" if importlib.util.find_spec("asyncpg") else "psycopg"


@asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    dsn = os.environ["BENCH_PEER_DSN"]
    if DRIVER == "asyncpg":
        asyncpg = importlib.import_module("asyncpg")
        connection: Any = await asyncpg.connect(dsn)
        pgq = PgQueuer(AsyncpgDriver(connection))
    else:
        connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        pgq = PgQueuer(PsycopgDriver(connection))

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        """Do nothing: every microsecond of the run is the queue's."""

    @pgq.entrypoint(SLEEP_ENTRYPOINT)
    async def sleep50(job: Job) -> None:
        """Await 50 ms, as a job awaiting a network call does."""
        await asyncio.sleep(SLEEP_SECONDS)

    try:
        yield pgq
    finally:
        await connection.close()


def main() -> int:
    batch_size = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    tasks = int(sys.argv[2]) if len(sys.argv) > 2 else None
    logging.basicConfig(level=logging.INFO)
    asyncio.run(
        pgqueuer.run(
            create,
            batch_size=batch_size,
            mode=QueueExecutionMode.drain,
            max_concurrent_tasks=tasks,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
