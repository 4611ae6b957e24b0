"""Handlers the benchmarks give ``drain run --handler``: the cost of a job is the variable.

``noop`` measures the queue itself (claim, complete, per-job overhead); ``sleep_10ms``
stands for a job that waits on I/O, so concurrency, not the queue, sets the pace.
"""

from __future__ import annotations

import time

from drain.core.jobs import Job

SLEEP_SECONDS = 0.010


def noop(job: Job) -> None:
    """Do nothing: every microsecond of the run is the queue's."""


def sleep_10ms(job: Job) -> None:
    """Wait 10 ms without using the CPU, as a job waiting on a network call does."""
    time.sleep(SLEEP_SECONDS)
