"""The memory network's WebSocket server and client: the first frame judged as the real
server judges it, a refused connection's frames sent again first on the next one, a
replaced client id, drain, abort and the frame limits, in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from joynr_sim.network import virtual_loop
from joynr_sim.network.links import Channel
from joynr_sim.network.memory import FIRST_PORT, MemoryNetwork
from joynr_sim.transport import websocket

CID, TOKEN = "lib-1", "token-of-lib-1"
SETTLE_S = 0.5  # far beyond the network's latency of a few hundred microseconds


class Server:
    """A memory WebSocket server with recording callbacks; accepts each id with its token."""

    def __init__(self, network: MemoryNetwork, tokens: dict[str, str]) -> None:
        self.frames: list[tuple[str, bytes | str]] = []
        self.clients: list[str] = []
        self.gone: list[str] = []
        self.bad: list[tuple[str, str]] = []
        self.ws = network.websocket_server(
            on_frame=lambda client, frame: self.frames.append((client, frame)),
            on_client=self.clients.append,
            on_client_gone=self.gone.append,
            on_bad_handshake=lambda reason, detail: self.bad.append((reason, detail)),
            authenticate=lambda client_id, token: tokens.get(client_id) == token,
        )

    @property
    def url(self) -> str:
        return f"ws://{self.ws.host}:{self.ws.port}"


class Client:
    """A memory WebSocket client that records frames, closes and every packet it receives
    (the close codes are not part of the client's interface)."""

    def __init__(self, network: MemoryNetwork, url: str, client_id: str = CID, token: str | None = TOKEN) -> None:
        self.frames: list[bytes | str] = []
        self.packets: list[tuple] = []
        self.closes = 0
        self.ws = network.websocket_client(url, client_id, on_frame=self.frames.append,
                                           on_closed=self._closed, token=token)
        deliver = self.ws.received

        def spy(packet: tuple) -> None:
            self.packets.append(packet)
            deliver(packet)

        self.ws.received = spy  # type: ignore[method-assign]

    def _closed(self) -> None:
        self.closes += 1

    @property
    def close_codes(self) -> list[int]:
        return [p[1] for p in self.packets if p[0] == "close"]


async def started(tokens: dict[str, str] | None = None) -> tuple[MemoryNetwork, Server]:
    network = MemoryNetwork(["gbid-a"], seed=7)
    server = Server(network, {CID: TOKEN} if tokens is None else tokens)
    await server.ws.start("127.0.0.1", 0)
    return network, server


def never_fails() -> None:
    raise AssertionError("a frame failed that should have been sent")


def test_an_accepted_client_exchanges_frames_both_ways_in_order() -> None:
    async def main() -> None:
        network, server = await started()
        assert server.ws.port == FIRST_PORT
        client = Client(network, server.url)
        await client.ws.start()
        assert client.ws.connected
        client.ws.send_soon(b"one", never_fails)
        assert await client.ws.send(b"two")
        await asyncio.sleep(SETTLE_S)
        assert server.clients == [CID] and server.bad == []
        assert server.frames == [(CID, b"one"), (CID, b"two")]
        server.ws.send_soon(CID, b"reply", never_fails)
        await asyncio.sleep(SETTLE_S)
        assert client.frames == [b"reply"] and client.closes == 0
        # A port in use is refused, as by a real bind.
        other = Server(network, {})
        with pytest.raises(OSError):
            await other.ws.start("127.0.0.1", server.ws.port)

    virtual_loop.run(main())


def test_sending_to_nobody_reports_the_failure() -> None:
    async def main() -> None:
        network, server = await started()
        failed: list[str] = []
        server.ws.send_soon("nobody", b"x", lambda: failed.append("server"))
        client = Client(network, server.url)
        client.ws.send_soon(b"x", lambda: failed.append("client"))  # not started
        assert not await client.ws.send(b"x")
        assert failed == ["server", "client"]

    virtual_loop.run(main())


def test_a_wrong_token_is_refused_with_1008_and_its_frames_go_first_on_the_next_connection() -> None:
    async def main() -> None:
        network, server = await started()
        client = Client(network, server.url, token="not-the-token")
        await client.ws.start()
        client.ws.send_soon(b"first", never_fails)
        client.ws.send_soon(b"second", never_fails)
        await asyncio.sleep(SETTLE_S)
        assert client.close_codes == [websocket.REFUSED]
        assert [reason for reason, _ in server.bad] == ["not-permitted"]
        assert server.frames == [] and server.clients == []  # nothing handed on
        assert not client.ws.connected and client.closes == 1

        client.ws.token = TOKEN
        await client.ws.start()
        client.ws.send_soon(b"third", never_fails)
        await asyncio.sleep(SETTLE_S)
        assert server.clients == [CID]
        assert server.frames == [(CID, b"first"), (CID, b"second"), (CID, b"third")]
        assert client.close_codes == [websocket.REFUSED]  # no second close

    virtual_loop.run(main())


def test_a_frame_after_acceptance_is_not_sent_again_after_a_later_close() -> None:
    async def main() -> None:
        network, server = await started()
        client = Client(network, server.url)
        await client.ws.start()
        server.ws.send_soon(CID, b"hello", never_fails)  # the client learns it was accepted
        await asyncio.sleep(SETTLE_S)
        client.ws.send_soon(b"once", never_fails)
        await asyncio.sleep(SETTLE_S)
        await server.ws.stop()
        await server.ws.start("127.0.0.1", server.ws.port)
        await client.ws.start()
        await asyncio.sleep(SETTLE_S)
        assert server.frames == [(CID, b"once")]

    virtual_loop.run(main())


def test_a_client_that_sends_no_first_frame_is_refused_after_the_handshake_timeout() -> None:
    class Silent:
        def __init__(self) -> None:
            self.packets: list[tuple] = []
            self.ended: list[bool] = []

        def received(self, packet: tuple) -> None:
            self.packets.append((asyncio.get_running_loop().time(), *packet))

        def closed(self, reset: bool) -> None:
            self.ended.append(reset)

    async def main() -> None:
        network, server = await started()
        silent = Silent()
        conn = server.ws.accept()
        assert conn is not None
        conn.channel = Channel(network.link("silent", None), silent, conn)
        await asyncio.sleep(60)
        [(when, kind, code, _reason)] = silent.packets
        assert (kind, code) == ("close", websocket.REFUSED)
        assert websocket.HANDSHAKE_TIMEOUT_S <= when < websocket.HANDSHAKE_TIMEOUT_S + SETTLE_S
        assert [reason for reason, _ in server.bad] == ["decode-error"]
        assert silent.ended == [False]

    virtual_loop.run(main())


def test_a_new_connection_with_the_same_client_id_replaces_the_old_one() -> None:
    async def main() -> None:
        network, server = await started()
        old, new = Client(network, server.url), Client(network, server.url)
        await old.ws.start()
        await asyncio.sleep(SETTLE_S)
        await new.ws.start()
        await asyncio.sleep(SETTLE_S)
        assert old.close_codes == [1000] and old.closes == 1 and not old.ws.connected
        assert new.ws.connected and new.close_codes == []
        assert server.clients == [CID, CID]
        assert server.gone == []  # the id never went away
        server.ws.send_soon(CID, b"to the new one", never_fails)
        new.ws.send_soon(b"from the new one", never_fails)
        await asyncio.sleep(SETTLE_S)
        assert (old.frames, new.frames) == ([], [b"to the new one"])
        assert server.frames == [(CID, b"from the new one")]

    virtual_loop.run(main())


def test_drain_sends_the_queued_frames_then_1001_and_hands_on_what_the_client_sent_before_its_close() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        network, server = await started()
        client = Client(network, server.url)
        await client.ws.start()
        await asyncio.sleep(SETTLE_S)
        server.ws.send_soon(CID, b"queued 1", never_fails)
        server.ws.send_soon(CID, b"queued 2", never_fails)
        client.ws.send_soon(b"on its way", never_fails)  # crosses the server's close
        began = loop.time()
        await server.ws.drain(30)
        assert loop.time() - began < SETTLE_S  # the client's close came back: no timeout
        assert client.packets == [("frame", b"queued 1"), ("frame", b"queued 2"),
                                  ("close", 1001, "going away")]
        assert server.frames == [(CID, b"on its way")]
        assert server.gone == [CID] and client.closes == 1
        with pytest.raises(ConnectionRefusedError):  # no new connections while draining
            await Client(network, server.url, "lib-2").ws.start()

    virtual_loop.run(main())


def test_drain_gives_up_on_a_client_that_never_answers_after_its_timeout() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        network, server = await started()
        client = Client(network, server.url)
        await client.ws.start()
        await asyncio.sleep(SETTLE_S)
        await network.link(CID, None).blackhole()
        began = loop.time()
        await server.ws.drain(30)
        assert loop.time() - began == pytest.approx(30)
        assert client.packets == []

    virtual_loop.run(main())


def test_abort_kills_every_connection_without_a_close_and_stops_listening() -> None:
    async def main() -> None:
        network, server = await started({CID: TOKEN, "lib-2": "t2"})
        first, second = Client(network, server.url), Client(network, server.url, "lib-2", "t2")
        await first.ws.start()
        await second.ws.start()
        await asyncio.sleep(SETTLE_S)
        first.ws.send_soon(b"lost in flight", never_fails)
        server.ws.abort()
        await asyncio.sleep(SETTLE_S)
        assert (first.closes, second.closes) == (1, 1)
        assert first.packets == second.packets == []  # a reset, no close frame
        assert not first.ws.connected and not second.ws.connected
        assert sorted(server.gone) == [CID, "lib-2"] and server.ws.clients == {}
        assert server.frames == []
        with pytest.raises(ConnectionRefusedError):
            await first.ws.start()

    virtual_loop.run(main())


def test_stop_closes_every_client_with_1001() -> None:
    async def main() -> None:
        network, server = await started()
        client = Client(network, server.url)
        await client.ws.start()
        await asyncio.sleep(SETTLE_S)
        await server.ws.stop()
        await asyncio.sleep(SETTLE_S)
        assert client.close_codes == [1001] and client.closes == 1
        assert server.gone == [CID]

    virtual_loop.run(main())


def test_a_frame_over_the_limit_closes_with_1009_and_is_not_handed_on() -> None:
    async def main() -> None:
        network, server = await started()
        client = Client(network, server.url)
        await client.ws.start()
        biggest = b"x" * websocket.MAX_WEBSOCKET_FRAME_BYTES
        client.ws.send_soon(biggest, never_fails)
        await asyncio.sleep(SETTLE_S)
        assert len(server.frames) == 1 and len(server.frames[0][1]) == len(biggest)
        assert client.close_codes == []
        client.ws.send_soon(biggest + b"x", never_fails)
        client.ws.send_soon(b"behind it", never_fails)
        await asyncio.sleep(SETTLE_S)
        assert client.close_codes == [1009] and client.closes == 1
        assert len(server.frames) == 1
        assert server.gone == [CID]

    virtual_loop.run(main())


def test_a_first_frame_over_the_handshake_limit_closes_with_1009() -> None:
    async def main() -> None:
        long_id = "l" * (websocket.MAX_HANDSHAKE_BYTES + 1)
        network, server = await started({long_id: TOKEN})
        client = Client(network, server.url, long_id)
        await client.ws.start()
        await asyncio.sleep(SETTLE_S)
        assert [reason for reason, _ in server.bad] == ["decode-error"]
        assert server.clients == []
        assert client.close_codes == [1009]

    virtual_loop.run(main())


def test_a_connection_that_cannot_open_fails_as_a_real_one_would() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        network, server = await started()
        with pytest.raises(ConnectionRefusedError):  # nobody listens there
            await Client(network, f"ws://127.0.0.1:{server.ws.port + 1}").ws.start()
        link = network.link(CID, None)
        await link.partition()
        with pytest.raises(ConnectionRefusedError):
            await Client(network, server.url).ws.start()
        await link.blackhole()
        began = loop.time()
        with pytest.raises(TimeoutError):  # the open hangs until the client gives up
            await Client(network, server.url).ws.start()
        assert loop.time() - began == pytest.approx(websocket.OPEN_TIMEOUT_S)
        await link.heal()
        await asyncio.sleep(SETTLE_S)
        assert server.clients == []  # the given-up open does not arrive late

    virtual_loop.run(main())
