"""``async def`` handlers for tests/test_async_handlers.py, steered by each job's payload.

``--app async_handlers`` serves ``gather`` (async), ``io`` (async), ``hang``
(async), ``fail`` (async) and ``plain`` (sync). Files go to ``ASYNC_TEST_DIR``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import drain

PATIENCE_SECONDS = 90.0
_in_flight = 0
_gathered: asyncio.Event | None = None


def _directory() -> Path:
    return Path(os.environ["ASYNC_TEST_DIR"])


def _payload(job: drain.Job) -> dict[str, Any]:
    return job.payload if isinstance(job.payload, dict) else {}


@drain.handler("gather")
async def gather(job: drain.Job) -> None:
    """Wait until ``together`` jobs are in flight at once, then return: only a run
    that holds that many as tasks gets there (the handler gives up after a while,
    and the job is retried). Notes the threads of the process as it returns."""
    global _in_flight, _gathered
    together = int(_payload(job)["together"])
    if _gathered is None:
        _gathered = asyncio.Event()
    _in_flight += 1
    if _in_flight >= together:
        _gathered.set()
    await asyncio.wait_for(_gathered.wait(), PATIENCE_SECONDS)
    (_directory() / f"threads-{job.id}").write_text(str(threading.active_count()))


@drain.handler("io")
async def io(job: drain.Job) -> None:
    await asyncio.sleep(float(_payload(job).get("sleep", 0.01)))
    (_directory() / f"io-{job.id}-{job.attempt}").write_text(threading.current_thread().name)


@drain.handler("plain")
def plain(job: drain.Job) -> None:
    time.sleep(float(_payload(job).get("sleep", 0.01)))
    (_directory() / f"plain-{job.id}-{job.attempt}").write_text(threading.current_thread().name)


@drain.handler("hang")
async def hang(job: drain.Job) -> None:
    """Never return (a future nobody sets); note the cancellation drain sends at its stop."""
    (_directory() / f"hang-{job.id}").write_text("started")
    try:
        await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:
        (_directory() / f"cancelled-{job.id}").write_text(str(job.lease_lost))
        raise


@drain.handler("fail")
async def fail(job: drain.Job) -> None:
    """Raise what the payload's ``raise`` names, from a task."""
    kind = _payload(job)["raise"]
    await asyncio.sleep(0)
    if kind == "exit":
        raise SystemExit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "permanent":
        raise drain.PermanentError("no good")
    if kind == "later":
        raise drain.RetryLater(delay=3600)
    if kind == "cancelled":
        raise asyncio.CancelledError
    raise RuntimeError(f"task failed: {kind}")


@drain.handler("wrapped")
def wrapped(job: drain.Job) -> Any:
    """A sync function that returns a coroutine: awaited on the run's loop, its worker
    thread waiting (``raise`` in the payload makes the coroutine raise that)."""
    return _wrapped(job)


async def _wrapped(job: drain.Job) -> None:
    await asyncio.sleep(0)
    if _payload(job).get("raise") == "interrupt":
        raise KeyboardInterrupt
    (_directory() / f"wrapped-{job.id}").write_text(threading.current_thread().name)


@drain.handler("block")
async def block(job: drain.Job) -> None:
    """Block the whole loop (a blocking call in a task) for ``seconds``."""
    (_directory() / f"block-{job.id}").write_text("started")
    time.sleep(float(_payload(job)["seconds"]))
