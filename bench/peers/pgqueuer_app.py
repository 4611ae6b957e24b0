"""The pgqueuer side of the comparison: a factory for ``pgq run`` with one no-op entrypoint.

Run by the benchmark as ``python -m bench.peers.pgqueuer_app``, which does what
``pgq run bench.peers.pgqueuer_app:create --mode drain --batch-size 100`` does
through pgqueuer's documented ``pgqueuer.run`` (``pgq run`` itself fails at
start-up with typer 0.29: its log-level option arrives as a string). The
database comes from ``BENCH_PEER_DSN``; the connection is psycopg 3 in
autocommit, as pgqueuer requires.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pgqueuer
import psycopg
from pgqueuer import PgQueuer, PsycopgDriver
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.models import Job

ENTRYPOINT = "noop"


@asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    conn = await psycopg.AsyncConnection.connect(os.environ["BENCH_PEER_DSN"], autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        """Do nothing: every microsecond of the run is the queue's."""

    try:
        yield pgq
    finally:
        await conn.close()


def main() -> int:
    batch_size = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    logging.basicConfig(level=logging.INFO)
    asyncio.run(pgqueuer.run(create, batch_size=batch_size, mode=QueueExecutionMode.drain))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
