"""WebSocket transport between libjoynr runtimes and their cluster controller (websockets).

The cluster controller is the server. The first frame a client sends is its
``WebSocketClientAddress`` in joynr's JSON form, with one field joynr does not have: the
``token`` the simulation handed that runtime, so no other local client can take its id and
its replies. Every later frame is a binary msgpack message. Text frames after the
handshake and undecodable frames are the receiver's business (it traces them as
``decode-error``); the transport only moves bytes, and a receiver that raises never ends
the reading loop.

Frames are bounded: a frame over ``MAX_WEBSOCKET_FRAME_BYTES`` closes the connection
(websockets' own limit, code 1009); the receiver drops frames over its configured maximum
frame size below that.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from ..core.address import AddressError, WebSocketClientAddress, from_json, to_dict
from ..core.limits import InvalidField, check_id, preview

HANDSHAKE_TIMEOUT_S = 5
MAX_WEBSOCKET_FRAME_BYTES = 16 * 1024 * 1024
MAX_HANDSHAKE_BYTES = 4096
_log = logging.getLogger(__name__)


def _guarded(callback: Callable[..., object], *args: object) -> None:
    """Run a receiver's callback; its failure is logged, never the end of the connection."""
    try:
        callback(*args)
    except Exception:
        _log.exception("receiver of a WebSocket frame failed")


class WebSocketServer:
    """Accepts libjoynr runtimes; calls back with (client id, frame), on disconnect, and
    with (drop reason, detail) for a refused handshake."""

    def __init__(
        self,
        on_frame: Callable[[str, bytes | str], None],
        on_client: Callable[[str], None],
        on_client_gone: Callable[[str], None],
        on_bad_handshake: Callable[[str, str], None],
        authenticate: Callable[[str, object], bool] = lambda client_id, token: True,
    ) -> None:
        self._authenticate = authenticate
        self._on_frame = on_frame
        self._on_client = on_client
        self._on_client_gone = on_client_gone
        self._on_bad_handshake = on_bad_handshake
        self.clients: dict[str, ServerConnection] = {}
        self._server: Server | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        # No permessage-deflate: joynr frames are small msgpack, and a deflate per frame on
        # both ends cost more CPU than the loopback bytes it saves.
        self._server = await serve(self._handle, host, port, max_size=MAX_WEBSOCKET_FRAME_BYTES, compression=None)
        self.port = self._server.sockets[0].getsockname()[1] if port == 0 else port

    async def _handle(self, ws: ServerConnection) -> None:
        try:
            first = await asyncio.wait_for(ws.recv(), HANDSHAKE_TIMEOUT_S)
            if len(first) > MAX_HANDSHAKE_BYTES:
                raise AddressError("frame", f"handshake of {len(first)} bytes, at most {MAX_HANDSHAKE_BYTES}")
            address = from_json(first)
            if not isinstance(address, WebSocketClientAddress):
                raise AddressError("_typeName", "the first frame must be a WebSocketClientAddress")
            client_id = check_id(address.id, "id")
            token = json.loads(first).get("token")
        except (AddressError, InvalidField, TimeoutError, ConnectionClosed) as exc:
            _guarded(self._on_bad_handshake, "decode-error", preview(str(exc), 200))
            await ws.close(code=1008, reason="expected a WebSocketClientAddress")
            return
        if not self._authenticate(client_id, token):
            # Another local client claiming a runtime's id gets neither the id nor its replies.
            _guarded(self._on_bad_handshake, "not-permitted", f"client {preview(client_id)} refused: not its token")
            await ws.close(code=1008, reason="not permitted")
            return
        previous = self.clients.get(client_id)
        self.clients[client_id] = ws
        if previous is not None:
            await previous.close(code=1000, reason="replaced by a new connection")
        _guarded(self._on_client, client_id)
        try:
            async for frame in ws:
                _guarded(self._on_frame, client_id, frame)
        except ConnectionClosed:
            pass
        finally:
            if self.clients.get(client_id) is ws:
                del self.clients[client_id]
                _guarded(self._on_client_gone, client_id)

    async def send(self, client_id: str, data: bytes) -> bool:
        ws = self.clients.get(client_id)
        if ws is None:
            return False
        try:
            await ws.send(data)
            return True
        except ConnectionClosed:
            return False

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def abort(self) -> None:
        """Crash: every client connection dies without a close frame."""
        if self._server is not None:
            for ws in list(self.clients.values()):
                ws.transport.abort()
            self._server.close(close_connections=False)
            self._server = None


class WebSocketClient:
    """A libjoynr runtime's one connection to its cluster controller."""

    def __init__(
        self,
        url: str,
        client_id: str,
        on_frame: Callable[[bytes | str], None],
        on_closed: Callable[[], Awaitable[None] | None],
        token: str | None = None,
    ) -> None:
        self.url = url
        self.client_id = client_id
        self.token = token
        self._on_frame = on_frame
        self._on_closed = on_closed
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task | None = None

    async def start(self) -> None:
        try:
            # proxy=None: the cluster controller is local, and websockets would otherwise read
            # the proxy settings of the whole environment on every connect (a sixth of a
            # libjoynr runtime's start-up CPU in the profile).
            self._ws = await connect(self.url, max_size=MAX_WEBSOCKET_FRAME_BYTES, compression=None, proxy=None)
        except InvalidHandshake as exc:
            # A peer that went away mid-handshake is a connection that failed, like a refusal.
            raise ConnectionError(f"WebSocket handshake with {self.url} failed: {exc}") from None
        hello = to_dict(WebSocketClientAddress(self.client_id))
        if self.token is not None:
            hello["token"] = self.token
        await self._ws.send(json.dumps(hello, separators=(",", ":")))
        self._reader = asyncio.create_task(self._read(self._ws))

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for frame in ws:
                _guarded(self._on_frame, frame)
        except ConnectionClosed:
            pass
        if self._ws is ws:
            self._ws = None
            result = self._on_closed()
            if asyncio.iscoroutine(result):
                await result

    @property
    def connected(self) -> bool:
        return self._ws is not None

    async def send(self, data: bytes | str) -> bool:
        ws = self._ws
        if ws is None:
            return False
        try:
            await ws.send(data)
            return True
        except ConnectionClosed:
            return False

    async def stop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()
        if self._reader is not None:
            await self._reader

    def abort(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.transport.abort()
        if self._reader is not None:
            self._reader.cancel()
