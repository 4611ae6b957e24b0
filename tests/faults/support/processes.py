"""Real ``drain run`` processes for the fault scenarios, with their output kept in files.

Output goes to files rather than pipes: a run that is killed, stopped or left
waiting never blocks on a full pipe, and its stdout and stderr can be read (and
scanned for secrets) whatever became of it. The handlers come from
``tests/apps/fault_handlers.py`` and write to the ledger through
``FAULT_LEDGER_DSN``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg

from tests.faults.support import ledger_audit
from tests.support import REPO, parse_summary

# The kind of handler the whole suite runs: sync functions in worker threads, or
# (DRAIN_FAULT_HANDLERS=async) async def handlers as tasks on the run's event loop.
HANDLER_KIND = os.environ.get("DRAIN_FAULT_HANDLERS", "sync")


def handler(name: str) -> str:
    """``--handler`` for the fault handler ``name`` (tests/apps/fault_handlers.py), of
    the suite's kind."""
    return f"fault_handlers:{name}_async" if HANDLER_KIND == "async" else f"fault_handlers:{name}"


HANDLER = handler("work")


def environment(
    dsn: str | None, ledger_dsn: str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("DRAIN_") and k != "DATABASE_URL"
    }
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "tests" / "apps"), str(REPO), env.get("PYTHONPATH", "")]
    )
    if dsn is not None:
        env["DRAIN_DSN"] = dsn
    env["FAULT_LEDGER_DSN"] = ledger_dsn
    env.update(extra or {})
    return env


class Run:
    """One ``python -m drain ...`` process; ``args`` follow ``drain``."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        dsn: str | None,
        ledger_dsn: str,
        directory: Path,
        env: dict[str, str] | None = None,
        new_session: bool = False,
    ) -> None:
        """``new_session`` makes the run lead a session (and process group) of its own."""
        self.args = list(args)
        self.started = time.monotonic()
        self.started_wall = time.time()
        self._out_path = directory / f"run-{id(self)}.out"
        self._err_path = directory / f"run-{id(self)}.err"
        with self._out_path.open("wb") as out, self._err_path.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "drain", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=environment(dsn, ledger_dsn, env),
                cwd=REPO,
                start_new_session=new_session,
            )
        self.ended: float | None = None
        self.signals: list[tuple[int, float]] = []

    @property
    def pid(self) -> int:
        return self.process.pid

    def poll(self) -> int | None:
        code = self.process.poll()
        if code is not None and self.ended is None:
            self.ended = time.monotonic()
        return code

    def wait(self, timeout: float = 120.0) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"drain {' '.join(self.args)} still running after {timeout}s\n{self.stderr}"
            ) from None
        self.poll()
        return code

    def send(self, signum: int) -> bool:
        """Send a signal if the process is still there; remember when (wall clock)."""
        if self.process.poll() is not None:
            return False
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            return False
        self.signals.append((signum, time.time()))
        return True

    def kill(self) -> None:
        self.send(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def stdout(self) -> str:
        return self._out_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self._err_path.read_text(errors="replace")

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary the run printed (it must have printed one)."""
        return parse_summary(self.stdout, self.stderr, self.process.returncode)


class Runs:
    """Starts runs for one test and makes sure none outlives it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Run] = []

    def start(
        self,
        *options: str,
        dsn: str,
        ledger_dsn: str | None = None,
        env: dict[str, str] | None = None,
        command: Sequence[str] = ("run", "--handler", HANDLER, "--json"),
    ) -> Run:
        """Start ``drain run --handler fault_handlers:work --json OPTIONS`` against ``dsn``."""
        run = Run(
            [*command, *options],
            dsn=dsn,
            ledger_dsn=ledger_dsn or dsn,
            directory=self.directory,
            env=env,
        )
        self.started.append(run)
        return run

    def run(self, *options: str, dsn: str, timeout: float = 120.0, **kwargs: Any) -> Run:
        """Start a run and wait for it to end."""
        run = self.start(*options, dsn=dsn, **kwargs)
        run.wait(timeout)
        return run

    def finish(
        self, *options: str, dsn: str, ledger_conn: psycopg.Connection[Any], done: int
    ) -> tuple[Run, ledger_audit.Audit]:
        """One more run finishes what a disturbed run left: it exits 0, the ledger
        audits clean, and all ``done`` jobs are done."""
        follow_up = self.run(*options, dsn=dsn)
        assert follow_up.process.returncode == 0, follow_up.stderr
        audit = ledger_audit.audit(ledger_conn)
        audit.assert_ok()
        assert audit.statuses == {"done": done}
        return follow_up, audit

    def cleanup(self) -> None:
        for run in self.started:
            if run.poll() is None:
                run.send(signal.SIGCONT)
                run.kill()


def wait_until(
    condition: Any, *, timeout: float = 60.0, interval: float = 0.02, what: str = "condition"
) -> None:
    """Poll ``condition()`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def ledger_count(conn: psycopg.Connection[Any], *, returned: bool = False) -> int:
    row = conn.execute(
        "SELECT count(*) FROM fault_ledger WHERE returned_at IS NOT NULL OR NOT %s", (returned,)
    ).fetchone()
    assert row is not None
    return int(row[0])


@contextlib.contextmanager
def connected(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn
