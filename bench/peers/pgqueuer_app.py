"""The pgqueuer side of the comparison: a factory for ``pgq run`` with one no-op entrypoint.

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

    try:
        yield pgq
    finally:
        await connection.close()


def main() -> int:
    batch_size = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    logging.basicConfig(level=logging.INFO)
    asyncio.run(pgqueuer.run(create, batch_size=batch_size, mode=QueueExecutionMode.drain))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
