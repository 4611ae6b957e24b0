"""A loopback TCP proxy in front of PostgreSQL that can delay traffic and count statements.

This machine has no ``tc netem``, so the round-trip benchmark and the slow-connect
tests put this proxy between drain and the server. It also reads the frontend
side of the wire protocol to count what a client sends: every simple ``Query``
('Q') and every extended-protocol ``Execute`` ('E') is one statement. Connect
through it with ``sslmode=disable`` so the stream stays readable.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import socket
import struct
import time
from collections.abc import Iterator

from psycopg import conninfo

from tests.support.relay import Relay, recv, send, shut, spawn

_SPECIAL_REQUESTS = {80877103, 80877104}  # SSLRequest, GSSENCRequest: no type byte


class _FrontendCounter:
    """Splits the client's byte stream into protocol messages and counts their types."""

    def __init__(self, counts: collections.Counter[str]) -> None:
        self.counts = counts
        self.buffer = bytearray()
        self.started = False

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if not self.started:
                if len(self.buffer) < 8:
                    return
                length, code = struct.unpack("!II", self.buffer[:8])
                if len(self.buffer) < length:
                    return
                del self.buffer[:length]
                if code not in _SPECIAL_REQUESTS:
                    self.started = True
                continue
            if len(self.buffer) < 5:
                return
            kind = chr(self.buffer[0])
            (length,) = struct.unpack("!I", self.buffer[1:5])
            if len(self.buffer) < 1 + length:
                return
            del self.buffer[: 1 + length]
            self.counts[kind] += 1


class PgProxy(Relay):
    """Forwards 127.0.0.1:<port> to the upstream server, optionally ``delay`` seconds each way.

    ``accept_delay`` makes a new connection wait that long before anything is
    forwarded (a server that accepts but answers late); :meth:`blackhole` stops
    all forwarding for a while, as a partition that drops packets does (TCP
    resends them once it heals, so nothing is lost, only late). Plain threads rather than
    an event loop: ``time.sleep`` keeps a 1.5 ms delay within a few hundred
    microseconds, where an event loop's millisecond timer granularity doubles it.
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        delay: float = 0.0,
        accept_delay: float = 0.0,
    ) -> None:
        super().__init__((upstream_host, upstream_port))
        self.delay = delay
        self.accept_delay = accept_delay
        self.counts: collections.Counter[str] = collections.Counter()
        self.connections = 0
        self.held_until = 0.0
        self._listen()

    @classmethod
    def for_dsn(cls, dsn: str, **kwargs: float) -> PgProxy:
        params = conninfo.conninfo_to_dict(dsn)
        host = str(params.get("host") or "127.0.0.1")
        if host.startswith("/") or host == "localhost":
            host = "127.0.0.1"
        return cls(host, int(params.get("port") or 5432), **kwargs)

    def dsn_through(self, dsn: str) -> str:
        """``dsn`` pointed at the proxy, with TLS and GSS encryption off so it stays readable."""
        params = conninfo.conninfo_to_dict(dsn)
        params.update(
            host="127.0.0.1", port=str(self.port), sslmode="disable", gssencmode="disable"
        )
        return conninfo.make_conninfo("", **params)

    @property
    def statements(self) -> int:
        return self.counts["Q"] + self.counts["E"]

    def blackhole(self, seconds: float) -> None:
        """Forward nothing, either way, for ``seconds`` from now; then all of it, in order."""
        self.held_until = time.monotonic() + seconds

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.connections = 0

    def __enter__(self) -> PgProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self, client: socket.socket) -> None:
        """Each client on a thread of its own: it may wait ``accept_delay`` first."""
        spawn(self._serve_late, client)

    def _serve_late(self, client: socket.socket) -> None:
        with self._lock:
            self.connections += 1
            self._sockets.append(client)
        if self.accept_delay and self._closing.wait(self.accept_delay):
            client.close()
            return
        server = self._dial(client)
        if server is None:
            return
        self._keep(server)
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        spawn(self._pump, client, server, _FrontendCounter(self.counts))
        spawn(self._pump, server, client, None)

    def _pump(
        self, source: socket.socket, target: socket.socket, counter: _FrontendCounter | None
    ) -> None:
        """Copy one direction, holding each chunk back ``delay`` seconds but keeping order."""
        in_flight: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def deliver() -> None:
            while True:
                due, chunk = in_flight.get()
                while (wait := max(due, self.held_until) - time.monotonic()) > 0:
                    time.sleep(min(wait, 0.05))
                if not chunk:
                    shut(target)
                    return
                if not send(target, chunk):
                    return

        spawn(deliver)
        while True:
            chunk = recv(source)
            if counter is not None and chunk:
                with self._lock:
                    counter.feed(chunk)
            in_flight.put((time.monotonic() + self.delay, chunk))
            if not chunk:
                return


@contextlib.contextmanager
def proxied(dsn: str, **kwargs: float) -> Iterator[tuple[PgProxy, str]]:
    """A running proxy in front of ``dsn``'s server, and the DSN that goes through it."""
    proxy = PgProxy.for_dsn(dsn, **kwargs).start()
    try:
        yield proxy, proxy.dsn_through(dsn)
    finally:
        proxy.stop()
