"""Faults on links: the fault proxy alone, on loopback sockets, then in a simulation on real
brokers (a cluster controller cut off its broker, a libjoynr runtime's WebSocket held or
slowed), and the validation of ``sim.faults``' arguments.

A negative check ("nothing passes") waits a bounded ``QUIET_S`` for bytes that must not
come; every positive check waits for what must come, with a bound only against hanging.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import jsonschema
import pytest

import trace_schema
from joynr_sim.core.address import MqttAddress
from joynr_sim.faults import FaultProxy
from joynr_sim.runtime.participants import EchoProvider, JoynrTimeoutException
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_run
from joynr_sim.transport import websocket

pytestmark = pytest.mark.e2e  # sockets on loopback; the simulation tests run brokers

QUIET_S = 0.3  # how long bytes that must not pass are waited for
BOUND_S = 10.0  # against hanging only
PROVIDER = "echo-provider"


# -- the proxy alone ------------------------------------------------------------------------


class Upstream:
    """A TCP server that records each connection's streams, on a fixed port once started."""

    def __init__(self) -> None:
        self.accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        self.server = await asyncio.start_server(
            lambda r, w: self.accepted.put_nowait((r, w)), "127.0.0.1", port
        )
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def next(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(self.accepted.get(), BOUND_S)


async def proxy_for(upstream: Upstream) -> FaultProxy:
    proxy = FaultProxy("test", lambda: ("127.0.0.1", upstream.port), seed=7)
    await proxy.start()
    return proxy


async def connect(proxy: FaultProxy, upstream: Upstream):
    """A client connection through the proxy and the upstream's side of it, shown to pass."""
    client = await asyncio.open_connection(*proxy.address)
    server = await upstream.next()
    await exchange(client, server, b"hello")
    return client, server


async def exchange(client, server, data: bytes) -> None:
    """``data`` goes up, then back down: both directions pass."""
    client[1].write(data)
    assert await asyncio.wait_for(server[0].readexactly(len(data)), BOUND_S) == data
    server[1].write(data[::-1])
    assert await asyncio.wait_for(client[0].readexactly(len(data)), BOUND_S) == data[::-1]


async def nothing_arrives(reader: asyncio.StreamReader) -> bool:
    try:
        await asyncio.wait_for(reader.read(1), QUIET_S)
    except TimeoutError:
        return True
    return False


@pytest.fixture
async def upstream():
    up = Upstream()
    await up.start()
    yield up
    await up.stop()


async def test_bytes_pass_both_ways_intact_and_in_order(upstream):
    proxy = await proxy_for(upstream)
    client, server = await connect(proxy, upstream)
    big = bytes(range(256)) * 12_000  # 3 MB: more than the proxy queues before it pushes back
    client[1].write(big)
    assert await asyncio.wait_for(server[0].readexactly(len(big)), BOUND_S) == big
    assert proxy.fault is None and proxy.connections == 1
    # An end of stream passes as one; the other direction still carries bytes.
    client[1].write_eof()
    assert await asyncio.wait_for(server[0].read(), BOUND_S) == b""
    server[1].write(b"last")
    server[1].close()
    assert await asyncio.wait_for(client[0].read(), BOUND_S) == b"last"
    await proxy.close()


async def test_both_sockets_of_a_connection_send_small_frames_without_waiting(upstream):
    """TCP_NODELAY on both of the proxy's sockets: otherwise every small MQTT or WebSocket
    frame behind another waits for the peer's delayed ACK."""
    proxy = await proxy_for(upstream)
    await connect(proxy, upstream)
    (pair,) = proxy._pairs
    for end in (pair.down, pair.up):
        assert end.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    await proxy.close()


async def test_partition_resets_connections_and_refuses_new_ones_until_heal(upstream):
    proxy = await proxy_for(upstream)
    client, server = await connect(proxy, upstream)

    assert await proxy.partition() == 1
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(client[0].read(1), BOUND_S)
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(server[0].read(1), BOUND_S)
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection(*proxy.address)

    await proxy.heal()
    await connect(proxy, upstream)  # on the same port
    await proxy.close()


async def test_blackhole_passes_nothing_keeps_the_connection_and_delivers_held_bytes_at_heal(upstream):
    proxy = await proxy_for(upstream)
    client, server = await connect(proxy, upstream)

    await proxy.blackhole()
    client[1].write(b"up")
    server[1].write(b"down")
    assert await nothing_arrives(server[0])
    assert await nothing_arrives(client[0])
    assert not client[1].is_closing() and not server[1].is_closing()
    # A new connection is accepted and hangs: the upstream never hears of it.
    late = await asyncio.open_connection(*proxy.address)
    late[1].write(b"late")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(upstream.accepted.get(), QUIET_S)

    await proxy.heal()
    # The held bytes arrive on the connections that held them, in order.
    assert await asyncio.wait_for(server[0].readexactly(2), BOUND_S) == b"up"
    assert await asyncio.wait_for(client[0].readexactly(4), BOUND_S) == b"down"
    await exchange(client, server, b"again")
    late_server = await upstream.next()
    assert await asyncio.wait_for(late_server[0].readexactly(4), BOUND_S) == b"late"
    await proxy.close()


async def test_delay_holds_each_direction_at_least_its_ms(upstream):
    proxy = await proxy_for(upstream)
    client, server = await connect(proxy, upstream)
    loop = asyncio.get_running_loop()

    await proxy.delay(150)
    start = loop.time()
    await exchange(client, server, b"ping")
    assert loop.time() - start >= 2 * 0.150
    await proxy.close()


async def test_delay_with_jitter_keeps_the_byte_order(upstream):
    proxy = await proxy_for(upstream)
    client, server = await connect(proxy, upstream)
    await proxy.delay(1, jitter_ms=40)
    chunks = [f"{i:03d}".encode() for i in range(60)]
    for chunk in chunks:
        client[1].write(chunk)
        await client[1].drain()
        await asyncio.sleep(0.002)  # separate chunks at the proxy, each with its own jitter
    assert await asyncio.wait_for(server[0].readexactly(180), BOUND_S) == b"".join(chunks)
    await proxy.close()


async def test_heal_passes_what_waits_out_a_delay_at_once(upstream):
    proxy = await proxy_for(upstream)
    client, server = await connect(proxy, upstream)
    await proxy.delay(600_000)
    client[1].write(b"slow")
    assert await nothing_arrives(server[0])
    await proxy.heal()
    assert await asyncio.wait_for(server[0].readexactly(4), BOUND_S) == b"slow"
    await proxy.close()


async def test_a_connection_waits_for_an_upstream_restarted_on_the_same_port(upstream):
    proxy = await proxy_for(upstream)
    await upstream.stop()
    client = await asyncio.open_connection(*proxy.address)
    client[1].write(b"early")
    await upstream.start(upstream.port)
    server = await upstream.next()
    assert await asyncio.wait_for(server[0].readexactly(5), BOUND_S) == b"early"
    await exchange(client, server, b"then")
    await proxy.close()


# -- in a simulation --------------------------------------------------------------------------


async def topology(sim: Simulation):
    """A consumer app on cc1, a provider app on cc2, both cluster controllers on gbid1."""
    cc1 = await sim.cluster_controller("cc1", ["gbid1"], provisioned=[(PROVIDER, MqttAddress("gbid1", "cc2"), True)])
    cc2 = await sim.cluster_controller("cc2", ["gbid1"])
    consumer = await sim.libjoynr("consumer", cc1)
    provider_app = await sim.libjoynr("provider-app", cc2)
    await provider_app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER)
    proxy = await consumer.create_proxy("joynrsim/Echo", PROVIDER)
    assert await proxy.call("echo", "before", ttl_ms=10_000) == "before"
    return cc1, cc2, consumer, proxy


def fault_events(run_dir: Path) -> list[dict]:
    found = [e for e in read_run(run_dir) if e["ev"].startswith("fault.")]
    for event in found:  # each as the catalogue declares it
        jsonschema.validate(event, trace_schema.json_schema(event["ev"]))
        assert event["rt"] == "faults" and event["kind"] == "runner"
    return found


async def until(predicate) -> None:
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached within the bound"
        await asyncio.sleep(0.02)


def published_requests(run_dir: Path) -> int:
    return sum(1 for e in read_run(run_dir) if e["ev"] == "msg.out" and e["rt"] == "cc1"
               and e["type"] == "rq" and e["via"] == "mqtt")


@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_a_provider_cc_partitioned_from_its_broker_gets_calls_after_heal(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker) as sim:
        cc1, cc2, consumer, proxy = await topology(sim)

        await sim.faults.partition("cc2", "gbid1")
        assert sim.faults.active("cc2", "gbid1") == "partition"
        await until(lambda: not cc2.mqtt["gbid1"].connected.is_set())
        with pytest.raises(JoynrTimeoutException):
            await proxy.call("echo", "cut off", ttl_ms=1_000)
        # A call made during the partition waits in cc2's session at the broker.
        sent = published_requests(tmp_path)
        waiting = asyncio.ensure_future(proxy.call("echo", "after", ttl_ms=30_000))
        await until(lambda: published_requests(tmp_path) > sent)
        assert not waiting.done()

        await sim.faults.heal("cc2", "gbid1")
        assert sim.faults.active("cc2", "gbid1") is None
        assert await waiting == "after"

    partition, heal = fault_events(tmp_path)
    assert partition["ev"] == "fault.partition" and partition["target"] == "cc2"
    assert partition["gbid"] == "gbid1" and partition["target_kind"] == "cluster-controller"
    assert partition["connections"] == 1
    assert heal["ev"] == "fault.heal" and heal["fault"] == "partition"


async def test_a_blackholed_libjoynr_link_times_calls_out_unnoticed_and_passes_after_heal(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], processes=False) as sim:
        cc1, cc2, consumer, proxy = await topology(sim)
        connection, served = consumer.ws._ws, cc1.ws_server.clients["consumer"]

        await sim.faults.blackhole("consumer")
        assert sim.faults.active("consumer") == "blackhole"
        with pytest.raises(JoynrTimeoutException):
            await proxy.call("echo", "held", ttl_ms=1_000)
        # Neither end noticed: the same connections, no reconnect.
        assert consumer.ws._ws is connection and cc1.ws_server.clients["consumer"] is served

        await sim.faults.heal("consumer")
        assert await proxy.call("echo", "through", ttl_ms=10_000) == "through"
        assert consumer.ws._ws is connection and cc1.ws_server.clients["consumer"] is served

    blackhole, heal = fault_events(tmp_path)
    assert (blackhole["ev"], blackhole["target"], blackhole["gbid"]) == ("fault.blackhole", "consumer", None)
    assert blackhole["target_kind"] == "libjoynr" and blackhole["connections"] == 1
    assert heal["fault"] == "blackhole"


async def test_a_partitioned_libjoynr_link_reconnects_after_heal(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], processes=False) as sim:
        cc1, cc2, consumer, proxy = await topology(sim)

        await sim.faults.partition("consumer")
        await until(lambda: not consumer.ws.connected and "consumer" not in cc1.ws_server.clients)
        with pytest.raises(JoynrTimeoutException):
            await proxy.call("echo", "refused", ttl_ms=1_000)

        await sim.faults.heal("consumer")
        await until(lambda: consumer.ws.connected)
        assert await proxy.call("echo", "reconnected", ttl_ms=10_000) == "reconnected"


async def test_a_libjoynr_start_tries_again_when_the_opening_handshake_is_not_answered(tmp_path, monkeypatch):
    # A starved cluster controller accepts the connection but answers the handshake late.
    monkeypatch.setattr(websocket, "OPEN_TIMEOUT_S", 0.3)
    async with Simulation(tmp_path, gbids=["gbid1"], processes=False) as sim:
        cc = await sim.cluster_controller("cc1")
        app = await sim.libjoynr("app", cc, start=False)
        await sim.faults.blackhole("app")
        link = sim.faults._link("app", None)
        starting = asyncio.create_task(app.start())
        # The first handshake timed out unanswered and the start tried again.
        await until(lambda: link.connections >= 2 or starting.done())
        assert not starting.done(), starting.exception()
        await sim.faults.heal("app")
        await starting
        assert app.ws.connected
        await until(lambda: "app" in cc.ws_server.clients)  # its hello, read on the server's loop turn


async def test_a_delayed_libjoynr_link_slows_a_call_by_at_least_the_delay_each_way(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], seed=3) as sim:
        cc1, cc2, consumer, proxy = await topology(sim)
        loop = asyncio.get_running_loop()

        await sim.faults.delay("consumer", ms=200, jitter_ms=20)
        start = loop.time()
        assert await proxy.call("echo", "slow", ttl_ms=10_000) == "slow"
        assert loop.time() - start >= 2 * 0.200  # the request up, the reply down
        await sim.faults.heal("consumer")

    delay, heal = fault_events(tmp_path)
    assert (delay["ev"], delay["ms"], delay["jitter_ms"]) == ("fault.delay", 200, 20)
    assert heal["fault"] == "delay"


async def test_bad_fault_arguments_are_one_line_naming_the_field(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1", "gbid2"]) as sim:
        cc = await sim.cluster_controller("cc1", ["gbid1"])
        await sim.libjoynr("app", cc)
        bad = [
            (sim.faults.partition("nobody", "gbid1"), "runtime_id: no runtime 'nobody'"),
            (sim.faults.partition("cc1", "gbid2"), "gbid: 'gbid2' is not one of 'cc1''s GBIDs ['gbid1']"),
            (sim.faults.blackhole("cc1"), "gbid: None given, but cluster-controller 'cc1' has one MQTT link"),
            (sim.faults.blackhole("app", "gbid1"), "gbid: 'gbid1' given, but libjoynr runtime 'app' has one link"),
            (sim.faults.delay("app", ms=-1), "ms: expected a whole number of milliseconds from 0 to 600000, got -1"),
            (sim.faults.delay("app"), "ms: required"),
            (sim.faults.delay("app", ms=5, jitter_ms=1.5), "jitter_ms: expected a whole number"),
            (sim.faults.heal("gcd-gbid2", "gbid2"), "runtime_id: link 'gcd-gbid2'/'gbid2' has no fault to heal"),
        ]
        for call, message in bad:
            with pytest.raises(ValueError) as err:
                await call
            assert str(err.value).startswith(message) and "\n" not in str(err.value)
        with pytest.raises(ValueError, match="runtime_id: 'faults' is reserved"):
            await sim.cluster_controller("faults", ["gbid1"])
        # Nothing was faulted and nothing traced.
        assert [sim.faults.active("cc1", "gbid1"), sim.faults.active("app"),
                sim.faults.active("gcd-gbid2", "gbid2")] == [None, None, None]
    assert not (tmp_path / "trace" / "faults.ndjson").exists()


async def test_without_faults_runtimes_connect_directly(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], faults=False, processes=False) as sim:
        cc1, cc2, consumer, proxy = await topology(sim)
        assert consumer.cc_address == cc1.ws_address
        assert cc1.endpoint.brokers is sim.brokers
        with pytest.raises(ValueError, match=r"runtime_id: this simulation runs without fault proxies"):
            await sim.faults.partition("cc1", "gbid1")
