"""``--exec`` programs: one process group per job, stopped whole, its pipes served by a thread.

A program is whatever ``/bin/sh -c CMD`` starts, and whatever that starts in turn.
Stopping ``/bin/sh`` alone left its children running while the job's lease was
cut and another run started the job again; so each program leads a session (and
process group) of its own, and drain treats the group as the program:

* a signal to the terminal's process group (Ctrl-C, ``timeout``, systemd's default
  ``KillMode``) reaches drain and not the programs; drain then stops in order and
  gives them the grace like any other handler;
* a program is stopped as its whole group: SIGTERM, then SIGKILL after
  :data:`KILL_DELAY`, and drain waits until no process of the group runs, so the
  runner cuts a job's lease only once nothing started for it is left;
* a program's outcome is its leader's exit status. Once the leader exits, what it
  left in its group (``sleep 30 & exit 0``) is stopped the same way; no pipe a
  leftover holds open keeps the job waiting.

A program that calls ``setsid`` itself (or a shell with job control, which gives
each job a group of its own) leaves the group, and drain can neither see nor stop
what it started.

The job's side (the command, its environment, what its exit status makes of the
job) is :mod:`~drain.runner.exec_handler`; its output's, :mod:`~drain.runner.program_output`.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, cast

from drain.runner.program_output import (
    EXEC_STDERR_TAIL,
    TAIL_BYTES,
    Lines,
    Tail,
    feeder,
    reader,
    widen,
)

log = logging.getLogger("drain")

# SIGTERM first, then this long for the group to leave before SIGKILL: long enough
# for a program to flush and exit, short next to the grace it already had.
KILL_DELAY = 2.0
# After SIGKILL a process leaves at once, unless it sleeps in the kernel (a dead
# NFS server, say); past this the runner stops waiting and leaves its job to the lease.
GONE_WAIT = 5.0
POLL = 0.02
SELECT_TIMEOUT = 0.2
# Once the group is gone, at most this many more reads empty the pipes (a
# process that left the group may go on writing to them).
FINAL_READS = 64


def group_runs(group: int) -> bool:
    """Whether any process of the process group ``group`` still runs.

    ``killpg(group, 0)`` counts zombies, and the program's leader stays one on
    purpose until its group is gone (so the group's id cannot be handed to
    another process meanwhile), as may leftovers whose new parent never reaps
    them; so where ``/proc`` tells, zombies are left out. The scan costs about
    2 ms with 150 processes on the machine, once per job, next to the fork and
    exec of a shell.
    """
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member that changed user: still there
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(group).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


class Program:
    """One running program: its process group, its pipes and the thread that serves them."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        payload: bytes,
        *,
        echo: Callable[[str], None],
        kill_delay: float = KILL_DELAY,
    ) -> None:
        self.kill_delay = kill_delay
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            bufsize=0,
            start_new_session=True,
        )
        self.group = self.process.pid
        self._lock = threading.Lock()
        self._reaped = False
        self._stop = threading.Event()
        self._stderr = Tail(TAIL_BYTES)
        self._stdout = Lines(echo)
        self._pump = threading.Thread(
            target=self._serve, args=(payload,), name=f"drain-exec-{self.group}", daemon=True
        )
        self._pump.start()

    def wait(self, on_gone: Callable[[], None] | None = None) -> int:
        """Wait for the leader to exit, stop what it left in its group, return its status.

        The leader is waited for without being reaped (``WNOWAIT``): as a zombie it
        keeps its pid, which is the group's id, from being reused until the group
        is gone and no signal of ours can reach a stranger. ``on_gone`` is called
        then, before the leader is reaped, so whoever else signals the group (the
        supervisor) forgets it while its id is still the group's.
        """
        os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOWAIT)
        if stop_groups([self], self.kill_delay):
            log.warning("processes left by program %d survived SIGKILL", self.group)
        if on_gone is not None:
            on_gone()
        with self._lock:
            self._reaped = True
            code = self.process.wait()
        self._stop.set()
        self._pump.join()
        return code

    def signal(self, signum: int) -> bool:
        """Send ``signum`` to the whole group; False once nothing of it is left to signal."""
        with self._lock:
            if self._reaped:
                return False
            try:
                os.killpg(self.group, signum)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
            return True

    def runs(self) -> bool:
        with self._lock:
            return not self._reaped and group_runs(self.group)

    def stderr_tail(self) -> str:
        return self._stderr.text(EXEC_STDERR_TAIL)

    def _serve(self, payload: bytes) -> None:
        """Feed stdin and read stdout and stderr until all are closed or the group is gone."""
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        streams = (process.stdin, process.stdout, process.stderr)
        try:
            with selectors.DefaultSelector() as selector:
                for stream in streams:
                    os.set_blocking(stream.fileno(), False)
                widen(process.stdout)
                for stream, into in (
                    (process.stdout, self._stdout),
                    (process.stderr, self._stderr),
                ):
                    selector.register(stream, selectors.EVENT_READ, reader(stream, into.add))
                if payload:
                    feed = feeder(process.stdin, memoryview(payload))
                    selector.register(process.stdin, selectors.EVENT_WRITE, feed)
                else:
                    process.stdin.close()
                final_reads = FINAL_READS
                while selector.get_map():
                    stopping = self._stop.is_set()
                    ready = selector.select(0 if stopping else SELECT_TIMEOUT)
                    if stopping:
                        final_reads -= 1
                        if not ready or final_reads < 0:
                            return
                    for key, _ in ready:
                        if not key.data():
                            selector.unregister(key.fileobj)
                            cast(IO[bytes], key.fileobj).close()
        finally:
            self._stdout.close()
            for stream in streams:
                stream.close()


def stop_groups(programs: Sequence[Program], kill_delay: float) -> list[Program]:
    """Stop programs as whole groups, all at once; return those still running after SIGKILL.

    SIGTERM to every group, up to ``kill_delay`` for them to leave, SIGKILL to
    what is left, then up to :data:`GONE_WAIT` until no process of any runs.
    """
    left = [program for program in programs if program.runs() and program.signal(signal.SIGTERM)]
    left = _wait_gone(left, kill_delay)
    left = [program for program in left if program.signal(signal.SIGKILL)]
    return _wait_gone(left, GONE_WAIT)


def _wait_gone(programs: list[Program], timeout: float) -> list[Program]:
    deadline = time.monotonic() + timeout
    while True:
        programs = [program for program in programs if program.runs()]
        if not programs or time.monotonic() >= deadline:
            return programs
        time.sleep(POLL)
