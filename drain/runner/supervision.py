"""drain's side of the program supervisor: each ``--exec`` program's deadline, fed to
a process that is not frozen, cut off or killed with drain (:mod:`.supervisor`).

A program may run only while its job's lease holds. drain renews leases (at a
third of a lease) and stops the programs of attempts it lost, but a drain that
is frozen or blocked on a dead link cannot, and a killed one least of all. So
each program's process group goes to the run's supervisor as soon as it is
spawned, with a deadline taken from its job's lease:

* the lease is counted from when the statement that wrote it was *sent* (the
  claim's send time, the renewal's), never from when it came back, so the
  deadline is never later than the lease on the server;
* SIGKILL falls :data:`STOP_MARGIN` (at most a twelfth of the lease) before the
  lease can expire, SIGTERM the kill delay (2 s, at most a quarter of the lease)
  before that: with the default 5 min lease, SIGTERM 297.5 s and SIGKILL 299.5 s
  after the last renewal was sent, 2/3 and 11/12 of the lease with a 3 s one.
  Renewals go out between a quarter and a third of a lease, so only a run whose
  renewals have failed for two thirds of a lease, frozen, cut off or dead, ever
  gets there;
* each renewal that succeeds moves the deadline on; an attempt the lease keeper
  finds no longer ours, or cancelled, is stopped at once (SIGTERM, SIGKILL after
  the kill delay); a group is forgotten once its program is gone, before its
  leader is reaped (so its id cannot belong to anyone else yet).

The supervisor starts with the run's first program, not before: a run that finds
its queue empty pays nothing. Measured on the 2-core test machine (Python 3.11):
starting it costs drain 4 ms (the ``fork``/``exec``), while its own start, 30 ms
of CPU, overlaps the first program's; it holds 10 MB resident (13 MB watching
10,000 programs). Each job then costs 33 microseconds: three short writes to a
pipe (watched, renewed, forgotten), against about 9 ms for the fork and exec of
``/bin/sh``; 400 ``cat >/dev/null`` jobs took 3.7 to 4.4 s with it and 3.7 to
3.9 s without (noise).
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from drain.core.jobs import Job, Owned
from drain.runner.exec_handler import StopReason
from drain.runner.programs import KILL_DELAY

log = logging.getLogger("drain")

SUPERVISOR = Path(__file__).with_name("supervisor.py")
# SIGKILL lands this long before the lease could expire (at most a twelfth of it):
# time for the group to leave after SIGKILL, and for the supervisor to wake on a
# loaded machine.
STOP_MARGIN = 0.5
MARGIN_SHARE = 1 / 12
# SIGTERM comes at most this share of a lease before SIGKILL.
KILL_SHARE = 1 / 4
# How long close() waits for the supervisor to leave (it has nothing left to
# stop unless a program survived SIGKILL).
CLOSE_WAIT = 1.0


def deadlines(leased_at: float, lease: float, kill_delay: float) -> tuple[float, float]:
    """``(term_at, kill_at)`` of a program whose lease was last written at ``leased_at``."""
    kill_at = leased_at + lease - min(STOP_MARGIN, lease * MARGIN_SHARE)
    return kill_at - min(kill_delay, lease * KILL_SHARE), kill_at


@dataclass
class _Watched:
    """One program's group and deadline, on the run's clock."""

    group: int
    term_at: float
    kill_at: float
    reason: StopReason | None = None


class Supervision:
    """The run's supervisor and the programs it watches, by attempt.

    ``lease_written(job_id)`` is when the job's lease was last written on
    ``clock`` (None once the attempt is no longer the run's). Called from the
    workers (a program started or gone) and the lease keeper (renewed, lost,
    cancelled); one lock keeps the table and the pipe's lines in order.
    """

    def __init__(
        self,
        lease: float,
        lease_written: Callable[[int], float | None],
        clock: Callable[[], float],
        kill_delay: float = KILL_DELAY,
    ) -> None:
        self.lease = lease
        self.kill_delay = kill_delay
        self._lease_written = lease_written
        self._clock = clock
        self._lock = threading.Lock()
        self._watched: dict[tuple[int, int], _Watched] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._closed = False

    # -- ProgramWatch: the workers ---------------------------------------------------

    def started(self, job: Job, group: int) -> None:
        leased_at = self._lease_written(job.id)
        if leased_at is None:  # lost before its program could start: stop it at once
            now = self._clock()
            watched = _Watched(group, now, now + self.kill_delay, "lost")
        else:
            watched = _Watched(group, *deadlines(leased_at, self.lease, self.kill_delay))
        with self._lock:
            self._watched[(job.id, job.attempt)] = watched
            self._send([watched])

    def ended(self, job: Job, group: int) -> StopReason | None:
        with self._lock:
            watched = self._watched.pop((job.id, job.attempt), None)
            if watched is None:
                return None
            self._send_lines([f"{watched.group} -\n"])
        if watched.reason is None and self._clock() >= watched.term_at:
            return "deadline"
        return watched.reason

    # -- the lease keeper -------------------------------------------------------------

    def renewed(self, jobs: Iterable[Owned], when: float) -> None:
        """Leases written at ``when``: their programs' deadlines move on."""
        term_at, kill_at = deadlines(when, self.lease, self.kill_delay)
        with self._lock:
            moved = []
            for job in jobs:
                watched = self._watched.get((job.id, job.attempt))
                if watched is not None and watched.reason is None:
                    watched.term_at, watched.kill_at = term_at, kill_at
                    moved.append(watched)
            self._send(moved)

    def stop(self, jobs: Iterable[Owned], reason: StopReason) -> None:
        """Stop these attempts' programs now: SIGTERM, SIGKILL after the kill delay."""
        now = self._clock()
        with self._lock:
            stopping = []
            for job in jobs:
                watched = self._watched.get((job.id, job.attempt))
                if watched is not None and watched.reason is None:
                    watched.reason = reason
                    watched.term_at = now
                    watched.kill_at = min(watched.kill_at, now + self.kill_delay)
                    stopping.append(watched)
            self._send(stopping)

    # -- the pipe ---------------------------------------------------------------------

    def close(self) -> None:
        """End the supervisor: it stops whatever is left (nothing, after a run's stop).
        Programs that end afterwards are not followed: none starts by then."""
        with self._lock:
            process, self._process = self._process, None
            self._closed = True
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(self.kill_delay + CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            log.warning("the program supervisor (pid %d) is still stopping programs", process.pid)

    def _send(self, watched: Iterable[_Watched]) -> None:
        self._send_lines(self._lines(watched))

    def _lines(self, watched: Iterable[_Watched]) -> list[str]:
        """The deadlines as lines on CLOCK_MONOTONIC (the run's clock may be another)."""
        offset = time.monotonic() - self._clock()
        return [f"{w.group} {w.term_at + offset!r} {w.kill_at + offset!r}\n" for w in watched]

    def _send_lines(self, lines: Iterable[str]) -> None:
        """Write to the supervisor (held under the lock), started on first use.

        One that died (killed by hand, say) is started again and told every
        deadline. Nothing is raised: the caller may have a program just spawned
        that must still be waited for; a supervisor that cannot be started at
        all is a warning, and programs then depend on drain alone.
        """
        data = "".join(lines).encode()
        if not data or self._closed:
            return
        try:
            self._write(data)
            return
        except OSError:
            pass
        if self._process is not None:
            _let_go(self._process)
            self._process = None
            log.warning("the program supervisor is gone; starting another")
        try:
            self._write("".join(self._lines(self._watched.values())).encode())
        except OSError as exc:
            log.warning("could not start the program supervisor: %s", exc)
            self._process = None

    def _write(self, data: bytes) -> None:
        if self._process is None:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SUPERVISOR), repr(self.kill_delay)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                env={},  # no credential of drain's reaches it
                bufsize=0,
                start_new_session=True,
            )
        stdin = self._process.stdin
        assert stdin is not None
        left = memoryview(data)
        while left:
            left = left[stdin.write(left) or 0 :]


def _let_go(process: subprocess.Popen[bytes]) -> None:
    """Close the pipe to a supervisor that is gone, and reap it if it has left."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    process.poll()
