"""A loopback forwarder to PostgreSQL that listens on a port chosen in advance.

Scenario 10 points a run at a port where nothing listens yet (the connection is
refused, as while a compute resumes) and opens it a few seconds later.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class LateListener:
    """Forwards 127.0.0.1:``port`` to ``upstream`` once :meth:`start` is called."""

    def __init__(self, port: int, upstream: tuple[str, int]) -> None:
        self.port = port
        self.upstream = upstream
        self.accepted = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.accepted += 1
                self._sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, target), daemon=True).start()


def _pump(source: socket.socket, target: socket.socket) -> None:
    while True:
        try:
            chunk = source.recv(65536)
        except OSError:
            chunk = b""
        try:
            if not chunk:
                target.shutdown(socket.SHUT_WR)
                return
            target.sendall(chunk)
        except OSError:
            return
