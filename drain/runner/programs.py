"""``--exec`` programs: one process group per job, stopped whole, output read to a bounded tail.

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

Output: one thread per program feeds the payload to stdin and reads stdout and
stderr through non-blocking pipes, so a program that does not read its stdin, or
writes hundreds of megabytes, never blocks drain or grows its memory. Stdout
lines go to drain's stderr, redacted, each cut at :data:`LINE_LIMIT` bytes, a
block at a time: one write per read, masked line by line only when the block
may hold something a mask applies to (:func:`mask_block`). Forwarding line by
line (a Python loop, a redaction and a flush per line) moved 5 MB/s, so a program
writing 1 GiB of 45-byte lines outlived its budget on every attempt. stderr is
kept only as its last :data:`TAIL_BYTES` bytes, for the error text of a failed
attempt.

Environment: drain's own, minus its database credentials (see
:func:`program_environment`), plus the job's ``DRAIN_JOB_*`` variables.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import IO, Literal, Protocol, cast

from drain.core import credentials
from drain.core.errors import UsageError
from drain.core.jobs import Job
from drain.core.redact import Redactor, secrets_in

log = logging.getLogger("drain")

SHELL = "/bin/sh"
# SIGTERM first, then this long for the group to leave before SIGKILL: long enough
# for a program to flush and exit, short next to the grace it already had.
KILL_DELAY = 2.0
# After SIGKILL a process leaves at once, unless it sleeps in the kernel (a dead
# NFS server, say); past this the runner stops waiting and leaves its job to the lease.
GONE_WAIT = 5.0
# The end of stderr kept for a failed attempt's error, in bytes read and in
# characters shown.
TAIL_BYTES = 8192
EXEC_STDERR_TAIL = 1000
# A stdout line longer than this is shown cut.
LINE_LIMIT = 8192
# Reads take up to this much; the pipes are widened to it (Linux, F_SETPIPE_SZ), so a
# program writing fast is read in few, large blocks.
READ_CHUNK = 1 << 20
WRITE_CHUNK = 65536
POLL = 0.02
SELECT_TIMEOUT = 0.2
# Once the group is gone, at most this many more reads empty the pipes (a
# process that left the group may go on writing to them).
FINAL_READS = 64
CUT = " ... (cut)"

CREDENTIAL_VARIABLES = (
    frozenset({"DRAIN_DSN", "DATABASE_URL", "PGPASSWORD", "PGPASSFILE"}) | credentials.VARIABLES
)
"""Variables a program does not inherit: drain's DSN, libpq's password and password
file, and the endpoints and tokens of drain's own metrics, traces and check-ins
(:data:`drain.core.credentials.VARIABLES`: ``SENTRY_DSN``, ``OTEL_EXPORTER_OTLP_HEADERS``
...). Other ``PG*`` variables (host, user, database, TLS mode) carry no secret and
stay."""
# A password shorter than this is not looked for in other variables' values: it
# would strip unrelated ones.
MIN_SECRET_MATCH = 4


def check_variable_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names given to ``--exec-keep-env``, refused unless each is a variable's name.

    A name as the shell writes one (``[A-Za-z_][A-Za-z0-9_]*``): ``1X`` or an empty
    name (an unset ``$VAR``, a stray comma) keeps nothing, so the program would
    run without the credential the user meant it to have.
    """
    checked = tuple(names)
    for name in checked:
        # An ASCII identifier is exactly [A-Za-z_][A-Za-z0-9_]*.
        if not (name.isascii() and name.isidentifier()):
            raise UsageError(
                f"--exec-keep-env takes variable names (letters, digits and _, not "
                f"starting with a digit), got {name!r}"
            )
    return checked


def program_environment(
    environ: Mapping[str, str], *, keep: Collection[str] = (), secrets: Sequence[str] = ()
) -> dict[str, str]:
    """drain's environment minus its credentials, but for the variables kept.

    A program is the user's code, not drain's: it gets no way into drain's database,
    nor drain's tokens for metrics, traces and check-ins, unless the user hands it
    one on purpose (``--exec-keep-env``). Removed: the :data:`CREDENTIAL_VARIABLES`,
    and any variable whose value holds the run's password
    (``APP_DB_URL=postgresql://app:PASSWORD@...``) or one of those tokens. A program
    still runs as drain's user, so a default ``~/.pgpass`` stays readable to it.
    """
    findable = [
        secret
        for secret in (*secrets, *credentials.secrets(environ))
        if len(secret) >= MIN_SECRET_MATCH
    ]
    return {
        name: value
        for name, value in environ.items()
        if name in keep
        or not (name in CREDENTIAL_VARIABLES or any(secret in value for secret in findable))
    }


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


class _Tail:
    """The last ``size`` bytes of a stream, whatever its length."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data = bytearray()

    def add(self, data: bytes) -> None:
        self._data += data
        if len(self._data) > 2 * self.size:
            del self._data[: -self.size]

    def text(self, characters: int) -> str:
        return bytes(self._data[-self.size :]).decode(errors="replace").strip()[-characters:]


class _Lines:
    """Cuts a stream into lines for ``emit``, holding at most :data:`LINE_LIMIT` bytes.

    ``emit`` gets every line ended in a read at once, joined by newlines (without
    the last one): one call per read, never one per line.
    """

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._line = bytearray()  # the line begun and not ended, cut to LINE_LIMIT
        self._cut = False

    def add(self, data: bytes) -> None:
        last = data.rfind(b"\n")
        if last < 0:
            self._extend(data)
            return
        lines: list[bytes] = []
        start = 0
        if self._line or self._cut:  # the first line ends the one begun earlier
            start = data.find(b"\n") + 1
            self._extend(data[: start - 1])
            lines.append(self._take())
        if start <= last:
            if _short_lines(data, start, last):
                lines.append(data[start:last])  # the common case: nothing to cut
            else:
                lines += (_cut(line) for line in data[start:last].split(b"\n"))
        self._extend(data[last + 1 :])
        block = lines[0] if len(lines) == 1 else b"\n".join(lines)
        self._emit(block.decode(errors="replace"))

    def close(self) -> None:
        if self._line or self._cut:
            self._emit(self._take().decode(errors="replace"))

    def _extend(self, piece: bytes) -> None:
        room = LINE_LIMIT - len(self._line)
        self._line += piece[:room]
        self._cut = self._cut or len(piece) > room

    def _take(self) -> bytes:
        line = bytes(self._line) + (CUT.encode() if self._cut else b"")
        self._line = bytearray()
        self._cut = False
        return line


def _short_lines(data: bytes, start: int, end: int) -> bool:
    """True when no line of ``data[start:end]`` can be longer than :data:`LINE_LIMIT`.

    Any run of more than LINE_LIMIT bytes without a newline holds a whole window of
    half that, aligned on a multiple of it: one ``find`` per window (256 per MiB,
    each stopping at the first newline) proves there is none, where splitting into
    lines built an object per line. False means "maybe": the caller cuts exactly.
    """
    window = LINE_LIMIT // 2
    return all(data.find(b"\n", at, at + window) >= 0 for at in range(start, end - window, window))


def _cut(line: bytes) -> bytes:
    return line if len(line) <= LINE_LIMIT else line[:LINE_LIMIT] + CUT.encode()


def mask_block(block: str, redact: Callable[[str], str], secrets: Sequence[str]) -> str:
    """Lines of a program's output, each masked by ``redact`` as if alone.

    The masks are built for one line (a quoted password may run to its end), so a
    block that may hold something to mask is masked line by line; one that
    cannot (:func:`_may_need_mask`) is left whole.
    """
    if not _may_need_mask(block, secrets):
        return block
    return "\n".join(redact(line) for line in block.split("\n"))


def _may_need_mask(block: str, secrets: Sequence[str]) -> bool:
    """False only when no mask of drain.core.redact can apply to ``block``.

    Each needs a known secret, ``://`` (a URL's password) or ``password`` in any
    case (a keyword or a SQL literal). Single characters are looked for first:
    that search runs at memory speed, where a substring search over a block of
    a MiB took up to 2 ms. ``w`` has no other case under ``re.IGNORECASE``; a
    block with other letters than ASCII ones (the long s, U+017F, matches ``s``) is
    masked line by line.
    """
    if any(secret in block for secret in secrets):
        return True
    if ":" in block and "://" in block:
        return True
    if "w" not in block and "W" not in block:
        return False
    return not block.isascii() or "password" in block.lower()


def _widen(stream: IO[bytes]) -> None:
    """Let the pipe hold :data:`READ_CHUNK` bytes where the kernel allows it."""
    # not Linux (AttributeError), or above /proc/sys/fs/pipe-max-size (OSError)
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, READ_CHUNK)


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
        self._stderr = _Tail(TAIL_BYTES)
        self._stdout = _Lines(echo)
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
                _widen(process.stdout)
                for stream, into in (
                    (process.stdout, self._stdout),
                    (process.stderr, self._stderr),
                ):
                    selector.register(stream, selectors.EVENT_READ, _reader(stream, into.add))
                if payload:
                    feed = _feeder(process.stdin, memoryview(payload))
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


def _reader(stream: IO[bytes], into: Callable[[bytes], None]) -> Callable[[], bool]:
    """Reads what the pipe holds into ``into``; False at end of file."""
    fd = stream.fileno()

    def read() -> bool:
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return True
        into(data)
        return bool(data)

    return read


def _feeder(stream: IO[bytes], payload: memoryview) -> Callable[[], bool]:
    """Writes what the pipe takes of the payload; False once it is all written or
    the program closed its stdin without reading it all."""
    fd = stream.fileno()
    pending = payload

    def write() -> bool:
        nonlocal pending
        try:
            pending = pending[os.write(fd, pending[:WRITE_CHUNK]) :]
        except BlockingIOError:
            pass
        except BrokenPipeError:
            return False
        return bool(pending)

    return write


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


_echo_lock = threading.Lock()


def _echo(lines: str) -> None:
    """A program's stdout lines, on drain's stderr (stdout is the summary's, with --json)."""
    with _echo_lock:
        try:
            sys.stderr.write(lines + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # drain's stderr is gone: the program's output with it
            pass


StopReason = Literal["lost", "cancel", "deadline"]
"""Why drain stopped a program: its attempt was no longer ours, ``drain cancel``
asked for its job, or its lease could not be renewed in time."""

STOPPED_BECAUSE: dict[StopReason, str] = {
    "lost": "its job was no longer this run's",
    "cancel": "its job was cancelled",
    "deadline": "its lease could not be renewed in time",
}

# What /bin/sh exits with when the command cannot be executed (126) or is not
# found (127).
CANNOT_RUN_STATUSES = frozenset({126, 127})


class ProgramWatch(Protocol):
    """Who keeps each program's deadline while it runs (the run's supervisor,
    :mod:`drain.runner.supervision`)."""

    def started(self, job: Job, group: int) -> None:
        """The program of ``job`` leads process group ``group`` from now on."""

    def ended(self, job: Job, group: int) -> StopReason | None:
        """Its program is gone; why drain stopped it, if drain did."""


class ExecHandler:
    """Runs a program per job: the payload as JSON on stdin, exit 0 means done.

    The command runs through ``/bin/sh -c`` so users may write pipes and
    redirections; the job's id, queue and attempt come as ``DRAIN_JOB_*``
    variables. A non-zero exit fails the job with the tail of the program's stderr.
    ``keep_env`` names credential variables the program may have after all;
    ``dsn`` is the run's, whose password is kept out of the program's environment
    and masked in its output.

    ``watch``, set by the run, is told of each program as soon as it is spawned
    and when it is gone. An exit status of 126 or 127 (the shell could not run
    the command) before any program of this handler succeeded raises
    :class:`ExecCannotRun`: a typo in ``--exec`` would otherwise fail every job
    until its attempts ran out, in runs that all exit 0.
    """

    watch: ProgramWatch | None = None

    def __init__(
        self,
        command: str,
        *,
        keep_env: Iterable[str] = (),
        dsn: str | None = None,
        kill_delay: float = KILL_DELAY,
    ) -> None:
        self.command = command
        self.keep_env = check_variable_names(keep_env)
        self.kill_delay = kill_delay
        self._secrets = secrets_in(dsn)
        self._redact = Redactor(dsn)
        self._programs: dict[Program, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._succeeded = False

    def __call__(self, job: Job) -> None:
        env = program_environment(os.environ, keep=self.keep_env, secrets=self._secrets)
        env.update(
            DRAIN_JOB_ID=str(job.id),
            DRAIN_JOB_QUEUE=job.queue,
            DRAIN_JOB_ATTEMPT=str(job.attempt),
            DRAIN_JOB_MAX_ATTEMPTS=str(job.max_attempts),
        )
        payload = json.dumps(job.payload, separators=(",", ":")).encode()
        with self._lock:
            # Checked and registered under one lock: a program never starts after
            # terminate_all looked, where nothing would stop it.
            if self._closed:
                raise ExecNotStarted("not started: the run is stopping")
            program = Program(
                [SHELL, "-c", self.command],
                env,
                payload,
                echo=self._forward,
                kill_delay=self.kill_delay,
            )
            self._programs[program] = job.id
            watch = self.watch
            if watch is not None:
                # The program runs unsupervised from its fork until this line
                # reaches the supervisor's pipe: one write, microseconds later.
                watch.started(job, program.group)
        stopped: StopReason | None = None

        def gone() -> None:
            nonlocal stopped
            if watch is not None:
                stopped = watch.ended(job, program.group)

        try:
            code = program.wait(on_gone=gone)
        finally:
            with self._lock:
                self._programs.pop(program, None)
        if code == 0:
            self._succeeded = True
            return
        if code in CANNOT_RUN_STATUSES and not self._succeeded and stopped is None:
            raise ExecCannotRun(self.command, code, program.stderr_tail())
        raise ExecFailed(code, program.stderr_tail(), stopped=stopped)

    def _forward(self, block: str) -> None:
        """A program's stdout lines to drain's stderr, masked (see :func:`mask_block`)."""
        secrets = [*self._secrets, *credentials.secrets()]
        _echo(mask_block(block, self._redact, secrets))

    def terminate_all(self) -> set[int]:
        """Stop every program still running, as whole groups, and start no more.

        Returns once every group is gone, or after SIGKILL and :data:`GONE_WAIT`;
        the ids of the jobs whose programs would not die are returned, so the runner
        leaves their leases alone rather than let another run start them again.
        """
        with self._lock:
            self._closed = True
            programs = dict(self._programs)
        survivors = stop_groups(list(programs), self.kill_delay)
        for program in survivors:
            log.warning("program %d of job %d survived SIGKILL", program.group, programs[program])
        return {programs[program] for program in survivors}


class ExecFailed(Exception):
    """The program exited non-zero (or was killed by a signal); ``stopped`` says why
    drain stopped it, when drain did."""

    def __init__(
        self, returncode: int, stderr_tail: str, *, stopped: StopReason | None = None
    ) -> None:
        detail = f": {stderr_tail}" if stderr_tail else ""
        if returncode < 0:
            status = f"killed by signal {-returncode} ({_signal_name(-returncode)})"
        else:
            status = f"exit status {returncode}"
        if stopped is not None:
            status = f"stopped by drain ({STOPPED_BECAUSE[stopped]}): {status}"
        super().__init__(status + detail)
        self.returncode = returncode
        self.stopped = stopped


class ExecCannotRun(ExecFailed):
    """The shell could not run the command (exit status 126 or 127) before any
    program of it succeeded: the command is wrong, not the job."""

    def __init__(self, command: str, returncode: int, stderr_tail: str) -> None:
        super().__init__(returncode, stderr_tail)
        self.command = command
        self.reason = f"--exec {command!r} cannot run ({self})"


class ExecNotStarted(Exception):
    """The run began to stop before the program could start."""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
