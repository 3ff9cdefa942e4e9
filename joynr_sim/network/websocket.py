"""WebSocket connections on the memory network: a cluster controller's server and a
libjoynr runtime's client with the interfaces of ``transport.ws_server.WebSocketServer``
and ``transport.ws_client.WebSocketClient``, over ``links.Channel``.

The protocol on top is the real one, judged by the same code: the client's first frame
is its address with its token (``ws_client.hello_frame``), the server accepts or refuses it
(``ws_server.verdict``; refused: close 1008 before any frame is handed on), a client
keeps what it sent until the server sent anything and sends it again after a refusal,
a frame over the limits closes with 1009, a graceful stop of the server sends each client
its queued frames and then a close (1001) and reads what comes until the client's close.
Packets: ``("frame", data)`` and ``("close", code, reason)``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..core.address import AddressError
from ..transport import websocket
from ..transport.websocket import guarded
from ..transport.ws_client import hello_frame, kept_unconfirmed
from ..transport.ws_server import refusal, verdict
from .links import Channel

if TYPE_CHECKING:
    from .memory import MemoryNetwork

TOO_BIG, GOING_AWAY, NORMAL = 1009, 1001, 1000


class _ServerConnection:
    """The server's end of one client connection."""

    def __init__(self, server: MemoryWebSocketServer) -> None:
        self.server = server
        self.channel: Channel | None = None
        self.client_id: str | None = None
        self.judged = False
        self.closing = asyncio.get_running_loop().create_future()  # the client's close came back
        self._timeout = asyncio.get_running_loop().call_later(websocket.HANDSHAKE_TIMEOUT_S, self._too_late)

    def received(self, packet: tuple) -> None:
        if packet[0] == "close":
            self.close(packet[1], "")
            return
        self.server.frame(self, packet[1])

    def closed(self, reset: bool) -> None:
        self.server.gone(self)

    def send(self, packet: tuple) -> None:
        if self.channel is not None:
            self.channel.to_client(packet)

    def close(self, code: int, reason: str) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            channel.to_client(("close", code, reason))
            channel.close_from_server()
        self.server.gone(self)

    def _too_late(self) -> None:
        if not self.judged and self.channel is not None:
            self.judged = True
            detail = f"no complete first frame within {websocket.HANDSHAKE_TIMEOUT_S} s"
            guarded(self.server.on_bad_handshake, "decode-error", detail)
            self.close(websocket.REFUSED, refusal("decode-error"))

    def forget(self) -> None:
        self._timeout.cancel()
        if not self.closing.done():
            self.closing.set_result(None)


class MemoryWebSocketServer:
    def __init__(
        self,
        network: MemoryNetwork,
        on_frame: Callable[[str, bytes | str], None],
        on_client: Callable[[str], None],
        on_client_gone: Callable[[str], None],
        on_bad_handshake: Callable[[str, str], None],
        authenticate: Callable[[str, object], bool] = lambda client_id, token: True,
    ) -> None:
        self.network = network
        self.on_frame, self.on_client, self.on_client_gone = on_frame, on_client, on_client_gone
        self.on_bad_handshake = on_bad_handshake
        self._authenticate = authenticate
        self.clients: dict[str, _ServerConnection] = {}
        self._connections: list[_ServerConnection] = []
        self.accepting = False
        self.host, self.port = "127.0.0.1", 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, self.network.listen(self, host, port)
        self.accepting = True

    def accept(self) -> _ServerConnection | None:
        if not self.accepting:
            return None
        conn = _ServerConnection(self)
        self._connections.append(conn)
        return conn

    def frame(self, conn: _ServerConnection, data: bytes | str) -> None:
        if not conn.judged:
            conn.judged = True
            if len(data) > websocket.MAX_HANDSHAKE_BYTES:  # refused from the frame's header, as websockets does
                limit = websocket.MAX_HANDSHAKE_BYTES
                detail = AddressError("frame", f"handshake of {len(data)} bytes, at most {limit}")
                guarded(self.on_bad_handshake, "decode-error", str(detail))
                conn.close(TOO_BIG, refusal("decode-error"))
                return
            judged = verdict(data, self._authenticate)
            if isinstance(judged, tuple):
                guarded(self.on_bad_handshake, *judged)
                conn.close(websocket.REFUSED, refusal(judged[0]))
                return
            conn.client_id = judged
            previous = self.clients.get(judged)
            self.clients[judged] = conn
            if previous is not None:
                previous.close(NORMAL, "replaced by a new connection")
            guarded(self.on_client, judged)
            return
        if len(data) > websocket.MAX_WEBSOCKET_FRAME_BYTES:
            conn.close(TOO_BIG, "frame too big")
            return
        if conn.client_id is not None:
            guarded(self.on_frame, conn.client_id, data)

    def gone(self, conn: _ServerConnection) -> None:
        conn.forget()
        if conn in self._connections:
            self._connections.remove(conn)
        if conn.client_id is not None and self.clients.get(conn.client_id) is conn:
            del self.clients[conn.client_id]
            guarded(self.on_client_gone, conn.client_id)

    def send_soon(self, client_id: str, data: bytes, on_failed: Callable[[], None]) -> None:
        conn = self.clients.get(client_id)
        if conn is None or conn.channel is None:
            guarded(on_failed)
        else:
            conn.send(("frame", data))

    async def drain(self, timeout_s: float) -> None:
        """No new connections; each client gets what was queued for it, then a close, and
        what it sends until its close comes back is still handed on."""
        self.accepting = False
        waiting = []
        for conn in list(self.clients.values()):
            if conn.channel is not None:
                conn.send(("close", GOING_AWAY, "going away"))
                waiting.append(conn.closing)
        if waiting:
            await asyncio.wait(waiting, timeout=timeout_s)

    async def stop(self) -> None:
        self.accepting = False
        self.network.unlisten(self)
        for conn in list(self._connections):
            conn.close(GOING_AWAY, "going away")

    def abort(self) -> None:
        """A crash: every connection dies without a close."""
        self.accepting = False
        self.network.unlisten(self)
        for conn in list(self._connections):
            channel = conn.channel
            self.gone(conn)
            if channel is not None:
                channel.reset(by=conn)


class MemoryWebSocketClient:
    def __init__(
        self,
        network: MemoryNetwork,
        url: str,
        client_id: str,
        on_frame: Callable[[bytes | str], None],
        on_closed: Callable[[], Awaitable[None] | None],
        token: str | None = None,
    ) -> None:
        self.network = network
        self.url = url
        parts = urlsplit(url)
        self._address = (parts.hostname or "", parts.port or 0)
        self.client_id = client_id
        self.token = token
        self._on_frame, self._on_closed = on_frame, on_closed
        self._channel: Channel | None = None
        self._unconfirmed: list[tuple[bytes, Callable[[], None]]] | None = None
        self._unconfirmed_bytes = 0
        self._refused: list[tuple[bytes, Callable[[], None]]] = []
        self._opened: asyncio.Future[Channel | None] | None = None

    # -- the channel's end ---------------------------------------------------------------
    def received(self, packet: tuple) -> None:
        if packet[0] == "frame":
            self._unconfirmed = None  # the server hands frames to accepted clients only
            guarded(self._on_frame, packet[1])
            return
        code = packet[1]
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.to_server(("close", code, ""))  # the closing handshake's answer
            channel.close_from_client()
        if code == websocket.REFUSED and self._unconfirmed:
            self._refused = self._unconfirmed
        self._ended()

    def closed(self, reset: bool) -> None:
        if self._channel is not None:
            self._channel = None
            self._ended()

    def _ended(self) -> None:
        self._unconfirmed = None
        result = self._on_closed()
        if inspect.isawaitable(result):
            asyncio.ensure_future(result)

    # -- WebSocketClient's interface -------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._opened = opened = loop.create_future()
        link = self.network.link(self.client_id, None)

        def open_() -> None:
            if opened.done():
                return
            server = self.network.server_at(self._address)
            conn = server.accept() if server is not None else None
            if conn is None:
                opened.set_result(None)
                return
            channel = Channel(link, self, conn)
            conn.channel = channel
            opened.set_result(channel)

        def reset() -> None:
            if not opened.done():
                opened.set_exception(ConnectionResetError(f"WebSocket connection to {self.url} reset"))

        link.connect(open_, reset)  # a partitioned link refuses at once: ConnectionRefusedError
        try:
            channel = await asyncio.wait_for(opened, websocket.OPEN_TIMEOUT_S)
        except TimeoutError:
            raise TimeoutError(f"WebSocket handshake with {self.url}: no answer within "
                               f"{websocket.OPEN_TIMEOUT_S:g} s") from None
        if channel is None:
            raise ConnectionRefusedError(f"WebSocket connection to {self.url} refused")
        self._channel = channel
        channel.to_server(("frame", hello_frame(self.client_id, self.token)))
        self._unconfirmed, self._unconfirmed_bytes = [], 0
        refused, self._refused = self._refused, []
        for data, on_failed in refused:
            self.send_soon(data, on_failed)

    @property
    def connected(self) -> bool:
        return self._channel is not None

    async def send(self, data: bytes | str) -> bool:
        if self._channel is None:
            return False
        self._channel.to_server(("frame", data))
        return True

    def send_soon(self, data: bytes, on_failed: Callable[[], None]) -> None:
        if self._channel is None:
            guarded(on_failed)
            return
        self._unconfirmed, self._unconfirmed_bytes = kept_unconfirmed(
            self._unconfirmed, self._unconfirmed_bytes, data, on_failed)
        self._channel.to_server(("frame", data))

    async def stop(self) -> None:
        channel, self._channel = self._channel, None
        self._refused = []
        if channel is not None:
            channel.to_server(("close", NORMAL, ""))
            channel.close_from_client()

    def abort(self) -> None:
        channel, self._channel = self._channel, None
        self._refused = []
        if channel is not None:
            channel.reset(by=self)
