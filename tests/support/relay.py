"""A loopback TCP relay in front of PostgreSQL, the part the test proxies share.

:class:`Relay` listens on 127.0.0.1, connects every accepted client to the
upstream server and copies bytes both ways, one plain thread per direction. It
keeps every socket it opened so that :meth:`Relay.close` can cut them all at
once, mid-statement if need be. The proxy that delays and counts
(``tests/support/pgproxy.py``), the reply cutter and the late listener
(``tests/faults/``) change only what happens to a connection once accepted.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Self, TypeVarTuple

_Args = TypeVarTuple("_Args")


class Relay:
    """Forwards 127.0.0.1:``port`` (0: any free port) to ``upstream`` once started."""

    def __init__(self, upstream: tuple[str, int], port: int = 0) -> None:
        self.upstream = upstream
        self.port = port
        self._listener: socket.socket | None = None
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> Self:
        """Listen, if not yet, and accept connections on a background thread."""
        spawn(self._accept_loop, self._listener or self._listen())
        return self

    def close(self) -> None:
        """Stop accepting and cut every connection, both sides."""
        self._closing.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                hang_up(sock)
                sock.close()

    stop = close  # the proxy and the late listener say stop, the reply cutter close

    def _listen(self) -> socket.socket:
        """Bind the port now; connections wait in the backlog until :meth:`start`."""
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self.port = int(self._listener.getsockname()[1])
        return self._listener

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            self._serve(client)

    def _serve(self, client: socket.socket) -> None:
        """One accepted client, on the accept loop's thread: connect it and relay."""
        server = self._dial(client)
        if server is not None:
            self._keep(client, server)
            self._relay(client, server)

    def _dial(self, client: socket.socket) -> socket.socket | None:
        """A connection to the upstream server, or None (and ``client`` closed)."""
        try:
            return socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return None

    def _keep(self, *sockets: socket.socket) -> None:
        """Remember ``sockets`` for :meth:`close`."""
        with self._lock:
            self._sockets += sockets

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        """Copy both ways, as they come."""
        spawn(pump, client, server)
        spawn(pump, server, client)


def spawn(target: Callable[[*_Args], object], *args: *_Args) -> None:
    """Run ``target(*args)`` on a daemon thread: a stuck relay never holds the tests up."""
    threading.Thread(target=target, args=args, daemon=True).start()


def pump(
    source: socket.socket,
    target: socket.socket,
    watch: Callable[[bytes], bool] | None = None,
) -> None:
    """Copy ``source`` to ``target``; at the source's end, pass the end of stream on.

    ``watch`` sees each chunk first; when it returns False the pump stops there,
    without forwarding the chunk: the watcher has dealt with both sockets.
    """
    while chunk := recv(source):
        if watch is not None and not watch(chunk):
            return
        if not send(target, chunk):
            return
    shut(target)


def recv(sock: socket.socket) -> bytes:
    """The next chunk, or b"" at the end of the stream or on any error."""
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def send(sock: socket.socket, chunk: bytes) -> bool:
    """Whether all of ``chunk`` went out."""
    try:
        sock.sendall(chunk)
        return True
    except OSError:
        return False


def shut(sock: socket.socket) -> None:
    """Pass the end of stream on: no more bytes this way (the other way stays open)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def hang_up(sock: socket.socket) -> None:
    """End both directions at once, as a dropped connection does."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
