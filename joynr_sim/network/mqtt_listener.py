"""A memory network's MQTT broker (``mqtt_broker.MemoryBroker``) on a real TCP listener, so
that real MQTT 3.1.1 clients (paho, the broker semantics suite of ``joynr-sim brokers
check``) measure it exactly as they measure Mosquitto:

    with MqttListener(broker) as listener:       # its own asyncio loop, in a thread
        host, port = listener.address
        listener.run(brokers.crash_broker(gbid))   # a coroutine on the broker's loop

Each TCP connection is a channel of the broker (``to_client``, ``reset``,
``close_from_server``, as ``links.Channel``): its bytes are decoded into the broker's packet
tuples and the broker's tuples encoded back (``mqtt_codec``). A malformed or oversized
packet closes that connection only, and the broker learns it as any other close; a
refused CONNECT gets its CONNACK code first; a first packet other than CONNECT resets the
connection, as Mosquitto's does. A reset is an RST (SO_LINGER 0), as a crashed broker's
kernel sends. While the broker is down (crashed, not started again) a new connection is
reset at once, as a port nobody listens on refuses it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from typing import Any

from .mqtt_broker import KEEPALIVE_GRACE, BrokerConnection, MemoryBroker
from .mqtt_codec import CONNECT, MAX_PACKET_BYTES, Malformed, Refused, decode, encode, split_packet

HOST = "127.0.0.1"
# A connection that never sends CONNECT would hold a socket forever: Mosquitto gives a new
# connection a keep-alive of 60 s until its CONNECT sets one, and closes it when it expires.
CONNECT_TIMEOUT_S = 60 * KEEPALIVE_GRACE
START_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 30.0


# -- one TCP connection as the broker's channel ---------------------------------------------------


class _TcpChannel(asyncio.Protocol):
    """One client's TCP connection: the broker's ``BrokerConnection`` hears its packets, and
    it carries out what the broker sends and ends (the server side of ``links.Channel``)."""

    def __init__(self, listener: MqttListener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.conn: BrokerConnection | None = None  # None once the connection is over for the broker
        self.buffer = bytearray()
        self.greeted = False  # the first packet came (a CONNECT)
        self._login_due: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.listener.channels.add(self)
        conn = self.listener.broker.accept()
        if conn is None:  # the broker is down: refused, as by a port nobody listens on
            self._abort()
            return
        conn.channel, self.conn = self, conn
        self._login_due = asyncio.get_running_loop().call_later(CONNECT_TIMEOUT_S, self._no_login)

    def data_received(self, data: bytes) -> None:
        if self.conn is None:
            return  # closing: what the client still sends is ignored
        self.buffer += data
        if not self.greeted and self.buffer[0] >> 4 != CONNECT:
            # Mosquitto judges a first packet by its first byte and closes with the rest
            # unread: its peer sees a reset, whatever the packet would have been.
            conn = self.conn
            self.reset()
            conn.closed(True)
            return
        while self.conn is not None:
            try:
                packet = split_packet(self.buffer, self.listener.max_packet_bytes)
                if packet is None:
                    return
                decoded = decode(*packet)
            except Refused as exc:
                self.to_client(("connack", exc.code, False))
                self._violation()
                return
            except Malformed:
                self._violation()
                return
            self.greeted = True
            self._forget()
            self.conn.received(decoded)

    def eof_received(self) -> bool:
        return False  # the client is done: the transport closes, connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.channels.discard(self)
        self._forget()
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.closed(exc is not None)

    # Backpressure: a client that does not read what it is sent is not read from either, so
    # its own packets cannot pile answers up in the broker's memory.
    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # -- what the broker calls (links.Channel's server side) -------------------------------------
    def to_client(self, packet: tuple) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode(packet))

    def reset(self, by: object = None) -> None:
        """At once, with an RST; the broker's end hears nothing of it (it aborted it, or the
        caller tells it)."""
        self._forget()
        self.conn = None
        self._abort()

    def close_from_server(self) -> None:
        """Graceful: what was written goes out first (a PUBACK before the close)."""
        self._forget()
        self.conn = None
        if self.transport is not None:
            self.transport.close()

    # -- the end of the connection ------------------------------------------------------------------
    def _violation(self) -> None:
        conn = self.conn
        self.close_from_server()
        if conn is not None:
            conn.closed(False)

    def _no_login(self) -> None:
        self._login_due = None
        self._violation()

    def _abort(self) -> None:
        """Closed at once with an RST, as a crashed broker's kernel answers: SO_LINGER 0."""
        if self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def _forget(self) -> None:
        if self._login_due is not None:
            self._login_due.cancel()
            self._login_due = None


# -- the listener -------------------------------------------------------------------------------


class MqttListener:
    """One ``MemoryBroker`` on ``host``:``port`` (0: a free one), on an asyncio loop of its
    own in a daemon thread; the broker runs on that loop only (``run``, ``submit``)."""

    def __init__(self, broker: MemoryBroker, host: str = HOST, port: int = 0,
                 max_packet_bytes: int = MAX_PACKET_BYTES) -> None:
        self.broker = broker
        self.host, self.port = host, port
        self.max_packet_bytes = max_packet_bytes
        self.channels: set[_TcpChannel] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def start(self) -> tuple[str, int]:
        """Listen; the address. OSError when the port cannot be bound."""
        if self._thread is not None:
            raise RuntimeError("the listener is already started")
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"mqtt-listener-{self.broker.gbid}",
                                        daemon=True)
        self._thread.start()
        try:
            self._server = self.run(self.loop.create_server(lambda: _TcpChannel(self), self.host, self.port),
                                    START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        self.port = self._server.sockets[0].getsockname()[1]
        return self.address

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        if self.loop is None:
            coro.close()
            raise RuntimeError("the listener is not started")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = CALL_TIMEOUT_S) -> Any:
        """Run ``coro`` on the broker's loop and wait for its result (not from that loop)."""
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        """Stop listening; every connection still open is reset; the loop's thread ends."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                self.run(self._shut(), START_TIMEOUT_S)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT_S)
        if not thread.is_alive():
            loop.close()
        self.loop = self._thread = self._server = None

    async def _shut(self) -> None:
        if self._server is not None:
            self._server.close()
        for channel in list(self.channels):
            conn = channel.conn
            channel.reset()
            if conn is not None:
                conn.closed(True)
        await asyncio.sleep(0)  # the aborted transports' connection_lost runs

    def __enter__(self) -> MqttListener:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
