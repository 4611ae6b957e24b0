"""What a person at a terminal sees: the commands run under a real pseudo-terminal.

A command pointed at a wrong port used to print nothing for the whole connect
retry (30 s by default), which looks like a hang; on a terminal it now says, after
the first failed attempt, that it is retrying and for how long. Without a
terminal (a scheduler, a pipe) nothing changes: the log stays quiet.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from drain.ops.embedded import free_port
from tests.support import REPO, drain_cli

NOTICE = "retrying for up to 4s (--connect-retry sets how long)"
COMMANDS = {
    "status": ("status",),
    "jobs": ("jobs",),
    "jobs show": ("jobs", "show", "1"),
    "cancel": ("cancel", "1"),
    "retry": ("retry", "--all"),
    "enqueue": ("enqueue", "q", "{}"),
    "run": ("run", "--exec", "true"),
}


@dataclass(frozen=True)
class Seen:
    output: str
    code: int
    notice_after: float | None  # seconds from the start to the notice
    running_at_notice: bool


def _on_a_terminal(*args: str, dsn: str) -> Seen:
    """Run ``drain ARGS`` with stdout and stderr on a pseudo-terminal, reading as it goes."""
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAIN_")}
    env.update(DRAIN_DSN=dsn, PYTHONPATH=str(REPO))
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "drain", *args, "--connect-retry", "4s"],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        env=env,
        cwd=REPO,
    )
    os.close(terminal)
    output, notice_after, running = b"", None, False
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal is gone: every process on it exited
                break
            if not chunk:
                break
            output += chunk
            if notice_after is None and NOTICE.encode() in output:
                notice_after = time.monotonic() - started
                running = process.poll() is None
        code = process.wait(30)
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
    return Seen(output.decode(errors="replace"), code, notice_after, running)


@pytest.fixture(scope="module")
def refused_dsn() -> str:
    return f"postgresql://root@127.0.0.1:{free_port()}/db"


def test_every_command_says_on_a_terminal_that_it_is_retrying(refused_dsn: str) -> None:
    with ThreadPoolExecutor(max_workers=len(COMMANDS)) as pool:
        futures = {
            name: pool.submit(_on_a_terminal, *args, dsn=refused_dsn)
            for name, args in COMMANDS.items()
        }
        seen = {name: future.result() for name, future in futures.items()}

    for name, found in seen.items():
        lines = [line for line in found.output.splitlines() if line.strip()]
        assert found.code == 1, f"{name}: {found}"
        assert found.output.count(NOTICE) == 1, f"{name}: {found.output}"
        # Said while the command still retries, not with the final error.
        assert found.running_at_notice, f"{name}: {found}"
        notice = next(line for line in lines if NOTICE in line)
        assert notice.startswith("drain: cannot reach 127.0.0.1:"), notice
        assert lines[-1].startswith("drain: error: cannot connect to"), found.output


def test_without_a_terminal_the_retries_stay_quiet(refused_dsn: str) -> None:
    result = drain_cli("status", "--connect-retry", "2s", dsn=refused_dsn)

    assert result.returncode == 1
    assert "retrying" not in result.stderr, result.stderr
    assert result.stderr.startswith("drain: error: cannot connect to"), result.stderr
