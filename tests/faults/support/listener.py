"""A loopback forwarder to PostgreSQL that listens on a port chosen in advance.

Scenario 10 points a run at a port where nothing listens yet (the connection is
refused, as while a compute resumes) and opens it a few seconds later.
"""

from __future__ import annotations

import socket

from tests.support.relay import Relay


class LateListener(Relay):
    """Forwards 127.0.0.1:``port`` to ``upstream`` once :meth:`start` is called."""

    def __init__(self, port: int, upstream: tuple[str, int]) -> None:
        super().__init__(upstream, port)
        self.accepted = 0

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        with self._lock:
            self.accepted += 1
        super()._relay(client, server)
