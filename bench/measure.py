"""Timing a process from start to exit, its peak memory, and summarising repeated runs.

Every system is measured the same way: wall-clock time from just before the
process is started to just after it has exited, because that is what a
scheduled run costs (the compute is awake from the first connection to the
last). Peak RSS is the child's own high-water mark (``VmHWM`` in
``/proc/<pid>/status``), read every few milliseconds while it runs. Neither
``RUSAGE_CHILDREN`` (the largest child so far) nor the child's own
``ru_maxrss`` from ``wait4`` will do: Linux carries the high-water mark across
``exec``, so a child forked from this process reports at least this process's
size at the fork.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@dataclass(frozen=True)
class ProcessRun:
    """One finished process: how long it took, how much memory it held at most, what it said."""

    seconds: float
    max_rss_mb: float
    returncode: int
    stdout: str
    stderr: str

    def check(self, what: str) -> ProcessRun:
        if self.returncode != 0:
            tail = (self.stderr or self.stdout).strip()[-1500:]
            raise BenchError(f"{what} exited with {self.returncode}:\n{tail}")
        return self


def compile_sources() -> None:
    """Write the bytecode of drain and of the bench's handlers, as an installed wheel has it.

    pip compiles a package when it installs it, and psycopg and the peers are
    measured that way. A checkout has no bytecode until Python writes some, and
    with ``PYTHONDONTWRITEBYTECODE`` set it never does: every start would then
    compile drain's modules from source again (about 30 ms), a cost no installed
    drain pays.
    """
    for package in ("drain", "bench"):
        compileall.compile_dir(REPO / package, quiet=1)


class BenchError(Exception):
    """A system failed to run, or left jobs undone: the figure would be meaningless."""


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a measured process: no DSN or libpq target leaking in."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DRAIN_", "PG", "PROCRASTINATE_", "PGQUEUER_"))
        and key != "DATABASE_URL"
    }
    environment["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(REPO), os.environ.get("PYTHONPATH", "")) if part
    )
    environment.update(extra or {})
    return environment


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    timeout: float = 900.0,
) -> ProcessRun:
    """Start ``argv``, wait for it to exit, and return its wall time and peak RSS.

    Output goes to temporary files rather than pipes so nothing in this process
    has to read while the child runs; ``wait4`` then reaps the child and gives
    its own ``ru_maxrss`` (kilobytes on Linux).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=dict(env) if env is not None else clean_environment(),
            cwd=cwd,
        )
        watcher = _PeakMemory(process.pid)
        killer = threading.Timer(timeout, process.kill)
        killer.start()
        try:
            _, status, _ = os.wait4(process.pid, 0)
        finally:
            seconds = time.perf_counter() - started
            killer.cancel()
            watcher.stop()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ProcessRun(
            seconds=seconds,
            max_rss_mb=watcher.peak_kb / 1024,
            returncode=process.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
        )


class _PeakMemory:
    """Follows a running process's ``VmHWM`` until it exits (the kernel keeps it monotonic).

    A zombie no longer has one, so the last reading is taken at most
    ``INTERVAL`` before the exit; what a process allocates only in its last
    milliseconds is missed, which for a drainer is its shutdown, not its peak.
    """

    INTERVAL = 0.005

    def __init__(self, pid: int) -> None:
        self.path = f"/proc/{pid}/status"
        self.peak_kb = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _read(self) -> int | None:
        try:
            with open(self.path, "rb") as status:
                for line in status:
                    if line.startswith(b"VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def _follow(self) -> None:
        while True:
            kilobytes = self._read()
            if kilobytes is not None:
                self.peak_kb = max(self.peak_kb, kilobytes)
            if self._done.wait(self.INTERVAL):
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


@dataclass
class Series:
    """Repeated measurements of one figure; the median is what the tables show."""

    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else 0.0

    @property
    def minimum(self) -> float:
        return min(self.values) if self.values else 0.0

    @property
    def maximum(self) -> float:
        return max(self.values) if self.values else 0.0

    def as_dict(self, digits: int = 3) -> dict[str, Any]:
        return {
            "median": round(self.median, digits),
            "min": round(self.minimum, digits),
            "max": round(self.maximum, digits),
            "values": [round(value, digits) for value in self.values],
        }


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0
