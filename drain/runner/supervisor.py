"""The supervisor: a small process that keeps ``--exec`` programs' deadlines for drain.

drain stops a program whose lease it lost, but drain cannot act while it is
frozen (SIGSTOP, a paused VM), cut off in the middle of a statement, or dead
(SIGKILL, the OOM killer); its programs, in sessions of their own, went on
working while another run reaped their jobs and started them again (issue 23:
overlaps of 2.6 to 6 s). So one supervisor per run, in a session of its own (a
signal to drain's pid or process group does not reach it), holds every
program's deadline and stops the program's process group when it passes:
SIGTERM at ``term_at``, SIGKILL at ``kill_at``, both on CLOCK_MONOTONIC, which
every process of the host shares. When drain's end of the pipe closes (drain
exited or was killed) it stops every group it holds at once: SIGTERM, then
SIGKILL after the kill delay, or sooner when a deadline says so. Its only input
is that pipe, one line per message from :mod:`drain.runner.supervision`:

* ``GROUP TERM_AT KILL_AT``: watch the group (or move its deadline);
* ``GROUP -``: forget it (its program is gone).

It is on the path of every run that uses ``--exec``, so it starts as
``python -I -S`` of this file (no site, no drain, nothing but these standard
modules: 30 ms of one core, beside the run's first program, and 10 MB; the
figures are in :mod:`drain.runner.supervision`) and then only sleeps in
``select`` until a deadline or a line. It writes
nothing unless it fails, and it gets no environment: no credential of drain's
reaches it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

READ_SIZE = 65536
# How often a group sent SIGTERM is looked at, to forget it once it has left.
POLL = 0.1


class Groups:
    """The groups being watched: for each, when to send SIGTERM and when SIGKILL."""

    def __init__(self) -> None:
        self.deadlines: dict[int, tuple[float, float]] = {}
        self.termed: set[int] = set()

    def take(self, line: bytes) -> None:
        """Apply one line from drain (a malformed line is a bug of drain's: skipped)."""
        words = line.split()
        try:
            group = int(words[0])
            if words[1:] == [b"-"]:
                self.forget(group)
            else:
                self.deadlines[group] = (float(words[1]), float(words[2]))
                self.termed.discard(group)
        except (IndexError, ValueError):
            return

    def closing(self, now: float, kill_delay: float) -> None:
        """drain is gone: every group gets SIGTERM now and SIGKILL after the kill delay."""
        self.deadlines = {
            group: (now, min(kill_at, now + kill_delay))
            for group, (_, kill_at) in self.deadlines.items()
        }

    def act(self, now: float) -> float | None:
        """Signal what is due; return when to look next (None: nothing left to watch).

        A group sent SIGTERM is looked at every :data:`POLL` until SIGKILL is due,
        and forgotten once nothing of it is left, so a supervisor whose drain is
        gone leaves as soon as its programs have.
        """
        due: list[float] = []
        for group, (term_at, kill_at) in list(self.deadlines.items()):
            if now >= kill_at:
                _signal(group, signal.SIGKILL)
                self.forget(group)
                continue
            if now >= term_at:
                signum = 0 if group in self.termed else signal.SIGTERM
                if not _signal(group, signum):
                    self.forget(group)  # nothing of it is left
                    continue
                self.termed.add(group)
                due.append(min(kill_at, now + POLL))
            else:
                due.append(term_at)
        return min(due) if due else None

    def forget(self, group: int) -> None:
        self.deadlines.pop(group, None)
        self.termed.discard(group)


def _signal(group: int, signum: int) -> bool:
    """Signal a whole group; False once no process of it is left."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a member that changed user: the others got it
    return True


def serve(fd: int, kill_delay: float) -> None:
    """Keep the deadlines of the groups ``fd`` names until drain's end closes, then stop
    every group left: SIGTERM now, SIGKILL after ``kill_delay`` (or its own deadline)."""
    groups = Groups()
    pending = b""
    while True:
        next_due = groups.act(time.monotonic())
        timeout = None if next_due is None else max(0.0, next_due - time.monotonic())
        if not select.select([fd], [], [], timeout)[0]:
            continue
        data = os.read(fd, READ_SIZE)
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            groups.take(line)
    groups.closing(time.monotonic(), kill_delay)
    while (next_due := groups.act(time.monotonic())) is not None:
        time.sleep(max(0.0, next_due - time.monotonic()))


def main(argv: list[str]) -> int:
    """``supervisor.py KILL_DELAY``: serve standard input until drain is gone."""
    try:
        kill_delay = float(argv[1])
    except (IndexError, ValueError):
        sys.stderr.write("drain: error: the supervisor takes one argument, the kill delay\n")
        return 2
    try:
        serve(sys.stdin.fileno(), kill_delay)
    except Exception as exc:  # a bug: one line, and the programs stop with drain's own stop
        sys.stderr.write(f"drain: error: the program supervisor failed: {exc!r}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
