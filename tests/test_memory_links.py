"""Links and channels of the memory network: the fault proxy's faults (partition,
blackhole, delay, heal) and the memory network's own (duplicate, reorder), on packets
between two recording ends, in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from joynr_sim.network import virtual_loop
from joynr_sim.network.links import BASE_LATENCY_S, Channel, MemoryLink

SEED = 1234


class Peer:
    """One end of a channel that records what arrives, when, and how the connection ended."""

    def __init__(self) -> None:
        self.got: list[object] = []
        self.times: list[float] = []
        self.ended: list[bool] = []

    def received(self, packet: object) -> None:
        self.got.append(packet)
        self.times.append(asyncio.get_running_loop().time())

    def closed(self, reset: bool) -> None:
        self.ended.append(reset)


def connect(link: MemoryLink) -> tuple[Channel, Peer, Peer]:
    client, server = Peer(), Peer()
    return Channel(link, client, server), client, server


def test_packets_pass_each_way_in_order_after_the_networks_latency() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        channel, client, server = connect(MemoryLink("rt/gbid", SEED))
        for i in range(20):
            channel.to_server(("up", i))
            channel.to_client(("down", i))
        await asyncio.sleep(1)
        assert server.got == [("up", i) for i in range(20)]
        assert client.got == [("down", i) for i in range(20)]
        low, high = BASE_LATENCY_S
        assert low <= server.times[0] <= high
        assert server.times == sorted(server.times)
        assert loop.time() == 1.0

    virtual_loop.run(main())


def test_a_graceful_close_reaches_the_peer_after_what_was_sent_before_it() -> None:
    async def main() -> None:
        link = MemoryLink("rt/gbid", SEED)
        channel, client, server = connect(link)
        channel.to_server("last words")
        channel.close_from_client()
        channel.to_server("after the close")  # the client's end is closed: nothing more goes
        await asyncio.sleep(1)
        assert server.got == ["last words"]
        assert server.ended == [False]
        assert client.ended == []  # the closing side hears nothing more
        assert channel.dead and link.channels == set()

    virtual_loop.run(main())


def test_partition_resets_open_channels_at_once_and_refuses_new_connections_until_heal() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        link = MemoryLink("rt/gbid", SEED)
        first, c1, s1 = connect(link)
        second, c2, s2 = connect(link)
        first.to_server("in flight")  # lost with the connection
        assert await link.partition() == 2
        # Both ends learn it at the instant of the partition, as a reset.
        assert (c1.ended, s1.ended, c2.ended, s2.ended) == ([True], [True], [True], [True])
        assert link.channels == set()
        opened: list[float] = []
        with pytest.raises(ConnectionRefusedError, match="partitioned"):
            link.connect(lambda: opened.append(loop.time()))
        await asyncio.sleep(5)
        assert s1.got == [] and opened == []
        await link.heal()
        link.connect(lambda: opened.append(loop.time()))
        await asyncio.sleep(1)
        assert len(opened) == 1 and 5.0 < opened[0] < 5.0 + BASE_LATENCY_S[1] + 1e-9

    virtual_loop.run(main())


def test_blackhole_holds_packets_and_connections_and_heal_delivers_them_in_order() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        link = MemoryLink("rt/gbid", SEED)
        channel, client, server = connect(link)
        channel.to_server("before")  # in flight when the blackhole begins: held too
        assert await link.blackhole() == 1
        for i in range(5):
            channel.to_server(("up", i))
            channel.to_client(("down", i))
            await asyncio.sleep(1)
        opened: list[float] = []
        link.connect(lambda: opened.append(loop.time()))  # hangs: neither refused nor opened
        await asyncio.sleep(100)
        assert (server.got, client.got, opened) == ([], [], [])
        assert (server.ended, client.ended) == ([], [])  # the connection stays open
        assert await link.heal() == 1
        await asyncio.sleep(1)
        assert server.got == ["before", *(("up", i) for i in range(5))]
        assert client.got == [("down", i) for i in range(5)]
        # Delivered at the heal, not after further latency.
        assert set(server.times) == set(client.times) == {105.0}
        assert opened == [105.0]
        channel.to_server("after")
        await asyncio.sleep(1)
        assert server.got[-1] == "after"

    virtual_loop.run(main())


def test_delay_holds_every_packet_and_none_overtakes_another() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        channel, _client, server = connect(MemoryLink("rt/gbid", SEED))
        await channel.link.delay(100, 80)
        sent: list[float] = []
        for i in range(60):
            sent.append(loop.time())
            channel.to_server(i)
            await asyncio.sleep(0.002)  # far below the jitter: a free draw would overtake
        await asyncio.sleep(1)
        assert server.got == list(range(60))
        waits = [got - put for got, put in zip(server.times, sent)]
        assert min(waits) >= 0.1
        assert max(waits) <= 0.1 + 0.08 + 0.002 * 60 + BASE_LATENCY_S[1]

    virtual_loop.run(main())


def test_heal_after_a_delay_sends_what_waits_at_once() -> None:
    async def main() -> None:
        channel, _client, server = connect(MemoryLink("rt/gbid", SEED))
        await channel.link.delay(10_000, 0)
        channel.to_server("slow")
        await asyncio.sleep(1)
        await channel.link.heal()
        await asyncio.sleep(1)
        assert server.got == ["slow"] and server.times == [1.0]  # at the heal, not at 10 s

    virtual_loop.run(main())


def test_reorder_lets_a_later_packet_overtake_and_loses_nothing() -> None:
    async def main() -> None:
        channel, _client, server = connect(MemoryLink("rt/gbid", SEED))
        await channel.link.reorder(50)
        for i in range(50):
            channel.to_server(i)
            await asyncio.sleep(0.001)
        await asyncio.sleep(1)
        assert sorted(server.got) == list(range(50))
        assert server.got != list(range(50))
        assert server.times == sorted(server.times)
        await channel.link.heal()
        for i in range(50, 60):
            channel.to_server(i)
        await asyncio.sleep(1)
        assert server.got[50:] == list(range(50, 60))  # in order again after the heal

    virtual_loop.run(main())


def test_duplicate_delivers_each_packet_twice_and_never_the_close() -> None:
    async def main() -> None:
        link = MemoryLink("rt/gbid", SEED)
        channel, _client, server = connect(link)
        await link.duplicate(100)
        for i in range(10):
            channel.to_server(i)
        channel.close_from_client()
        await asyncio.sleep(1)
        assert sorted(server.got) == sorted(list(range(10)) * 2)
        assert server.ended == [False]  # one close, after the packets and their copies

    virtual_loop.run(main())


def test_duplicate_with_chance_zero_or_healed_delivers_once() -> None:
    async def main() -> None:
        link = MemoryLink("rt/gbid", SEED)
        channel, _client, server = connect(link)
        await link.duplicate(0)
        channel.to_server("a")
        await link.duplicate(100)
        await link.heal()
        channel.to_server("b")
        await asyncio.sleep(1)
        assert server.got == ["a", "b"]

    virtual_loop.run(main())


def _arrivals(seed: int | str, name: str = "rt/gbid", jitter_ms: int = 30) -> list[tuple[object, float]]:
    async def main() -> list[tuple[object, float]]:
        link = MemoryLink(name, seed)
        channel, _client, server = connect(link)
        for i in range(20):
            channel.to_server(i)
        await link.delay(5, jitter_ms)
        for i in range(20, 40):
            channel.to_server(i)
            await asyncio.sleep(0.001)
        await asyncio.sleep(1)
        return list(zip(server.got, server.times))

    return virtual_loop.run(main())


def test_the_same_seed_and_link_give_the_same_latencies_and_others_do_not() -> None:
    first = _arrivals(SEED)
    assert len(first) == 40
    assert _arrivals(SEED) == first
    assert [t for _, t in _arrivals(SEED + 1)] != [t for _, t in first]
    # Each link draws from its own generator: another link of the same run differs.
    assert [t for _, t in _arrivals(SEED, name="other/gbid")] != [t for _, t in first]


def test_latency_draws_repeat_for_a_seed_and_lie_within_the_bounds() -> None:
    draws = [MemoryLink("rt/gbid", "seed-a").latency_s() for _ in range(3)]
    assert len(set(draws)) == 1  # a new link with the same seed starts at the same draw
    link, again, other = (MemoryLink("rt/gbid", s) for s in ("seed-a", "seed-a", "seed-b"))
    sequence = [link.latency_s() for _ in range(100)]
    assert [again.latency_s() for _ in range(100)] == sequence
    assert [other.latency_s() for _ in range(100)] != sequence
    low, high = BASE_LATENCY_S
    assert all(low <= s <= high for s in sequence)


def test_close_resets_every_channel_and_forgets_waiting_connections() -> None:
    async def main() -> None:
        link = MemoryLink("rt/gbid", SEED)
        channel, client, server = connect(link)
        await link.blackhole()
        opened: list[bool] = []
        link.connect(lambda: opened.append(True))
        await link.close()
        await link.heal()
        await asyncio.sleep(1)
        assert (client.ended, server.ended, opened) == ([True], [True], [])
        assert channel.dead

    virtual_loop.run(main())
