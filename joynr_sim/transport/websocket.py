"""WebSocket transport between libjoynr runtimes and their cluster controller (websockets).

Longer than 400 lines because the server and the client are the two ends of one protocol
(the first frame, its refusal with 1008 and the client's sending again what a refused
connection held, the frame limits before and after it) and share the outgoing queue;
apart, each half would have to restate the other's side of it.

The cluster controller is the server. The first frame a client sends is its
``WebSocketClientAddress`` in joynr's JSON form, with one field joynr does not have: the
``token`` the simulation handed that runtime, so no other local client can take its id and
its replies. Every later frame is a binary msgpack message. Text frames after the
handshake and undecodable frames are the receiver's business (it traces them as
``decode-error``); the transport only moves bytes, and a receiver that raises never ends
the reading loop.

Frames are bounded: a frame over ``MAX_WEBSOCKET_FRAME_BYTES`` closes the connection
(websockets' own limit, code 1009); the receiver drops frames over its configured maximum
frame size below that. Until the server accepted a client's first frame, the limit is
``MAX_HANDSHAKE_BYTES``: a larger frame closes the connection with 1009 as soon as its
header announces it, and only its header is read, so a client that has not shown its token
costs the server a few kB, not a frame of 16 MiB. The first frame is judged within the read
that completed it, so frames an accepted client sent right behind it get the full limit;
it must arrive within ``HANDSHAKE_TIMEOUT_S``.

``send_soon`` writes a frame within the call when its connection can take it now (open,
not paused by flow control, nothing queued before it), without the asyncio task that each
``await ws.send`` from a callback needed (a task per frame was about half of websockets'
share of a fleet host's CPU). Otherwise the frame waits in the connection's queue, which
one task empties through ``ws.send`` and its flow control, so frames leave in the order of
the calls and a paused connection still holds back its senders' frames as before.

A client sends its frames right after its first one, without waiting for the server to
accept it (joynr's protocol has no answer to it). A server that refuses that first frame
(bad, late, or with another runtime's token) closes with code 1008 before it hands any
frame on; the client keeps what it sent on a connection until the server sends anything,
and after such a close sends it again, first, on its next connection, so nothing sent on a
refused connection is lost.

Frames are read the direct way (``ws_direct``): a binary frame goes to the receiver within
the socket read that completed it, without websockets' per-frame future and reading-task
turn; on the server only once it accepted the client's first frame. Frames that arrived
before, text frames and fragmented messages go through each connection's reading task, and
nothing overtakes them. That task still ends on close, which is what ``drain`` and the
client's reconnection wait for.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake, PayloadTooBig
from websockets.protocol import State

from ..core.address import AddressError, WebSocketClientAddress, from_json, to_dict
from ..core.limits import InvalidField, check_id, preview
from .ws_direct import DirectClientConnection, DirectServerConnection

# websockets' own default: how long a client waits for the opening handshake's answer.
OPEN_TIMEOUT_S = 10.0

HANDSHAKE_TIMEOUT_S = 5
REFUSED = 1008  # the close code of a connection whose first frame the server did not accept
# What a client keeps, per connection, until the server shows it accepted the connection;
# beyond either bound it keeps nothing more for that connection.
MAX_UNCONFIRMED_FRAMES = 1024
MAX_UNCONFIRMED_BYTES = 4 * 1024 * 1024
MAX_WEBSOCKET_FRAME_BYTES = 16 * 1024 * 1024
MAX_HANDSHAKE_BYTES = 4096
_log = logging.getLogger(__name__)


def _guarded(callback: Callable[..., object], *args: object) -> None:
    """Run a receiver's callback; its failure is logged, never the end of the connection."""
    try:
        callback(*args)
    except Exception:
        _log.exception("receiver of a WebSocket frame failed")


def _refusal(reason: str) -> str:
    """The close reason of a refused first frame."""
    return "not permitted" if reason == "not-permitted" else "expected a WebSocketClientAddress"


def _write_now(ws: ClientConnection | ServerConnection, data: bytes) -> bool | None:
    """A binary frame written within this call, as ``ws.send`` writes it before it awaits
    flow control: True once written, False when the socket failed (the connection is
    aborted, as ``ws.send`` would), None when the connection cannot take it now."""
    if (ws.protocol.state is not State.OPEN or ws.fragmented_send_waiter is not None
            or ws.paused or ws.transport.is_closing()):
        return None
    ws.protocol.send_binary(data)
    try:
        ws.send_data()
    except Exception:
        ws.transport.abort()
        return False
    return True


class _Outgoing:
    """One connection's frames in order: written at once while it can take them, else
    queued behind one task that awaits websockets' flow control for each."""

    def __init__(self, ws: ClientConnection | ServerConnection) -> None:
        self.ws = ws
        self._queue: deque[tuple[bytes, Callable[[], None]]] = deque()
        self._task: asyncio.Task | None = None

    def send(self, data: bytes, on_failed: Callable[[], None]) -> None:
        if not self._queue:
            written = _write_now(self.ws, data)
            if written is not None:
                if not written:
                    _guarded(on_failed)
                return
        self._queue.append((data, on_failed))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._empty())

    async def _empty(self) -> None:
        try:
            while self._queue:
                data, on_failed = self._queue[0]
                try:
                    await self.ws.send(data)
                except ConnectionClosed:
                    _guarded(on_failed)
                self._queue.popleft()
        finally:
            self._task = None

    async def flushed(self) -> None:
        """Until every frame handed over so far is written (or failed)."""
        while self._task is not None:
            await asyncio.shield(self._task)

    def cancel(self) -> None:
        """A crash: what is queued is lost with the process's memory."""
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()


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
        self._outgoing: dict[str, _Outgoing] = {}
        self._reading: dict[ServerConnection, asyncio.Task] = {}  # each connection's reader
        self._server: Server | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        # No permessage-deflate: joynr frames are small msgpack, and a deflate per frame on
        # both ends cost more CPU than the loopback bytes it saves.
        connection = functools.partial(DirectServerConnection, on_first=self._judge_first,
                                       first_max_size=MAX_HANDSHAKE_BYTES)
        self._server = await serve(self._handle, host, port, max_size=MAX_WEBSOCKET_FRAME_BYTES, compression=None,
                                   create_connection=connection)  # type: ignore[arg-type]  # a partial of the class
        self.port = self._server.sockets[0].getsockname()[1] if port == 0 else port

    def _judge_first(self, ws: DirectServerConnection, first: bytes | str) -> None:
        """Judges a client's first frame in the read that completed it: an accepted client
        gets the full frame limit for the frames behind it; a refused one is sent its 1008
        at once, so a frame over the handshake's limit behind it cannot turn the refusal
        into a 1009 (after which the client would not send its frames again)."""
        verdict = ws.verdict = self._verdict(first)
        if isinstance(verdict, str):
            ws.protocol.max_size = MAX_WEBSOCKET_FRAME_BYTES
        elif ws.protocol.state is State.OPEN:
            ws.protocol.send_close(REFUSED, _refusal(verdict[0]))

    def _verdict(self, first: bytes | str) -> str | tuple[str, str]:
        """The client id of an accepted first frame, else (drop reason, detail)."""
        try:
            if len(first) > MAX_HANDSHAKE_BYTES:
                raise AddressError("frame", f"handshake of {len(first)} bytes, at most {MAX_HANDSHAKE_BYTES}")
            address = from_json(first)
            if not isinstance(address, WebSocketClientAddress):
                raise AddressError("_typeName", "the first frame must be a WebSocketClientAddress")
            client_id = check_id(address.id, "id")
            token = json.loads(first).get("token")
        except (AddressError, InvalidField) as exc:
            return "decode-error", preview(str(exc), 200)
        if not self._authenticate(client_id, token):
            # Another local client claiming a runtime's id gets neither the id nor its replies.
            return "not-permitted", f"client {preview(client_id)} refused: not its token"
        return client_id

    async def _handle(self, ws: DirectServerConnection) -> None:
        try:
            first = await asyncio.wait_for(ws.recv(), HANDSHAKE_TIMEOUT_S)
        except (TimeoutError, ConnectionClosed) as exc:
            too_big = ws.protocol.parser_exc
            if isinstance(too_big, PayloadTooBig) and too_big.size is not None:
                # Refused from its header, before its payload was read (code 1009).
                size = too_big.size + (too_big.cur_size or 0)  # with what earlier fragments held
                detail = str(AddressError("frame", f"handshake of {size} bytes, at most {too_big.max_size}"))
            elif isinstance(exc, TimeoutError):
                detail = f"no complete first frame within {HANDSHAKE_TIMEOUT_S} s"
            else:
                detail = str(exc)
            _guarded(self._on_bad_handshake, "decode-error", preview(detail, 200))
            await ws.close(code=REFUSED, reason=_refusal("decode-error"))
            return
        verdict = ws.verdict if isinstance(ws.verdict, (str, tuple)) else self._verdict(first)  # in fragments
        if isinstance(verdict, tuple):
            reason, detail = verdict
            _guarded(self._on_bad_handshake, reason, detail)
            await ws.close(code=REFUSED, reason=_refusal(reason))  # if not sent already
            return
        client_id = verdict
        ws.protocol.max_size = MAX_WEBSOCKET_FRAME_BYTES
        previous = self.clients.get(client_id)
        self.clients[client_id] = ws
        self._outgoing[client_id] = _Outgoing(ws)
        if previous is not None:
            await previous.close(code=1000, reason="replaced by a new connection")
        _guarded(self._on_client, client_id)
        self._reading[ws] = asyncio.current_task()  # type: ignore[assignment]
        # From here a binary frame goes to on_frame within data_received; the loop below
        # hands on the rest (frames queued before, text, fragments) and ends on close.
        ws.on_data = functools.partial(_guarded, self._on_frame, client_id)
        try:
            async for frame in ws:
                _guarded(self._on_frame, client_id, frame)
        except ConnectionClosed:
            pass
        finally:
            ws.on_data = None  # nothing is handed on after the reader, as before
            self._reading.pop(ws, None)
            if self.clients.get(client_id) is ws:
                del self.clients[client_id]
                del self._outgoing[client_id]
                _guarded(self._on_client_gone, client_id)

    def send_soon(self, client_id: str, data: bytes, on_failed: Callable[[], None]) -> None:
        """Send a frame in the order of these calls; on_failed runs when it cannot be sent."""
        outgoing = self._outgoing.get(client_id)
        if outgoing is None:
            _guarded(on_failed)
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
        self._outgoing: _Outgoing | None = None
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
                self.url, max_size=MAX_WEBSOCKET_FRAME_BYTES, compression=None, proxy=None,
                open_timeout=OPEN_TIMEOUT_S, create_connection=DirectClientConnection,
            )
        except InvalidHandshake as exc:
            # A peer that went away mid-handshake is a connection that failed, like a refusal.
            raise ConnectionError(f"WebSocket handshake with {self.url} failed: {exc}") from None
        hello = to_dict(WebSocketClientAddress(self.client_id))
        if self.token is not None:
            hello["token"] = self.token
        await self._ws.send(json.dumps(hello, separators=(",", ":")))
        self._outgoing = _Outgoing(self._ws)
        self._unconfirmed, self._unconfirmed_bytes = [], 0
        self._ws.on_data = self._received  # after _unconfirmed is set: a frame clears it
        self._reader = asyncio.create_task(self._read(self._ws))
        refused, self._refused = self._refused, []
        for data, on_failed in refused:
            self.send_soon(data, on_failed)

    def _received(self, frame: bytes | str) -> None:
        self._unconfirmed = None  # the server routes to accepted clients only
        _guarded(self._on_frame, frame)

    async def _read(self, ws: DirectClientConnection) -> None:
        """Hands on what does not go the direct way (``ws_direct``); ends on close."""
        try:
            async for frame in ws:
                self._received(frame)
        except ConnectionClosed:
            pass
        ws.on_data = None
        if self._ws is ws:
            if ws.close_code == REFUSED and self._unconfirmed:
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
            _guarded(on_failed)
            return
        if self._unconfirmed is not None:
            self._unconfirmed_bytes += len(data)
            if len(self._unconfirmed) < MAX_UNCONFIRMED_FRAMES and self._unconfirmed_bytes <= MAX_UNCONFIRMED_BYTES:
                self._unconfirmed.append((data, on_failed))
            else:
                self._unconfirmed = None
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
