"""A demo server left running (``drain demo --keep``), and stopping it (``drain demo --stop``).

A newcomer who has watched the demo drain its jobs wants to try ``drain
status``, ``drain jobs`` and ``drain report`` on that data, so ``--keep`` leaves
the throwaway server up. Its directory gets a marker file, and ``--stop`` removes
only a directory that carries one: a path typed by mistake, a real PostgreSQL
data directory included, is refused before anything is touched.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from drain.core.errors import UsageError

# Written into a kept server's directory: drain demo --stop removes only what it finds marked.
KEPT_MARKER = "drain-demo-kept.json"


@dataclass(frozen=True)
class Kept:
    """A demo server left running: where its files are, how to reach it, how to stop it."""

    directory: str
    dsn: str

    @property
    def stop_command(self) -> str:
        return f"drain demo --stop {shlex.quote(self.directory)}"

    def as_dict(self) -> dict[str, str]:
        return {"directory": self.directory, "dsn": self.dsn, "stop": self.stop_command}


def keep(directory: Path, dsn: str) -> Kept:
    """Mark the directory as a kept demo server's, so :func:`stop` will remove it."""
    kept = Kept(str(directory), dsn)
    (directory / KEPT_MARKER).write_text(json.dumps(kept.as_dict()) + "\n", encoding="utf-8")
    return kept


def stop(directory: str) -> Kept:
    """Stop the kept demo server in ``directory`` and remove its files.

    Only a directory ``drain demo --keep`` marked is touched: any other path, a
    real PostgreSQL data directory included, is refused before anything happens.
    """
    from drain.ops.embedded import EmbeddedServer

    path = Path(directory).expanduser()
    marker = path / KEPT_MARKER
    if not marker.is_file():
        raise UsageError(
            f"--stop: {directory!r} is not the directory of a server drain demo --keep left "
            "running (it names one when it ends)"
        )
    try:
        kept = Kept(**{k: v for k, v in json.loads(marker.read_text()).items() if k != "stop"})
    except (ValueError, TypeError):
        raise UsageError(f"--stop: {str(marker)!r} is not a drain demo marker") from None
    with _ignoring_signals():
        if _server_alive(path):  # after a reboot the files are all that is left
            EmbeddedServer(path).stop()
        shutil.rmtree(path, ignore_errors=True)
    return kept


def _server_alive(directory: Path) -> bool:
    """Whether the postmaster named in the data directory's pid file still runs."""
    try:
        pid = int((directory / "data" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return False
    return True


@contextmanager
def _ignoring_signals() -> Iterator[None]:
    """A second Ctrl-C must not cut the removal short and leave half a directory behind."""
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in stops}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
