"""A program a docs page's steps leave running between two of its examples.

It runs in a session of its own (so it outlives the step that started it and is
stopped as a group), with no terminal streams (so the page's shell does not wait
for it), and its process group goes in ``NAME.pid``: tests/test_docs.py stops
whatever such files still name when a page's examples end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

READY_SECONDS = 20


def start(command: Sequence[str], pid_file: Path, ready: Callable[[], bool], what: str) -> None:
    """Start ``command`` and return once ``ready()`` says so; exit 1 naming ``what``
    if it exits first or is not ready in time."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pid_file.write_text(str(process.pid))
    deadline = time.monotonic() + READY_SECONDS
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"{what} did not become ready")
        time.sleep(0.05)


def stop(pid_file: Path) -> None:
    """Stop the process group ``pid_file`` names (SIGTERM) and forget it."""
    os.killpg(int(pid_file.read_text()), signal.SIGTERM)
    pid_file.unlink()
