"""One connection through a fault proxy: the socket the proxy accepted, the one it opened
to the upstream, and a flow of bytes each way, passed on, held or delayed as the link's
fault says (``joynr_sim.faults.proxy`` describes what each fault does)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import deque
from typing import Protocol

PARTITION, BLACKHOLE, DELAY = "partition", "blackhole", "delay"
FAULTS = (PARTITION, BLACKHOLE, DELAY)
UPSTREAM_RETRY_S = 0.05
# Bytes read from one side and not yet passed on (a delay) before reading from it pauses:
# the sender then waits on TCP flow control, as it would behind a slow link.
HIGH_WATER_BYTES = 1 << 20

_EOF = None  # a queued end of stream: the sender closed its side


class Link(Protocol):
    """What a connection needs from its proxy."""

    fault: str | None

    def latency_s(self) -> float: ...

    def upstream(self) -> tuple[str, int]: ...

    def adopt(self, pair: Pair) -> None: ...

    def forget(self, pair: Pair) -> None: ...


def reset_transport(transport: asyncio.BaseTransport | None) -> None:
    """Close with an RST, not a FIN: the peer sees ECONNRESET, as on a link that died."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _End(asyncio.Protocol):
    """One socket of a connection pair: the runtime's side (down) or the upstream's (up)."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.transport: asyncio.Transport | None = None
        self.at_eof = False  # the peer closed its side: nothing more to read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Small frames otherwise wait for the peer's delayed ACK (~40 ms) behind the one
            # before; asyncio sets this itself only on sockets made with IPPROTO_TCP.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pair.connected(self)

    def data_received(self, data: bytes) -> None:
        self.pair.flow_from(self).put(data)

    def eof_received(self) -> bool:
        self.at_eof = True
        self.pair.flow_from(self).put(_EOF)
        return True  # the other direction may still carry bytes: a half-close passes as one

    def connection_lost(self, exc: Exception | None) -> None:
        self.pair.lost(self, exc)

    def pause_writing(self) -> None:
        self.pair.flow_into(self).sink_paused = True
        self.pair.refresh()

    def resume_writing(self) -> None:
        self.pair.flow_into(self).sink_paused = False
        self.pair.refresh()

    def set_reading(self, reading: bool) -> None:
        t = self.transport
        # (resume_reading after the end of stream would read it, and pass it, again)
        if t is None or t.is_closing() or self.at_eof or t.is_reading() == reading:
            return
        if reading:
            t.resume_reading()
        else:
            t.pause_reading()


class _Flow:
    """One direction of a pair: what was read from ``source`` and is owed to ``sink``."""

    def __init__(self, pair: Pair, source: _End, sink: _End) -> None:
        self.pair = pair
        self.source, self.sink = source, sink
        self.queue: deque[tuple[float, bytes | None]] = deque()
        self.queued_bytes = 0
        self.sink_paused = False
        self.ended = False  # the end of stream was passed on
        self._last_due = 0.0
        self._wake = asyncio.Event()
        self._pump: asyncio.Task | None = None

    def passing(self) -> bool:
        """Whether bytes may go to the sink now (a delay still holds each chunk its time)."""
        proxy = self.pair.proxy
        return proxy.fault != BLACKHOLE and self.sink.transport is not None and not self.sink_paused

    def wants_reading(self) -> bool:
        """Read while what is read can go somewhere: never in a blackhole (the bytes wait
        in the sender's buffers), not while the sink pushes back or too much is queued.
        Before the upstream is connected, the client's first bytes are read and queued,
        so a client that gives up is seen and its connection let go."""
        return (self.pair.proxy.fault != BLACKHOLE and not self.sink_paused
                and self.queued_bytes < HIGH_WATER_BYTES)

    def put(self, chunk: bytes | None) -> None:
        proxy = self.pair.proxy
        if not self.queue and proxy.fault is None and self.passing():
            self._deliver(chunk)  # the common case: straight through
            return
        if chunk is _EOF and self.sink.transport is None:
            self.pair.close()  # the client gave up before the upstream was reached
            return
        now = asyncio.get_running_loop().time()
        due = max(now + proxy.latency_s(), self._last_due)  # never before the chunk ahead
        self._last_due = due
        self.queue.append((due, chunk))
        self.queued_bytes += len(chunk or b"")
        if self.queued_bytes >= HIGH_WATER_BYTES:
            self.source.set_reading(False)
        if self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        self._wake.set()

    def cancel(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None
        self.queue.clear()
        self.queued_bytes = 0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.queue:
                timeout: float | None = None
                if self.passing():
                    due, chunk = self.queue[0]
                    late = self.pair.proxy.fault != DELAY or loop.time() >= due
                    if late:
                        self.queue.popleft()
                        self.queued_bytes -= len(chunk or b"")
                        self._deliver(chunk)
                        self.source.set_reading(self.wants_reading())
                        continue
                    timeout = due - loop.time()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            self._pump = None

    def _deliver(self, chunk: bytes | None) -> None:
        t = self.sink.transport
        assert t is not None
        if chunk is not _EOF:
            t.write(chunk)
            return
        self.ended = True
        if t.can_write_eof() and not t.is_closing():
            t.write_eof()
        self.pair.ended()


class Pair:
    """One connection through the proxy: the accepted one and the one to the upstream."""

    def __init__(self, proxy: Link) -> None:
        self.proxy = proxy
        self.down = _End(self)
        self.up = _End(self)
        self.to_up = _Flow(self, self.down, self.up)
        self.to_down = _Flow(self, self.up, self.down)
        self.dead = False
        self._changed = asyncio.Event()  # the proxy's fault changed
        self._connecting: asyncio.Task | None = None

    def flow_from(self, end: _End) -> _Flow:
        return self.to_up if end is self.down else self.to_down

    def flow_into(self, end: _End) -> _Flow:
        return self.to_down if end is self.down else self.to_up

    def connected(self, end: _End) -> None:
        if end is self.up:
            self.refresh()
            return
        if self.proxy.fault == PARTITION:  # accepted just before the listener closed
            self.reset()
            return
        self.proxy.adopt(self)
        self.refresh()
        self._connecting = asyncio.get_running_loop().create_task(self._connect_upstream())

    async def _connect_upstream(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.dead:
            if self.proxy.fault == BLACKHOLE:  # a new connection hangs until the heal
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                host, port = self.proxy.upstream()
                await loop.create_connection(lambda: self.up, host, port)
            except (OSError, ValueError, RuntimeError):  # refused, or no port yet: wait, try again
                await asyncio.sleep(UPSTREAM_RETRY_S)
                continue
            if self.dead:  # partitioned while connecting
                reset_transport(self.up.transport)
            return

    def refresh(self) -> None:
        """The proxy's fault or a sink's flow control changed: read and pass accordingly."""
        if self.dead:
            return
        for flow in (self.to_up, self.to_down):
            flow.source.set_reading(flow.wants_reading())
            flow.wake()
        self._changed.set()

    def ended(self) -> None:
        """An end of stream was passed on; once both were, the pair is done."""
        if self.to_up.ended and self.to_down.ended:
            self.close()

    def lost(self, end: _End, exc: Exception | None) -> None:
        """A socket went that this pair did not close (a peer's end of stream comes as
        ``eof_received``). After an error (a reset, a failed write) the other side is reset
        at once: TCP discards what was queued behind an RST."""
        if self.dead:
            return
        if exc is None:
            self.close()
        else:
            self.reset()

    def close(self) -> None:
        self._finish()
        for end in (self.down, self.up):
            if end.transport is not None and not end.transport.is_closing():
                end.transport.close()

    def reset(self) -> None:
        self._finish()
        reset_transport(self.down.transport)
        reset_transport(self.up.transport)

    def _finish(self) -> None:
        self.dead = True
        if self._connecting is not None:
            self._connecting.cancel()
        self.to_up.cancel()
        self.to_down.cancel()
        self.proxy.forget(self)
