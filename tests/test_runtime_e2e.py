"""End to end on real brokers: libjoynr proxy -> CC1 -> broker -> CC2 -> libjoynr provider."""

from __future__ import annotations

import asyncio
from collections import Counter

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from e2e_helpers import events, until
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.message import JoynrMessage, encode
from joynr_sim.runtime.participants import (
    AddProvider,
    ApplicationException,
    EchoProvider,
    JoynrTimeoutException,
    MethodInvocationException,
)
from joynr_sim.simulation import Simulation

pytestmark = pytest.mark.e2e  # every test runs brokers and runtimes

PROVIDER = "echo-provider"
BROKERS = ["amqtt", "mosquitto"]


async def topology(sim: Simulation):
    """CC1 on gbid1, CC2 on gbid1 and gbid2; a proxy app on CC1, a provider app on CC2."""
    cc1 = await sim.cluster_controller(
        "cc1", ["gbid1"], provisioned=[(PROVIDER, MqttAddress("gbid1", "cc2"), True)]
    )
    cc2 = await sim.cluster_controller("cc2", ["gbid1", "gbid2"])
    consumer = await sim.libjoynr("consumer", cc1)
    provider_app = await sim.libjoynr("provider-app", cc2)
    await provider_app.register_provider(
        "dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER, scope="GLOBAL"
    )
    proxy = await consumer.create_proxy("joynrsim/Echo", PROVIDER)
    return cc1, cc2, consumer, provider_app, proxy


@pytest.mark.parametrize("broker", BROKERS)
async def test_call_crosses_two_cluster_controllers_and_the_broker(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1", "gbid2"], broker=broker) as sim:
        cc1, cc2, consumer, provider_app, proxy = await topology(sim)
        assert await proxy.call("echo", "hello", ttl_ms=10_000) == "hello"

    # The request went libjoynr -> cc1 over ws, cc1 -> cc2 over MQTT on gbid1, cc2 -> app over ws.
    # Runtimes share a millisecond clock; the hop counter orders the path.
    requests = sorted(events(tmp_path, "msg.out", type="rq", to=PROVIDER), key=lambda e: e["hops"])
    path = [(e["rt"], e["via"], e["gbid"]) for e in requests]
    assert path == [
        ("consumer", "ws", None),
        ("cc1", "mqtt", "gbid1"),
        ("cc2", "ws", None),
        ("provider-app", "inprocess", None),
    ]
    # cc2 learnt the route back to the proxy from the request's replyTo, on the arrival GBID.
    learnt = events(tmp_path, "rt.put", rt="cc2", participant=proxy.participant_id, origin="reply-to")
    assert learnt and learnt[0]["outcome"] == "created"
    assert learnt[0]["entry"]["type"] == "Mqtt" and learnt[0]["entry"]["addr"] == "gbid1/cc1"
    # The hop counter grew by one per runtime.
    delivered = events(tmp_path, "msg.deliver", rt="provider-app", type="rq")
    assert [e["hops"] for e in requests] == [0, 1, 2, 3]
    assert [e["hops"] for e in delivered] == [3]
    replies = events(tmp_path, "msg.deliver", rt="consumer", type="rp", to=proxy.participant_id)
    assert len(replies) == 1 and replies[0]["corr"] == requests[0]["corr"]


@pytest.mark.parametrize("broker", BROKERS)
async def test_provider_runtime_crash_times_out_then_restart_recovers(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1", "gbid2"], broker=broker, processes=False) as sim:
        cc1, cc2, consumer, provider_app, proxy = await topology(sim)
        assert await proxy.call("echo", "before", ttl_ms=10_000) == "before"

        await provider_app.crash()
        # Seed 000: cc2 keeps the provider's WebSocketClient route while it is down; a
        # request for it finds no connection there and is dropped, traced.
        await until(lambda: "provider-app" not in cc2.ws_server.clients)
        assert type(cc2.table.lookup(PROVIDER).address).__name__ == "WebSocketClientAddress"
        with pytest.raises(JoynrTimeoutException):
            await proxy.call("echo", "lost", ttl_ms=1_000)
        lost = [e for e in events(tmp_path, "msg.in", rt="cc2", type="rq") if e["to"] == PROVIDER][-1]
        await until(lambda: [e["ev"] for e in events(tmp_path, msg=lost["msg"]) if e["rt"] == "cc2"][-1:]
                    == ["msg.drop"])
        (drop,) = events(tmp_path, "msg.drop", rt="cc2", msg=lost["msg"])
        assert drop["reason"] == "no-connection" and drop["via"] == "ws"

        await provider_app.restart()
        await provider_app.register_provider(
            "dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER, scope="GLOBAL"
        )
        assert await proxy.call("echo", "after", ttl_ms=10_000) == "after"


@pytest.mark.parametrize("broker", BROKERS)
async def test_broker_crash_and_restart_reconnects_without_duplicates(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1", "gbid2"], broker=broker) as sim:
        cc1, cc2, consumer, provider_app, proxy = await topology(sim)
        assert await proxy.call("echo", "one", ttl_ms=10_000) == "one"

        await sim.brokers.crash_broker("gbid1")
        await until(lambda: not cc1.mqtt["gbid1"].connected.is_set())
        await sim.brokers.restart_broker("gbid1")
        await until(lambda: cc1.mqtt["gbid1"].connected.is_set() and cc2.mqtt["gbid1"].connected.is_set())
        results = await asyncio.gather(*(proxy.call("echo", f"m{i}", ttl_ms=15_000) for i in range(20)))
        assert results == [f"m{i}" for i in range(20)]

    delivered = Counter((e["rt"], e["msg"]) for e in events(tmp_path, "msg.deliver"))
    assert delivered and max(delivered.values()) == 1


async def test_typed_error_replies(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto") as sim:
        cc = await sim.cluster_controller("cc1")
        app = await sim.libjoynr("app", cc)
        other = await sim.libjoynr("other", cc)
        await app.register_provider("dom", "joynrsim/Add", AddProvider(), participant_id="adder")
        proxy = await other.create_proxy("joynrsim/Add", "adder")
        assert await proxy.call("add", 2, 3) == 5
        with pytest.raises(ApplicationException) as err:
            await proxy.call("add", "a", 3)
        assert err.value.error == "INVALID_ARGUMENT"
        with pytest.raises(MethodInvocationException):
            await proxy.call("subtract", 2, 3)


@pytest.mark.parametrize("broker", BROKERS)
async def test_garbage_is_dropped_as_decode_error_and_the_runtime_keeps_serving(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1", "gbid2"], broker=broker, processes=False) as sim:
        cc1, cc2, consumer, provider_app, proxy = await topology(sim)
        host, port = sim.brokers.endpoint("gbid1")
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id="garbage-sender", protocol=paho.MQTTv311)
        client.username_pw_set(*sim.brokers.credentials("garbage-sender"))
        client.connect(host, port)
        client.loop_start()
        unknown_type = encode(JoynrMessage("rq", "x", PROVIDER, 2**40)).replace(b"\xa2rq", b"\xa2zz")
        for payload in (b"\x00\xffnot msgpack", unknown_type):
            client.publish("cc2/low", payload, qos=1).wait_for_publish(5)
        client.disconnect()
        client.loop_stop()
        # A garbage WebSocket frame, and a text frame where binary is expected.
        await consumer.ws.send(b"\xc1garbage")
        await consumer.ws.send("text frame")
        await until(lambda: len(events(tmp_path, "msg.drop", reason="decode-error")) == 4)
        assert await proxy.call("echo", "still here", ttl_ms=10_000) == "still here"

    drops = events(tmp_path, "msg.drop", reason="decode-error")
    assert sorted((e["rt"], e["via"]) for e in drops) == [
        ("cc1", "ws"), ("cc1", "ws"), ("cc2", "mqtt"), ("cc2", "mqtt"),
    ]


async def test_a_cluster_controller_can_drop_a_gone_clients_routes_as_joynr_cpp_does(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1", "gbid2"]) as sim:
        cc1 = await sim.cluster_controller(
            "cc1", ["gbid1"], provisioned=[(PROVIDER, MqttAddress("gbid1", "cc2"), True)]
        )
        cc2 = await sim.cluster_controller("cc2", ["gbid1", "gbid2"], on_client_disconnect="remove")
        consumer = await sim.libjoynr("consumer", cc1)
        provider_app = await sim.libjoynr("provider-app", cc2)
        await provider_app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER)
        proxy = await consumer.create_proxy("joynrsim/Echo", PROVIDER)
        assert await proxy.call("echo", "before", ttl_ms=10_000) == "before"
        await provider_app.crash()
        # The route goes with the connection; a request waits at cc2 for a route and,
        # once expired, is dropped there.
        await until(lambda: PROVIDER not in cc2.table)
        with pytest.raises(JoynrTimeoutException):
            await proxy.call("echo", "lost", ttl_ms=1_000)
        sim.clock.advance(2_000)
        lost = [e for e in events(tmp_path, "msg.in", rt="cc2", type="rq") if e["to"] == PROVIDER][-1]
        stops = [(e["ev"], e.get("reason")) for e in events(tmp_path, msg=lost["msg"]) if e["rt"] == "cc2"]
        assert stops[-2:] == [("msg.queue", "no-route"), ("msg.drop", "expired")]


@pytest.mark.parametrize("unfixed", [False, True])
async def test_a_restarted_runtime_never_sends_its_cluster_controllers_messages_back(tmp_path, unfixed):
    """The loop joynr fixed in 1.17.3 / 1.18.1: a libjoynr runtime restarts; a request for
    its provider, not yet registered again, arrives from the cluster controller (which kept
    the provider's WebSocketClient entry). The fixed runtime holds it until the provider is
    back; the unfixed one sends it back, and the two pass it to and fro until the hop limit."""
    async with Simulation(tmp_path, gbids=["gbid1"]) as sim:
        cc = await sim.cluster_controller("cc1", ["gbid1"])
        app = await sim.libjoynr("app", cc, route_back_to_parent=unfixed)
        consumer = await sim.libjoynr("consumer", cc)
        await app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="p", scope="LOCAL")
        proxy = await consumer.create_proxy("joynrsim/Echo", "p")
        assert await proxy.call("echo", "first", ttl_ms=10_000) == "first"
        await app.crash()
        await app.start()
        # long enough for 32 hops to and fro on a loaded machine before it expires
        call = asyncio.ensure_future(proxy.call("echo", "again", ttl_ms=10_000))
        await until(lambda: any(e["to"] == "p" for e in events(tmp_path, "msg.in", rt="app", type="rq")[1:]))
        if unfixed:  # the request passes to and fro until the hop limit ends it
            await until(lambda: events(tmp_path, "msg.drop", reason="hop-limit"))
        await app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="p", scope="LOCAL")
        if unfixed:
            with pytest.raises(JoynrTimeoutException):
                await call
        else:
            assert await call == "again"
    hop_limit = events(tmp_path, "msg.drop", reason="hop-limit")
    assert bool(hop_limit) is unfixed
