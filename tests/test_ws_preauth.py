"""A client that has not shown its token costs the server a few kB: until its first frame is
accepted, a frame over the handshake's limit is refused from its header (1009) before its
payload is read, and a first frame must come within the handshake's time; once accepted,
the client gets the full frame limit, also for the frames it sent right behind its first."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import struct

from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from e2e_helpers import until
from joynr_sim.core.address import WebSocketClientAddress, to_dict
from joynr_sim.transport import websocket
from joynr_sim.transport.websocket import (
    MAX_HANDSHAKE_BYTES,
    MAX_WEBSOCKET_FRAME_BYTES,
    REFUSED,
    WebSocketClient,
    WebSocketServer,
)

TOKEN = "secret-of-app-1"
MIB = 1024 * 1024
TOO_BIG = 1009


def hello(token: str = TOKEN, size: int | None = None) -> bytes:
    """app-1's first frame; ``size``: padded with JSON whitespace to that many bytes."""
    text = json.dumps({**to_dict(WebSocketClientAddress("app-1")), "token": token}).encode()
    return text if size is None else text + b" " * (size - len(text))


def header(length: int, opcode: Opcode = Opcode.BINARY) -> bytes:
    """The header of a final client frame announcing ``length`` bytes (a zero mask, so the
    payload goes as it is)."""
    return struct.pack("!BBQ", 0x80 | opcode.value, 0x80 | 127, length) + b"\0\0\0\0"


class Server:
    """A WebSocketServer that admits app-1 with TOKEN and keeps what it calls back with."""

    def __init__(self) -> None:
        self.frames: list[bytes | str] = []
        self.refused: list[tuple[str, str]] = []
        self.ws = WebSocketServer(
            lambda client, frame: self.frames.append(frame), lambda client: None, lambda client: None,
            lambda reason, detail: self.refused.append((reason, detail)),
            authenticate=lambda client, token: client == "app-1" and token == TOKEN,
        )

    async def __aenter__(self) -> Server:
        await self.ws.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.stop()


class RawClient:
    """A client that writes bytes of its own choosing after the HTTP upgrade, and reads what
    the server sends until the server's close frame (or the end of the connection)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.protocol = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/"))
        self.ended: asyncio.Task | None = None

    async def open(self) -> RawClient:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.protocol.send_request(self.protocol.connect())
        self.writer.write(b"".join(self.protocol.data_to_send()))
        self.protocol.receive_data(await self.reader.readuntil(b"\r\n\r\n"))
        assert isinstance(self.protocol.events_received()[0], Response)
        assert self.protocol.state is State.OPEN
        self.ended = asyncio.ensure_future(self._read_to_the_end())
        return self

    async def _read_to_the_end(self) -> None:
        while self.protocol.close_rcvd is None and (data := await self.reader.read(65536)):
            self.protocol.receive_data(data)
        # Once the server's close came (or its end of the connection), this client ends its
        # own: its close frame could not follow a frame it left unfinished.
        self.writer.close()

    async def close_code(self) -> int | None:
        """The code of the server's close frame, once it came."""
        assert self.ended is not None
        await asyncio.wait_for(asyncio.shield(self.ended), 60)
        close = self.protocol.close_rcvd
        return None if close is None else close.code

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    async def announce(self, length: int) -> int:
        """Sends the header of a frame of ``length`` bytes, then its payload but its last
        byte, in blocks as the socket takes them, until the server ends the connection;
        returns how many bytes of the payload went."""
        assert self.ended is not None
        self.write(header(length))
        block, sent = bytes(64 * 1024), 0
        try:
            while sent < length - 1 and not self.ended.done():
                n = min(len(block), length - 1 - sent)
                self.writer.write(block[:n])
                await self.writer.drain()
                sent += n
                await asyncio.sleep(0)  # the reader's turn: has the server ended the connection?
        except ConnectionError:
            pass
        return sent

    def close(self) -> None:
        if self.ended is not None:
            self.ended.cancel()
        self.writer.close()


def too_big(size: int) -> str:
    """The detail of a first frame refused from its header, as the trace gets it."""
    return repr(f"address field 'frame': handshake of {size} bytes, at most {MAX_HANDSHAKE_BYTES}")


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_a_first_frame_of_a_mib_is_refused_from_its_header() -> None:
    async with Server() as server:
        raw = await RawClient(server.ws.port).open()
        try:
            raw.write(header(MIB) + b'{"_typeName"')  # the header and a few bytes, never the rest
            assert await raw.close_code() == TOO_BIG  # so the server did not wait for the payload
            await until(lambda: server.refused)
            assert server.refused == [("decode-error", too_big(MIB))]
            assert server.frames == [] and server.ws.clients == {}
        finally:
            raw.close()


async def test_the_handshake_limit_is_its_4096_bytes() -> None:
    async with Server() as server:
        at_limit = await RawClient(server.ws.port).open()
        over = await RawClient(server.ws.port).open()
        try:
            over.write(header(MAX_HANDSHAKE_BYTES + 1, Opcode.TEXT) + hello(size=MAX_HANDSHAKE_BYTES + 1))
            assert await over.close_code() == TOO_BIG
            at_limit.write(header(MAX_HANDSHAKE_BYTES, Opcode.TEXT) + hello(size=MAX_HANDSHAKE_BYTES))
            await until(lambda: "app-1" in server.ws.clients)
            assert server.refused == [("decode-error", too_big(MAX_HANDSHAKE_BYTES + 1))]
        finally:
            at_limit.close()
            over.close()


async def test_30_clients_announcing_16_mib_first_frames_cost_the_server_little_memory() -> None:
    async with Server() as server:
        clients = [await RawClient(server.ws.port).open() for _ in range(30)]
        peak = before = 0

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss_bytes())
                await asyncio.sleep(0.005)

        try:
            gc.collect()
            peak = before = rss_bytes()
            sampler = asyncio.ensure_future(sample())
            sent = await asyncio.gather(*(raw.announce(MAX_WEBSOCKET_FRAME_BYTES) for raw in clients))
            held = rss_bytes() - before  # every connection still open, or ended by the server
            sampler.cancel()
            codes = await asyncio.gather(*(raw.close_code() for raw in clients))
            grown = max(peak, before + held) - before
            print(f"\nRSS before {before / MIB:.1f} MiB; after 30 first frames announcing 16 MiB: "
                  f"+{held / MIB:.1f} MiB, at most +{grown / MIB:.1f} MiB; payload sent {sum(sent) / MIB:.1f} MiB")
            assert grown < 20 * 10**6, f"the server buffered {grown / MIB:.1f} MiB for 30 unauthenticated clients"
            assert codes == [TOO_BIG] * 30
            await until(lambda: len(server.refused) == 30)
            assert server.refused == [("decode-error", too_big(MAX_WEBSOCKET_FRAME_BYTES))] * 30
        finally:
            for raw in clients:
                raw.close()


async def test_a_first_frame_must_come_within_the_handshake_time(monkeypatch) -> None:
    monkeypatch.setattr(websocket, "HANDSHAKE_TIMEOUT_S", 0.2)
    async with Server() as server:
        raw = await RawClient(server.ws.port).open()
        try:
            first = hello()
            raw.write(header(len(first), Opcode.TEXT) + first[:10])  # a trickle that stops
            assert await raw.close_code() == REFUSED
            assert server.refused == [("decode-error", repr("no complete first frame within 0.2 s"))]
        finally:
            raw.close()


async def test_an_accepted_client_gets_the_full_limit_also_for_frames_right_behind_its_first() -> None:
    big = bytes(2 * MIB)
    async with Server() as server:
        raw = await RawClient(server.ws.port).open()
        try:
            # In one write: the header of the 2 MiB frame reaches the server with the first frame.
            first = hello()
            raw.write(header(len(first), Opcode.TEXT) + first + header(len(big)) + big)
            await until(lambda: server.frames == [big])
            raw.write(header(len(big)) + big)
            await until(lambda: server.frames == [big, big])
            assert server.refused == [] and not raw.ended.done()  # type: ignore[union-attr]
        finally:
            raw.close()


async def test_a_libjoynr_client_sends_2_mib_frames_after_its_handshake() -> None:
    big = b"m" * (2 * MIB)
    async with Server() as server:
        client = WebSocketClient(f"ws://127.0.0.1:{server.ws.port}", "app-1", lambda frame: None, lambda: None,
                                 token=TOKEN)
        try:
            await client.start()
            client.send_soon(big, lambda: None)  # before the server accepted it, as libjoynr sends
            await until(lambda: "app-1" in server.ws.clients)
            client.send_soon(big + b"2", lambda: None)
            await until(lambda: len(server.frames) == 2)
            assert server.frames == [big, big + b"2"] and server.refused == []
        finally:
            await client.stop()


async def test_a_refused_client_sees_1008_even_with_a_big_frame_behind_its_first() -> None:
    # The client sends again, on its next connection, what a 1008 refused; a frame over the
    # handshake's limit right behind a refused first frame must not turn that into a 1009.
    async with Server() as server:
        raw = await RawClient(server.ws.port).open()
        try:
            first = hello(token="not-the-token")
            raw.write(header(len(first), Opcode.TEXT) + first + header(64 * 1024) + bytes(64 * 1024))
            assert await raw.close_code() == REFUSED
            assert server.refused == [("not-permitted", "client 'app-1' refused: not its token")]
            assert server.frames == []
        finally:
            raw.close()
