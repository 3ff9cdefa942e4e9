"""A fault proxy: one TCP link on loopback, between a runtime and what it connects to (the
broker of a GBID, or its cluster controller's WebSocket server), that can be cut, held or
slowed while both ends keep running.

The proxy listens on 127.0.0.1 and, for every connection it accepts, opens one to its
upstream and pumps bytes both ways; it never looks inside them, so MQTT and WebSocket
links are faulted alike. The upstream is asked for at every connection, so a broker
restarted on the same port, or a cluster controller that listens again, is reached again.

What each fault does to the bytes:

- ``partition``: every connection is reset (RST: ``SO_LINGER`` 0, then abort) and new
  connections are refused, as by a network that rejects the link (the client's connect
  fails with ECONNREFUSED), until ``heal``. Refused, not accepted and reset: a reset during
  a WebSocket opening handshake is not a connection error to ``websockets`` but a bad HTTP
  response, and a network that drops a link does not answer with HTTP. To refuse without
  giving the port away, a bound socket that never listens holds the port
  (``SO_REUSEPORT``) while the listening socket is closed.
- ``blackhole``: connections stay open and nothing passes either way: a half-open link.
  The bytes are held, not discarded: the proxy stops reading, so they wait in the
  senders' socket buffers as unacknowledged TCP segments wait for retransmission; TCP
  loses bytes only with the connection. New connections are accepted (the kernel
  completes the TCP handshake on loopback) and then hang: nothing reaches the upstream.
- ``delay``: every chunk is held for ``ms`` plus a random ``0..jitter_ms`` before it is
  passed on, from the moment the proxy read it; chunks never overtake each other (TCP
  delivers a stream in order, so a late segment holds back the ones behind it).
- ``heal``: bytes pass again. After a partition, new connections pass. After a
  blackhole the held connections resume and what they held is delivered, late and in
  order, as a real link that comes back before the peers give up; a peer whose
  keepalive gave up meanwhile has closed its side, and that close reaches the other side
  at the heal, as it would. The runtimes' own keepalives decide, not the proxy. Chunks
  waiting out a delay go at once.

While the upstream refuses (a broker or cluster controller that is down or restarting),
a new connection waits and the upstream is tried again every ``pipe.UPSTREAM_RETRY_S`` until
it accepts or the client gives up. Without the proxy the client would be refused at once;
it retries either way (paho, and a libjoynr runtime's reconnect, do), and a proxy cannot
know that its upstream is down before it accepted the client's connection.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable

from .pipe import BLACKHOLE, DELAY, PARTITION, Pair

HOST = "127.0.0.1"
BACKLOG = 128


def _port_socket(port: int) -> socket.socket:
    """A TCP socket on HOST:port that shares the port with the proxy's other sockets."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((HOST, port))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class FaultProxy:
    """One link: ``start()``, give its ``address`` to the runtime, then fault and heal it."""

    def __init__(
        self, name: str, upstream: Callable[[], tuple[str, int]], *, seed: int | str | None = None
    ) -> None:
        self.name = name
        self._upstream = upstream
        self._rng = random.Random(seed)  # the jitter of a seeded run is the same every time
        self.fault: str | None = None
        self.ms = 0
        self.jitter_ms = 0
        self.port = 0
        self._pairs: set[Pair] = set()
        self._holder: socket.socket | None = None  # keeps the port while nobody listens
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    @property
    def connections(self) -> int:
        """Connections open through the link (accepted, whether the upstream is reached yet)."""
        return len(self._pairs)

    async def start(self) -> None:
        self._holder = _port_socket(0)
        self.port = self._holder.getsockname()[1]
        await self._listen()

    async def close(self) -> None:
        self._refuse()
        for pair in list(self._pairs):
            pair.reset()
        if self._holder is not None:
            self._holder.close()
            self._holder = None

    # -- faults (each returns how many connections it found open) ----------------------
    async def partition(self) -> int:
        found = self.connections
        self.fault = PARTITION
        self._refuse()
        for pair in list(self._pairs):
            pair.reset()
        return found

    async def blackhole(self) -> int:
        return await self._set(BLACKHOLE)

    async def delay(self, ms: int, jitter_ms: int = 0) -> int:
        self.ms, self.jitter_ms = ms, jitter_ms
        return await self._set(DELAY)

    async def heal(self) -> int:
        return await self._set(None)

    async def _set(self, fault: str | None) -> int:
        self.fault = fault
        if self._server is None and self._holder is not None:
            await self._listen()
        for pair in list(self._pairs):
            pair.refresh()
        return self.connections

    def latency_s(self) -> float:
        if self.fault != DELAY:
            return 0.0
        jitter = self._rng.randint(0, self.jitter_ms) if self.jitter_ms else 0
        return (self.ms + jitter) / 1000

    # -- listening ---------------------------------------------------------------------
    async def _listen(self) -> None:
        sock = _port_socket(self.port)
        try:
            sock.listen(BACKLOG)
            self._server = await asyncio.get_running_loop().create_server(lambda: Pair(self).down, sock=sock)
        except BaseException:
            sock.close()
            raise

    def _refuse(self) -> None:
        if self._server is not None:
            self._server.close()  # the listening socket only; accepted connections stay
            self._server = None

    def upstream(self) -> tuple[str, int]:
        return self._upstream()

    def adopt(self, pair: Pair) -> None:
        self._pairs.add(pair)

    def forget(self, pair: Pair) -> None:
        self._pairs.discard(pair)


