"""A libjoynr runtime's end of the WebSocket transport: its one connection to its cluster
controller, and what it sends again after the server refused that connection.

A client sends its first frame (its ``WebSocketClientAddress`` with its ``token``, see
``websocket``) and its frames right after it, without waiting for the server to accept it
(joynr's protocol has no answer to it). A server that refuses that first frame closes with
code 1008 before it hands any frame on; the client keeps what it sent on a connection until
the server sends anything (at most ``MAX_UNCONFIRMED_FRAMES`` and
``MAX_UNCONFIRMED_BYTES``), and after such a close sends it again, first, on its next
connection, so nothing sent on a refused connection is lost.

Kept apart from the server because the two ends share only the protocol, not state: what
both need (the limits, the refusal code, the outgoing queue) lives in ``websocket`` and
``ws_outgoing``. The limits are read from ``websocket`` when used, so a limit set there
holds here too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from ..core.address import WebSocketClientAddress, to_dict
from . import websocket
from .websocket import guarded
from .ws_direct import DirectClientConnection
from .ws_outgoing import Outgoing


def hello_frame(client_id: str, token: str | None) -> str:
    """A client's first frame: its WebSocketClientAddress, with the token proving its id."""
    hello = to_dict(WebSocketClientAddress(client_id))
    if token is not None:
        hello["token"] = token
    return json.dumps(hello, separators=(",", ":"))


Unconfirmed = list[tuple[bytes, Callable[[], None]]]


def kept_unconfirmed(kept: Unconfirmed | None, kept_bytes: int, data: bytes, on_failed: Callable[[], None]
                     ) -> tuple[Unconfirmed | None, int]:
    """What a client keeps of the frames it sent before the server sent anything, with one
    more: None once more went than ``MAX_UNCONFIRMED_FRAMES`` or ``MAX_UNCONFIRMED_BYTES``
    (or the server answered), and then nothing more is kept on that connection."""
    if kept is None:
        return None, kept_bytes
    kept_bytes += len(data)
    if len(kept) < websocket.MAX_UNCONFIRMED_FRAMES and kept_bytes <= websocket.MAX_UNCONFIRMED_BYTES:
        kept.append((data, on_failed))
        return kept, kept_bytes
    return None, kept_bytes


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
        self._ws: DirectClientConnection | None = None
        self._outgoing: Outgoing | None = None
        self._reader: asyncio.Task | None = None
        # The frames sent on this connection before the server sent anything: if it then
        # closes the connection refusing its first frame (a server that read that frame
        # too late, or refused its token), it delivered none of them, so they go again,
        # first, on the next connection. None: the server has accepted this connection,
        # or more frames went than are kept.
        self._unconfirmed: list[tuple[bytes, Callable[[], None]]] | None = None
        self._unconfirmed_bytes = 0
        self._refused: list[tuple[bytes, Callable[[], None]]] = []

    async def start(self) -> None:
        try:
            # proxy=None: the cluster controller is local, and websockets would otherwise read
            # the proxy settings of the whole environment on every connect (a sixth of a
            # libjoynr runtime's start-up CPU in the profile).
            self._ws = await connect(  # type: ignore[assignment]  # create_connection's class
                self.url, max_size=websocket.MAX_WEBSOCKET_FRAME_BYTES, compression=None, proxy=None,
                open_timeout=websocket.OPEN_TIMEOUT_S, create_connection=DirectClientConnection,
            )
        except InvalidHandshake as exc:
            # A peer that went away mid-handshake is a connection that failed, like a refusal.
            raise ConnectionError(f"WebSocket handshake with {self.url} failed: {exc}") from None
        await self._ws.send(hello_frame(self.client_id, self.token))
        self._outgoing = Outgoing(self._ws)
        self._unconfirmed, self._unconfirmed_bytes = [], 0
        self._ws.on_data = self._received  # after _unconfirmed is set: a frame clears it
        self._reader = asyncio.create_task(self._read(self._ws))
        refused, self._refused = self._refused, []
        for data, on_failed in refused:
            self.send_soon(data, on_failed)

    def _received(self, frame: bytes | str) -> None:
        self._unconfirmed = None  # the server routes to accepted clients only
        guarded(self._on_frame, frame)

    async def _read(self, ws: DirectClientConnection) -> None:
        """Hands on what does not go the direct way (``ws_direct``); ends on close."""
        try:
            async for frame in ws:
                self._received(frame)
        except ConnectionClosed:
            pass
        ws.on_data = None
        if self._ws is ws:
            if ws.close_code == websocket.REFUSED and self._unconfirmed:
                self._refused = self._unconfirmed
            self._ws = self._outgoing = self._unconfirmed = None
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

    def send_soon(self, data: bytes, on_failed: Callable[[], None]) -> None:
        """Send a frame in the order of these calls; on_failed runs when it cannot be sent."""
        if self._outgoing is None:
            guarded(on_failed)
            return
        self._unconfirmed, self._unconfirmed_bytes = kept_unconfirmed(
            self._unconfirmed, self._unconfirmed_bytes, data, on_failed)
        self._outgoing.send(data, on_failed)

    async def stop(self) -> None:
        ws, self._ws = self._ws, None
        self._refused = []
        if self._outgoing is not None:
            self._outgoing.cancel()  # a stopped runtime sends nothing more
            self._outgoing = None
        if ws is not None:
            await ws.close()
        if self._reader is not None:
            await self._reader

    def abort(self) -> None:
        ws, self._ws = self._ws, None
        self._refused = []  # a crash loses them with the process's memory
        if self._outgoing is not None:
            self._outgoing.cancel()
            self._outgoing = None
        if ws is not None:
            ws.on_data = None  # a crashed runtime reads nothing more (its reader is cancelled)
            ws.transport.abort()
        if self._reader is not None:
            self._reader.cancel()
