"""What an ``--exec`` program writes: stdout forwarded in blocks, stderr kept as a tail.

One thread per program (:class:`~drain.runner.programs.Program`) feeds the
payload to stdin and reads stdout and stderr through non-blocking pipes, with
the readers and the feeder made here, so a program that does not read its
stdin, or writes hundreds of megabytes, never blocks drain or grows its memory.

Stdout lines go to drain's stderr, redacted, each cut at :data:`LINE_LIMIT` bytes, a
block at a time: one write per read, masked line by line only when the block
may hold something a mask applies to (:func:`mask_block`). Forwarding line by
line (a Python loop, a redaction and a flush per line) moved 5 MB/s, so a program
writing 1 GiB of 45-byte lines outlived its budget on every attempt. stderr is
kept only as its last :data:`TAIL_BYTES` bytes, for the error text of a failed
attempt.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO

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
CUT = " ... (cut)"


class Tail:
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


class Lines:
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


def widen(stream: IO[bytes]) -> None:
    """Let the pipe hold :data:`READ_CHUNK` bytes where the kernel allows it."""
    # not Linux (AttributeError), or above /proc/sys/fs/pipe-max-size (OSError)
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, READ_CHUNK)


def reader(stream: IO[bytes], into: Callable[[bytes], None]) -> Callable[[], bool]:
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


def feeder(stream: IO[bytes], payload: memoryview) -> Callable[[], bool]:
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


_echo_lock = threading.Lock()


def echo(lines: str) -> None:
    """A program's stdout lines, on drain's stderr (stdout is the summary's, with --json)."""
    with _echo_lock:
        try:
            sys.stderr.write(lines + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # drain's stderr is gone: the program's output with it
            pass
