"""The ``--exec`` handler: one program per job, and what its exit status makes of the job.

The payload goes as JSON to the program's stdin, the job's id, queue and
attempt as ``DRAIN_JOB_*`` variables (beside the environment
:mod:`~drain.runner.program_env` leaves it); exit 0 means done, anything else
fails the attempt with the tail of its stderr, and a command the shell cannot
run at all is a usage error of the run, not a job's failure. Starting and
stopping the program's process group is :mod:`~drain.runner.programs`'.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Iterable
from typing import Literal, Protocol

from drain.core import credentials
from drain.core.jobs import Job
from drain.core.redact import Redactor, secrets_in
from drain.runner.program_env import check_variable_names, program_environment
from drain.runner.program_output import echo, mask_block
from drain.runner.programs import KILL_DELAY, Program, stop_groups

log = logging.getLogger("drain")

SHELL = "/bin/sh"

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
        echo(mask_block(block, self._redact, secrets))

    def terminate_all(self) -> set[int]:
        """Stop every program still running, as whole groups, and start no more.

        Returns once every group is gone, or after SIGKILL and :data:`~drain.runner.programs.GONE_WAIT`;
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
