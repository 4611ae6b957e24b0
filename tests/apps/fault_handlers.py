"""Handlers that misbehave on purpose, steered by each job's payload.

Use with ``drain run --handler fault_handlers:work``. Every call is written to the
ledger (:mod:`ledger_writer`) before anything else, and marked ``returned`` only
when the handler is about to return normally. Payload keys, applied in this order:

``terminate_runner: "start"``
    terminate the run's own database backend (``pg_terminate_backend``) first,
    i.e. right after the claim that brought this job;
``wait_for_attempt: N``
    wait until attempt N of the same job has returned (a stale first attempt that
    outlives its lease while a second run does the job again);
``sleep: S`` / ``spin: S``
    sleep, or burn the CPU in pure Python without ever yielding, for S seconds;
``until_lease_lost: S``
    on the job's first attempt, wait until ``job.lease_lost`` says the run lost
    it, then return (raise TimeoutError after S seconds);
``fault: NAME`` (with ``fault_on: [attempts]``, default every attempt)
    ``raise``, ``permanent``, ``exit`` (SystemExit), ``interrupt``
    (KeyboardInterrupt), ``os_exit`` (``os._exit(17)``), ``kill`` (SIGKILL to the
    whole run), ``leak`` (raise an error quoting the run's DSN, password and all);
    ``hang`` (never return: asyncio's ``await`` of a future nobody sets, for
    ``work_async``; a sleep of an hour for ``work``);
``terminate_runner: "return"``
    terminate the run's backend after the work, before the completion is sent;
``kill_after: S``
    return normally, then SIGKILL the whole run S seconds later (around the
    completion of this job).

``work_async`` and ``output_async`` do the same as ``async def`` handlers, which
drain runs as tasks on its event loop: their waits are awaits, their ledger
writes go through a thread (``asyncio.to_thread``) so the loop never blocks on
them, and ``spin`` still blocks the whole loop, as CPU-bound code in a task does.
``tests/faults/support/processes.handler`` picks the kind for the whole suite
(``DRAIN_FAULT_HANDLERS=async``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import ledger_writer

import drain

OS_EXIT_STATUS = 17
WAIT_PATIENCE_SECONDS = 60.0

# Payload keys that make the handler do something between its start and its return.
_BEFORE_RETURN = {
    "terminate_runner",
    "wait_for_attempt",
    "sleep",
    "spin",
    "until_lease_lost",
    "fault",
}

_TERMINATE_RUNNER = """
SELECT count(pg_terminate_backend(pid))
FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'drain' AND pid <> pg_backend_pid()
"""


def _terminate_runner() -> None:
    ledger_writer.execute(_TERMINATE_RUNNER)


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    counter = 0
    while time.monotonic() < end:
        counter += 1


def _wait_for(job: drain.Job, attempt: int) -> None:
    deadline = time.monotonic() + WAIT_PATIENCE_SECONDS
    while not ledger_writer.has_returned(job.id, attempt):
        if time.monotonic() > deadline:
            raise TimeoutError(f"attempt {attempt} of job {job.id} never returned")
        time.sleep(0.05)


def _until_lease_lost(job: drain.Job, patience: float) -> None:
    deadline = time.monotonic() + patience
    while not job.lease_lost:
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job.id} never learnt its lease was lost")
        time.sleep(0.05)


def _misbehave(name: str) -> NoReturn:
    if name == "raise":
        raise RuntimeError("injected failure")
    if name == "permanent":
        raise drain.PermanentError("injected permanent failure")
    if name == "exit":
        raise SystemExit(3)
    if name == "interrupt":
        raise KeyboardInterrupt
    if name == "os_exit":
        os._exit(OS_EXIT_STATUS)
    if name == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    if name == "leak":
        raise RuntimeError(f"could not reach {os.environ.get('DRAIN_DSN', '')}")
    if name == "hang":
        time.sleep(3600)
    raise ValueError(f"unknown fault {name!r}")


def _kill_run_later(seconds: float) -> None:
    timer = threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGKILL))
    timer.daemon = True
    timer.start()


def work(job: drain.Job) -> None:
    payload: dict[str, Any] = job.payload if isinstance(job.payload, dict) else {}
    entry = ledger_writer.Entry(job.id, job.attempt)
    if not _BEFORE_RETURN.intersection(payload):
        entry.started(returned=True)
        _after_return(payload, job)
        return
    entry.started()
    if payload.get("terminate_runner") == "start":
        _terminate_runner()
    if "wait_for_attempt" in payload and job.attempt < payload["wait_for_attempt"]:
        _wait_for(job, payload["wait_for_attempt"])
    if "sleep" in payload:
        time.sleep(payload["sleep"])
    if "spin" in payload:
        _spin(payload["spin"])
    if "until_lease_lost" in payload and job.attempt == 1:
        _until_lease_lost(job, float(payload["until_lease_lost"]))
    fault = payload.get("fault")
    if fault and job.attempt in payload.get("fault_on", [job.attempt]):
        entry.fault(fault)
        _misbehave(fault)
    if payload.get("terminate_runner") == "return":
        _terminate_runner()
    entry.returned()
    _after_return(payload, job)


def _after_return(payload: dict[str, Any], job: drain.Job) -> None:
    if "kill_after" in payload and job.attempt in payload.get("kill_on", [job.attempt]):
        _kill_run_later(payload["kill_after"])


# A file name as os.listdir returns it for bytes that are not UTF-8: a lone surrogate.
UNDECODABLE_NAME = os.fsdecode(b"caf\xe9.txt")


class _Unprintable(Exception):
    """An exception whose text cannot be built: its ``__str__`` raises."""

    def __str__(self) -> str:
        raise ValueError("this exception cannot be printed")


def output(job: drain.Job) -> None:
    """A handler whose error texts and retry requests are hostile, steered by ``output``.

    Use with ``drain run --handler fault_handlers:output``. ``output`` is ``nul``
    (an error text with a NUL byte), ``surrogate`` (a file name with a lone
    surrogate, as ``os.listdir`` returns for undecodable bytes), ``unprintable``
    (an exception whose ``__str__`` raises) or ``snooze``: ``RetryLater(delay=...)``
    with ``delay`` (a number, or ``"nan"``), ``at_ago`` (an ``at`` that many
    seconds in the past) on each of the first ``snoozes`` attempts, then return.
    Without ``output`` the job simply returns. Every call goes to the ledger.
    """
    _output_ledger(job)
    _output_outcome(job)


def _output_ledger(job: drain.Job) -> None:
    """The ledger's row for a call of :func:`output`: returned unless it raises."""
    entry = ledger_writer.Entry(job.id, job.attempt)
    entry.started(returned=not _output_raises(job))


def _output_raises(job: drain.Job) -> bool:
    payload: dict[str, Any] = job.payload if isinstance(job.payload, dict) else {}
    kind = payload.get("output")
    if kind == "snooze":
        return bool(job.attempt <= payload.get("snoozes", 1))
    return kind in ("nul", "surrogate", "unprintable")


def _output_outcome(job: drain.Job) -> None:
    payload: dict[str, Any] = job.payload if isinstance(job.payload, dict) else {}
    if not _output_raises(job):
        return
    kind = payload.get("output")
    if kind == "nul":
        raise RuntimeError("oops\x00 after a NUL")
    if kind == "surrogate":
        raise FileNotFoundError(f"cannot read {UNDECODABLE_NAME}")
    if kind == "unprintable":
        raise _Unprintable()
    if "at_ago" in payload:
        at = datetime.now(UTC) - timedelta(seconds=payload["at_ago"])
        raise drain.RetryLater(at=at)
    raise drain.RetryLater(delay=float(payload["delay"]))


async def _wait_for_async(job: drain.Job, attempt: int) -> None:
    deadline = time.monotonic() + WAIT_PATIENCE_SECONDS
    while not await asyncio.to_thread(ledger_writer.has_returned, job.id, attempt):
        if time.monotonic() > deadline:
            raise TimeoutError(f"attempt {attempt} of job {job.id} never returned")
        await asyncio.sleep(0.05)


async def _until_lease_lost_async(job: drain.Job, patience: float) -> None:
    """Wait for ``job.lease_lost``; drain cancels the task of a lost attempt, and the
    handler learns it that way too (the flag is set before the task is cancelled)."""
    deadline = time.monotonic() + patience
    try:
        while not job.lease_lost:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job.id} never learnt its lease was lost")
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        if not job.lease_lost:
            raise


async def work_async(job: drain.Job) -> None:
    """:func:`work` as an ``async def`` handler (see the module's docstring)."""
    payload: dict[str, Any] = job.payload if isinstance(job.payload, dict) else {}
    entry = ledger_writer.Entry(job.id, job.attempt)
    if not _BEFORE_RETURN.intersection(payload):
        await asyncio.to_thread(entry.started, returned=True)
        _after_return(payload, job)
        return
    await asyncio.to_thread(entry.started)
    if payload.get("terminate_runner") == "start":
        await asyncio.to_thread(_terminate_runner)
    if "wait_for_attempt" in payload and job.attempt < payload["wait_for_attempt"]:
        await _wait_for_async(job, payload["wait_for_attempt"])
    if "sleep" in payload:
        await asyncio.sleep(payload["sleep"])
    if "spin" in payload:
        _spin(payload["spin"])
    if "until_lease_lost" in payload and job.attempt == 1:
        await _until_lease_lost_async(job, float(payload["until_lease_lost"]))
    fault = payload.get("fault")
    if fault and job.attempt in payload.get("fault_on", [job.attempt]):
        await asyncio.to_thread(entry.fault, fault)
        if fault == "hang":
            await asyncio.get_running_loop().create_future()
        _misbehave(fault)
    if payload.get("terminate_runner") == "return":
        await asyncio.to_thread(_terminate_runner)
    await asyncio.to_thread(entry.returned)
    _after_return(payload, job)


async def output_async(job: drain.Job) -> None:
    """:func:`output` as an ``async def`` handler: the same errors, raised in a task."""
    await asyncio.to_thread(_output_ledger, job)
    _output_outcome(job)
