"""The cluster controller's end of the WebSocket transport: it accepts libjoynr runtimes,
judges each one's first frame and routes frames to and from the accepted ones.

The first frame a client sends is its ``WebSocketClientAddress`` with its ``token``
(the protocol and its limits: ``websocket``). Until the server accepted it, a client's
frames are bounded by ``MAX_HANDSHAKE_BYTES``: a larger frame closes the connection with
1009 as soon as its header announces it, and only its header is read, so a client that has
not shown its token costs the server a few kB, not a frame of 16 MiB. The first frame is
judged within the read that completed it (``ws_direct``'s ``on_first``), so frames an
accepted client sent right behind it get the full limit; it must arrive within
``HANDSHAKE_TIMEOUT_S``. A refused first frame (bad, late, or with another runtime's
token) is answered with a close of code 1008 before any frame of that client is handed on.

Kept apart from the client because the two ends share only the protocol, not state: what
both need (the limits, the refusal code, the outgoing queue) lives in ``websocket`` and
``ws_outgoing``. The limits are read from ``websocket`` when used, so a limit set there
holds here too.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, PayloadTooBig
from websockets.protocol import State

from ..core.address import AddressError, WebSocketClientAddress, from_json
from ..core.limits import InvalidField, check_id, preview
from . import websocket
from .websocket import guarded
from .ws_direct import DirectServerConnection
from .ws_outgoing import Outgoing


def refusal(reason: str) -> str:
    """The close reason of a refused first frame."""
    return "not permitted" if reason == "not-permitted" else "expected a WebSocketClientAddress"


def verdict(first: bytes | str, authenticate: Callable[[str, object], bool]) -> str | tuple[str, str]:
    """The client id of an accepted first frame, else (drop reason, detail): the judgement
    of every WebSocket server, real or on the memory network."""
    try:
        if len(first) > websocket.MAX_HANDSHAKE_BYTES:
            raise AddressError("frame", f"handshake of {len(first)} bytes, at most {websocket.MAX_HANDSHAKE_BYTES}")
        address = from_json(first)
        if not isinstance(address, WebSocketClientAddress):
            raise AddressError("_typeName", "the first frame must be a WebSocketClientAddress")
        client_id = check_id(address.id, "id")
        token = json.loads(first).get("token")
    except (AddressError, InvalidField) as exc:
        return "decode-error", preview(str(exc), 200)
    if not authenticate(client_id, token):
        # Another local client claiming a runtime's id gets neither the id nor its replies.
        return "not-permitted", f"client {preview(client_id)} refused: not its token"
    return client_id


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
        self._outgoing: dict[str, Outgoing] = {}
        self._reading: dict[ServerConnection, asyncio.Task] = {}  # each connection's reader
        self._server: Server | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        # No permessage-deflate: joynr frames are small msgpack, and a deflate per frame on
        # both ends cost more CPU than the loopback bytes it saves.
        connection = functools.partial(DirectServerConnection, on_first=self._judge_first,
                                       first_max_size=websocket.MAX_HANDSHAKE_BYTES)
        self._server = await serve(self._handle, host, port, max_size=websocket.MAX_WEBSOCKET_FRAME_BYTES,
                                   compression=None,
                                   create_connection=connection)  # type: ignore[arg-type]  # a partial of the class
        self.port = self._server.sockets[0].getsockname()[1] if port == 0 else port

    def _judge_first(self, ws: DirectServerConnection, first: bytes | str) -> None:
        """Judges a client's first frame in the read that completed it: an accepted client
        gets the full frame limit for the frames behind it; a refused one is sent its 1008
        at once, so a frame over the handshake's limit behind it cannot turn the refusal
        into a 1009 (after which the client would not send its frames again)."""
        verdict = ws.verdict = self._verdict(first)
        if isinstance(verdict, str):
            ws.protocol.max_size = websocket.MAX_WEBSOCKET_FRAME_BYTES
        elif ws.protocol.state is State.OPEN:
            ws.protocol.send_close(websocket.REFUSED, refusal(verdict[0]))

    def _verdict(self, first: bytes | str) -> str | tuple[str, str]:
        return verdict(first, self._authenticate)

    async def _handle(self, ws: DirectServerConnection) -> None:
        try:
            first = await asyncio.wait_for(ws.recv(), websocket.HANDSHAKE_TIMEOUT_S)
        except (TimeoutError, ConnectionClosed) as exc:
            too_big = ws.protocol.parser_exc
            if isinstance(too_big, PayloadTooBig) and too_big.size is not None:
                # Refused from its header, before its payload was read (code 1009).
                size = too_big.size + (too_big.cur_size or 0)  # with what earlier fragments held
                detail = str(AddressError("frame", f"handshake of {size} bytes, at most {too_big.max_size}"))
            elif isinstance(exc, TimeoutError):
                detail = f"no complete first frame within {websocket.HANDSHAKE_TIMEOUT_S} s"
            else:
                detail = str(exc)
            guarded(self._on_bad_handshake, "decode-error", preview(detail, 200))
            await ws.close(code=websocket.REFUSED, reason=refusal("decode-error"))
            return
        verdict = ws.verdict if isinstance(ws.verdict, (str, tuple)) else self._verdict(first)  # in fragments
        if isinstance(verdict, tuple):
            reason, detail = verdict
            guarded(self._on_bad_handshake, reason, detail)
            await ws.close(code=websocket.REFUSED, reason=refusal(reason))  # if not sent already
            return
        client_id = verdict
        ws.protocol.max_size = websocket.MAX_WEBSOCKET_FRAME_BYTES
        previous = self.clients.get(client_id)
        self.clients[client_id] = ws
        self._outgoing[client_id] = Outgoing(ws)
        if previous is not None:
            await previous.close(code=1000, reason="replaced by a new connection")
        guarded(self._on_client, client_id)
        self._reading[ws] = asyncio.current_task()  # type: ignore[assignment]
        # From here a binary frame goes to on_frame within data_received; the loop below
        # hands on the rest (frames queued before, text, fragments) and ends on close.
        ws.on_data = functools.partial(guarded, self._on_frame, client_id)
        try:
            async for frame in ws:
                guarded(self._on_frame, client_id, frame)
        except ConnectionClosed:
            pass
        finally:
            ws.on_data = None  # nothing is handed on after the reader, as before
            self._reading.pop(ws, None)
            if self.clients.get(client_id) is ws:
                del self.clients[client_id]
                del self._outgoing[client_id]
                guarded(self._on_client_gone, client_id)

    def send_soon(self, client_id: str, data: bytes, on_failed: Callable[[], None]) -> None:
        """Send a frame in the order of these calls; on_failed runs when it cannot be sent."""
        outgoing = self._outgoing.get(client_id)
        if outgoing is None:
            guarded(on_failed)
        else:
            outgoing.send(data, on_failed)

    async def drain(self, timeout_s: float) -> None:
        """The first part of a graceful stop: no new connections; each client gets the
        frames queued for it, then the closing handshake. Until its Close comes back, what
        the client sent is still read and handed to ``on_frame`` (RFC 6455 lets the side
        that sent a Close receive data frames until the peer's Close; the peer sends none
        after it, and what it could not send is its own to send again). Bounded by
        ``timeout_s``: ``stop`` ends what is left."""
        if self._server is None:
            return
        self._server.server.close()  # no new connections; the open ones stay until closed here
        closing = [asyncio.ensure_future(self._close_client(client_id, ws)) for client_id, ws in self.clients.items()]
        if closing:
            _, late = await asyncio.wait(closing, timeout=timeout_s)
            for task in late:
                task.cancel()

    async def _close_client(self, client_id: str, ws: ServerConnection) -> None:
        outgoing = self._outgoing.get(client_id)
        if outgoing is not None:
            await outgoing.flushed()
        await ws.close(code=1001, reason="going away")
        reading = self._reading.get(ws)
        if reading is not None:  # until the frames read before the close are handed on
            await asyncio.shield(reading)

    async def stop(self) -> None:
        for outgoing in self._outgoing.values():
            outgoing.cancel()  # a stopped runtime sends nothing more, as its cancelled tasks did
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def abort(self) -> None:
        """Crash: every client connection dies without a close frame."""
        if self._server is not None:
            for ws in list(self.clients.values()):
                ws.transport.abort()
            for outgoing in self._outgoing.values():
                outgoing.cancel()
            self._server.close(close_connections=False)
            self._server = None
