"""Handlers the benchmarks give ``drain run --handler``: the cost of a job is the variable.

``noop`` measures the queue itself (claim, complete, per-job overhead); ``sleep_10ms``
stands for a job that waits on I/O, so concurrency, not the queue, sets the pace;
``sleep_50ms`` and ``sleep_50ms_async`` are the network call of the ``io`` scenario,
waited for in a thread and awaited in a task.
"""

from __future__ import annotations

import asyncio
import time

from drain.core.jobs import Job

SLEEP_SECONDS = 0.010
IO_SECONDS = 0.050


def noop(job: Job) -> None:
    """Do nothing: every microsecond of the run is the queue's."""


def sleep_10ms(job: Job) -> None:
    """Wait 10 ms without using the CPU, as a job waiting on a network call does."""
    time.sleep(SLEEP_SECONDS)


def sleep_50ms(job: Job) -> None:
    """Wait 50 ms in the worker thread, as a blocking HTTP client does."""
    time.sleep(IO_SECONDS)


async def sleep_50ms_async(job: Job) -> None:
    """Await 50 ms on the run's event loop, as an async HTTP client does."""
    await asyncio.sleep(IO_SECONDS)
