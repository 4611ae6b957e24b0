"""A loopback forwarder that loses one reply: the statement reaches the server and
commits, and the connection dies before the answer gets back.

That is the one connection failure a repeat cannot see through: the client does
not know whether its statement happened. Arm it with the bytes of a statement
(the run must send SQL text, i.e. ``--pooler``, which turns prepared statements
off); the next reply after that statement passed is dropped and both sides are
closed.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class ReplyCutter:
    """Forwards 127.0.0.1:<port> to ``upstream``; cuts once after ``marker`` went by."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.marker: bytes | None = None
        self.cuts = 0
        self._sent_marked: set[int] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes) -> None:
        with self._lock:
            self.marker = marker

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            pair = (client, server)
            threading.Thread(target=self._upstream, args=pair, daemon=True).start()
            threading.Thread(target=self._downstream, args=pair, daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket) -> None:
        """Client to server: note when the armed statement goes by."""
        while chunk := _recv(client):
            with self._lock:
                if self.marker is not None and self.marker in chunk:
                    self.marker = None
                    self._sent_marked.add(id(client))
            if not _send(server, chunk):
                return
        _shut(server)

    def _downstream(self, client: socket.socket, server: socket.socket) -> None:
        """Server to client: the first reply after the armed statement never arrives."""
        while chunk := _recv(server):
            with self._lock:
                cut = id(client) in self._sent_marked
                if cut:
                    self._sent_marked.discard(id(client))
                    self.cuts += 1
            if cut:
                for sock in (client, server):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return
            if not _send(client, chunk):
                return
        _shut(client)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock: socket.socket, chunk: bytes) -> bool:
    try:
        sock.sendall(chunk)
        return True
    except OSError:
        return False


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
