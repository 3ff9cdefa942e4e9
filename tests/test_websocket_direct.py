"""Frames read the direct way: a binary frame reaches the receiver within the socket read that
completed it (no task runs the receiver), and nothing overtakes what still waits for the
connection's reading task: frames before the handshake was accepted, text, fragments."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from e2e_helpers import until
from joynr_sim.core.address import WebSocketClientAddress, to_dict
from joynr_sim.transport import websocket
from joynr_sim.transport.websocket import WebSocketClient, WebSocketServer

HELLO = json.dumps(to_dict(WebSocketClientAddress("app-1"))).encode()


class Received:
    """What a receiver got, each with the task it ran in (None: within a socket read)."""

    def __init__(self, fail_on: bytes | None = None) -> None:
        self.frames: list[bytes | str] = []
        self.tasks: list[asyncio.Task | None] = []
        self.fail_on = fail_on

    def __call__(self, *args: object) -> None:
        frame = args[-1]
        self.frames.append(frame)  # type: ignore[arg-type]
        self.tasks.append(asyncio.current_task())
        if frame == self.fail_on:
            raise RuntimeError("receiver failed")


class RawClient:
    """A WebSocket client that writes whole bursts of frames in one write (websockets'
    sans-I/O protocol, so a burst reaches the server in one read)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.protocol = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/"))

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.protocol.send_request(self.protocol.connect())
        self._flush()
        self.protocol.receive_data(await self.reader.readuntil(b"\r\n\r\n"))
        assert isinstance(self.protocol.events_received()[0], Response)
        assert self.protocol.state is State.OPEN

    def write(self, *frames: Frame) -> None:
        for frame in frames:
            self.protocol.send_frame(frame)
        self._flush()

    def _flush(self) -> None:
        self.writer.write(b"".join(self.protocol.data_to_send()))

    async def close_code(self) -> int | None:
        while data := await self.reader.read(65536):
            self.protocol.receive_data(data)
        self.protocol.receive_eof()
        return self.protocol.close_code

    def close(self) -> None:
        self.writer.close()


def binary(data: bytes, fin: bool = True) -> Frame:
    return Frame(Opcode.BINARY, data, fin=fin)


async def _server(received: Received) -> WebSocketServer:
    server = WebSocketServer(received, lambda cid: None, lambda cid: None, lambda reason, detail: None)
    await server.start()
    return server


@contextlib.asynccontextmanager
async def _raw_client(received: Received, accepted: bool = True) -> AsyncIterator[tuple[WebSocketServer, RawClient]]:
    """A server and a raw client connected to it; ``accepted``: the client has sent its
    handshake frame and the server accepted it."""
    server = await _server(received)
    raw = RawClient(server.port)
    try:
        await raw.open()
        if accepted:
            raw.write(Frame(Opcode.TEXT, HELLO))
            await until(lambda: "app-1" in server.clients)
        yield server, raw
    finally:
        raw.close()
        await server.stop()


async def test_a_frame_reaches_the_receiver_within_the_socket_read() -> None:
    at_server, at_client = Received(), Received()
    server = await _server(at_server)
    client = WebSocketClient(f"ws://127.0.0.1:{server.port}", "app-1", at_client, lambda: None)
    try:
        await client.start()
        await until(lambda: "app-1" in server.clients)
        client.send_soon(b"request", lambda: None)
        await until(lambda: at_server.frames == [b"request"])
        assert at_server.tasks == [None]  # not a reading task's turn: within data_received
        assert client._unconfirmed is not None
        server.send_soon("app-1", b"reply", lambda: None)
        await until(lambda: at_client.frames == [b"reply"])
        assert at_client.tasks == [None]
        assert client._unconfirmed is None  # a frame the direct way confirms as one read did
    finally:
        await client.stop()
        await server.stop()


async def test_a_burst_with_the_handshake_frame_keeps_its_order() -> None:
    received = Received()
    async with _raw_client(received, accepted=False) as (_, raw):
        # One read holds the handshake frame and the frames after it: those wait in
        # websockets' queue until the server accepted the client; then come the later ones.
        raw.write(Frame(Opcode.TEXT, HELLO), *(binary(b"%d" % n) for n in range(20)))
        raw.write(binary(b"20"))
        await until(lambda: len(received.frames) == 21)
        raw.write(binary(b"21"))
        await until(lambda: len(received.frames) == 22)
        assert received.frames == [b"%d" % n for n in range(22)]
        assert received.tasks[0] is not None  # before the handshake was accepted: the reader
        assert received.tasks[-1] is None  # after the queue emptied: the direct way


async def test_nothing_overtakes_text_or_a_fragmented_message_waiting_for_the_reader() -> None:
    received = Received()
    async with _raw_client(received) as (_, raw):
        # In one read: a text frame and a fragmented message go websockets' way; the
        # binary frames between and after them must wait their turn behind them.
        raw.write(Frame(Opcode.TEXT, b"text"), binary(b"after text"),
                  binary(b"frag", fin=False), Frame(Opcode.CONT, b"ment"), binary(b"after fragments"))
        await until(lambda: len(received.frames) == 4)
        raw.write(binary(b"later"))
        await until(lambda: len(received.frames) == 5)
        assert received.frames == ["text", b"after text", b"fragment", b"after fragments", b"later"]
        assert received.tasks[-1] is None


async def test_a_receiver_that_raises_does_not_end_the_connection() -> None:
    received = Received(fail_on=b"bad")
    async with _raw_client(received) as (server, raw):
        raw.write(binary(b"bad"), binary(b"good"))
        await until(lambda: len(received.frames) == 2)
        raw.write(binary(b"still good"))
        await until(lambda: len(received.frames) == 3)
        assert received.frames == [b"bad", b"good", b"still good"]
        assert received.tasks == [None, None, None]
        assert "app-1" in server.clients


async def test_a_frame_over_the_limit_still_closes_with_1009(monkeypatch) -> None:
    limit = len(HELLO)  # the handshake frame must still fit
    monkeypatch.setattr(websocket, "MAX_WEBSOCKET_FRAME_BYTES", limit)
    received = Received()
    async with _raw_client(received) as (_, raw):
        raw.write(binary(b"x" * limit), binary(b"y" * (limit + 1)), binary(b"z"))
        assert await raw.close_code() == 1009
        assert received.frames == [b"x" * limit]  # the frames after the one over it are not read
        assert received.tasks == [None]
