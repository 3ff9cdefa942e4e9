"""A QoS 0 delivery and a replyTo topic outside the brokers' grants, sent by an outsider to
running cluster controllers (each in its own process) on real brokers: the QoS 0 request is
handled and never acknowledged, the replyTo is refused at decoding, and neither costs a
cluster controller its connection."""

from __future__ import annotations

import asyncio
import json

import msgpack
import pytest

from e2e_helpers import PROVIDER, BrokerClient, events, topology
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.message import REQUEST_REPLY_ID
from joynr_sim.fuzz.harness import fuzz
from joynr_sim.runtime.participants import (
    EchoProvider,
    JoynrTimeoutException,
    decode_reply,
    encode_request,
)
from joynr_sim.simulation import Simulation

pytestmark = pytest.mark.e2e

MQTT = "joynr.system.RoutingTypes.MqttAddress"
FRAMES = 20


def request(mid: str, reply_topic: str = "outsider") -> bytes:
    """A valid joynr request for the Echo provider, its reply going to ``reply_topic``."""
    reply_to = json.dumps({"_typeName": MQTT, "brokerUri": "gbid1", "topic": reply_topic})
    return msgpack.packb([1, "rq", mid, "outsider", PROVIDER, reply_to, 2**41, "NORMAL", [[REQUEST_REPLY_ID, mid]], 0,
                          encode_request("echo", [mid])], use_bin_type=True)


def connects(run_dir, rt: str) -> tuple[int, int]:
    """(connections attached, connections lost) of a runtime, from its trace."""
    return len(events(run_dir, "link.attach", rt=rt)), len(events(run_dir, "link.detach", rt=rt))


async def settle(predicate, timeout_s: float) -> None:
    """Wait until ``predicate`` holds or the bound passed; the assertions after say what was reached."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("broker", ["mosquitto", "amqtt"])
async def test_qos0_requests_are_handled_without_a_reconnect(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker) as sim:
        cc1, cc2, _, proxy = await topology(sim)
        assert await proxy.call("echo", "before", ttl_ms=10_000) == "before"
        before = connects(tmp_path, "cc2")
        outsider = BrokerClient(sim, "outsider", subscribe=True)
        try:
            ids = [f"qos0-{n}" for n in range(FRAMES)]
            for mid in ids:
                outsider.publish("cc2/low", request(mid), qos=0)
            # Handled: each request reached the provider and its reply came back.
            await settle(lambda: len(outsider.replies) == FRAMES, timeout_s=20)
            assert (len(outsider.replies), connects(tmp_path, "cc2")) == (FRAMES, before)
            assert await proxy.call("echo", "after", ttl_ms=10_000) == "after"
        finally:
            outsider.close()
        answered = sorted(decode_reply(msgpack.unpackb(r, raw=False)[10]) for r in outsider.replies)
        assert answered == sorted(ids)
        assert connects(tmp_path, "cc2") == before == (1, 0)  # the one connection, never lost
    received = {e["msg"] for e in events(tmp_path, "msg.in", rt="cc2", via="mqtt")}
    assert set(ids) <= received
    assert not events(tmp_path, "msg.drop", rt="cc2")


@pytest.mark.parametrize("broker", ["mosquitto", "amqtt"])
async def test_a_reply_topic_with_a_slash_is_refused_and_costs_no_reconnect(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker) as sim:
        cc1, cc2, _, proxy = await topology(sim)
        outsider = BrokerClient(sim, "outsider", subscribe=True)
        try:
            for n in range(FRAMES):
                # A topic within the outsider's own prefix: "outsider/x/low" is no unicast topic
                # anybody may publish to.
                outsider.publish("cc2/low", request(f"slash-{n}", reply_topic="outsider/x"), qos=1)
                if n % 5 == 4:  # legitimate calls between the two controllers go on meanwhile
                    assert await proxy.call("echo", f"call-{n}", ttl_ms=10_000) == f"call-{n}"
            await settle(lambda: len(events(tmp_path, "msg.drop", rt="cc2", reason="invalid-message")) == FRAMES, 10)
            refused = len(events(tmp_path, "msg.drop", rt="cc2", reason="invalid-message"))
            assert (refused, connects(tmp_path, "cc1"), connects(tmp_path, "cc2")) == (FRAMES, (1, 0), (1, 0))
            assert await proxy.call("echo", "after", ttl_ms=10_000) == "after"
        finally:
            outsider.close()
        for rt in ("cc1", "cc2"):
            assert connects(tmp_path, rt) == (1, 0)
    drops = events(tmp_path, "msg.drop", rt="cc2", reason="invalid-message")
    assert {d["field"] for d in drops} == {"rt.topic"} and all(d["msg"] is None for d in drops)
    assert all("outsider/x" in d["detail"] for d in drops)
    assert not outsider.replies
    assert not [e for e in events(tmp_path, "msg.out") if str(e.get("target", "")).endswith("outsider/x/low")]


async def test_a_route_to_a_topic_outside_the_grants_is_never_published(tmp_path):
    """A route whose topic has a '/' (here provisioned: a scenario's or a GCD entry's) is
    refused before the publish, naming the field: Mosquitto would disconnect the publisher."""
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto") as sim:
        cc1 = await sim.cluster_controller("cc1", ["gbid1"], provisioned=[
            (PROVIDER, MqttAddress("gbid1", "cc2"), True), ("elsewhere", MqttAddress("gbid1", "cc2/deeper"), True)])
        cc2 = await sim.cluster_controller("cc2", ["gbid1"])
        consumer = await sim.libjoynr("consumer", cc1)
        provider_app = await sim.libjoynr("provider-app", cc2)
        await provider_app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER)
        proxy = await consumer.create_proxy("joynrsim/Echo", PROVIDER)
        lost = await consumer.create_proxy("joynrsim/Echo", "elsewhere")
        for n in range(3):
            with pytest.raises(JoynrTimeoutException):  # the request was dropped before the broker
                await lost.call("echo", f"lost-{n}", ttl_ms=1_000)
            assert await proxy.call("echo", f"call-{n}", ttl_ms=10_000) == f"call-{n}"
        assert connects(tmp_path, "cc1") == (1, 0)
    drops = events(tmp_path, "msg.drop", rt="cc1", reason="invalid-message")
    assert len(drops) == 3 and all(d["detail"].startswith("to.topic:") and "cc2/deeper" in d["detail"] for d in drops)


async def test_a_fuzz_run_with_qos_0_frames_and_multilevel_reply_topics_costs_no_reconnect(tmp_path):
    report = await fuzz(tmp_path, frames=400, batch=200, broker="mosquitto", seed_value=3)
    assert report.qos0 and report.multilevel_reply_to
    assert (report.crashes, report.reconnects) == (0, 0) and report.fates == report.sent
