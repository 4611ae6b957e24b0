"""A loopback forwarder that loses one reply: the statement reaches the server and
commits, and the connection dies before the answer gets back.

That is the one connection failure a repeat cannot see through: the client does
not know whether its statement happened. Arm it with the bytes of a statement
(the run must send SQL text, i.e. ``--pooler``, which turns prepared statements
off); the next reply after that statement passed is dropped and both sides are
closed.
"""

from __future__ import annotations

import functools
import socket

from tests.support.relay import Relay, hang_up, pump, spawn


class ReplyCutter(Relay):
    """Forwards 127.0.0.1:<port> to ``upstream``; cuts once after ``marker`` went by."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(upstream)
        self.marker: bytes | None = None
        self.cuts = 0
        self._sent_marked: set[int] = set()
        self.start()

    def arm(self, marker: bytes) -> None:
        with self._lock:
            self.marker = marker

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        spawn(pump, client, server, functools.partial(self._upstream, client))
        spawn(pump, server, client, functools.partial(self._downstream, client, server))

    def _upstream(self, client: socket.socket, chunk: bytes) -> bool:
        """Client to server: note when the armed statement goes by."""
        with self._lock:
            if self.marker is not None and self.marker in chunk:
                self.marker = None
                self._sent_marked.add(id(client))
        return True

    def _downstream(self, client: socket.socket, server: socket.socket, chunk: bytes) -> bool:
        """Server to client: the first reply after the armed statement never arrives."""
        with self._lock:
            cut = id(client) in self._sent_marked
            if cut:
                self._sent_marked.discard(id(client))
                self.cuts += 1
        if cut:
            hang_up(client)
            hang_up(server)
        return not cut
